"""Rockafka's Python SDK for the RocketMQ remoting protocol.

``Producer`` (sync / async / oneway / ordered / batch), ``PushConsumer`` (concurrent listener,
clustering or broadcasting, TAG or SQL92 subscriptions, pluggable rebalance strategies),
``LitePullConsumer`` (subscribe or assign, seek, poll, commit) and ``Admin`` (topics, message
queries, consumer progress). The API is synchronous; network work runs on a private event loop.
"""

from .message import (
    ConsumeStatus, Message, MessageClientExt, MessageQueue, MessageSelector, MQBrokerError, MQClientError, SendResult, SendStatus,
)
from .producer import Producer, select_by_hash
from .push_consumer import ConsumeContext, PushConsumer
from .orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from .transaction_producer import (
    LocalTransactionState, TransactionListener, TransactionProducer, TransactionSendResult,
)
from .rebalance import (
    AllocateAverage, AllocateAverageByCircle, AllocateByConfig, AllocateConsistentHash, AllocateMachineRoomNearby,
)

__all__ = [
    "Producer", "PushConsumer", "ConsumeContext", "Message", "MessageClientExt", "MessageQueue", "MessageSelector",
    "SendResult", "SendStatus", "ConsumeStatus", "MQClientError", "MQBrokerError", "select_by_hash",
    "AllocateAverage", "AllocateAverageByCircle", "AllocateConsistentHash", "AllocateMachineRoomNearby", "AllocateByConfig",
    "ConsumeOrderlyStatus", "ConsumeOrderlyContext", "TransactionProducer", "TransactionListener", "TransactionSendResult", "LocalTransactionState",
]

try:  # optional parts are imported lazily by name below
    from .lite_pull_consumer import LitePullConsumer  # noqa: F401
    from .admin import Admin  # noqa: F401
    __all__ += ["LitePullConsumer", "Admin"]
except ImportError:  # pragma: no cover
    pass
