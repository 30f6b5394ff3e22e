"""Reading messages: which topics are the node's own, and the one check every read path makes
(docs/design/security.md, "Reading messages").

- **Internal topics** (``is_internal_topic``) hold the node's state, not users' data: the
  security records (``rmq_sys_SECURITY``: credentials), the Kafka coordinators' state
  (``__consumer_offsets``, ``__transaction_state``), delayed and timer messages of every topic
  (``SCHEDULE_TOPIC_XXXX``, ``rmq_sys_wheel_timer``), half and op messages of transactions
  (``RMQ_SYS_TRANS_*``), POP revive logs and traces (``rmq_sys_*`` / ``RMQ_SYS_*``). Once
  ``authorizationEnabled`` only a super user (the node's inner principal among them) may do
  anything with them, whatever the ACLs say — Kafka answers TOPIC_AUTHORIZATION_FAILED for an
  internal topic a principal may not describe, RocketMQ refuses its system topics to non-admin
  accounts. The security topic is refused even with authorization off. Writing traces to
  ``RMQ_SYS_TRACE_TOPIC`` is the one exception (trace-enabled clients send there under their
  own PUB grant); reading them is not.
- **The read rule** (``read_resource``): reading a message is READ on the topic the message
  is in; a ``%RETRY%<group>`` / ``%DLQ%<group>`` topic belongs to its group (READ group, as
  RocketMQ). A message looked up by id is checked against the topic found in the log, never a
  topic the request names.
- **The read paths** (``READ_PATHS``): every way a client can get a message's content, by
  protocol, with the request that does it. Each gateway checks through
  ``SecurityService.may_read``; tests walk this table with real clients, and a registered
  request that is not classified fails them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .acl import Operation, ResourceType

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
# exact names; the prefixes below cover the rest (rmq_sys_SECURITY, rmq_sys_wheel_timer,
# rmq_sys_REVIVE_LOG_*, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, RMQ_SYS_TRACE_TOPIC)
INTERNAL_TOPIC_NAMES = frozenset({"__consumer_offsets", "__transaction_state", "SCHEDULE_TOPIC_XXXX"})
INTERNAL_TOPIC_PREFIXES = ("rmq_sys_", "RMQ_SYS_")
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
# what an ordinary principal may still do on an internal topic, per its ACLs
_ORDINARY_ON_INTERNAL = {TRACE_TOPIC: frozenset({Operation.WRITE, Operation.DESCRIBE})}


def is_internal_topic(topic: str | None) -> bool:
    return bool(topic) and (topic in INTERNAL_TOPIC_NAMES or topic.startswith(INTERNAL_TOPIC_PREFIXES))


def ordinary_may(op: Operation, topic: str) -> bool:
    """Whether the ACLs may decide ``op`` on ``topic`` for a principal that is not a super user
    (False: an internal topic, refused whatever the ACLs say)."""
    if not is_internal_topic(topic):
        return True
    return op in _ORDINARY_ON_INTERNAL.get(topic, ())


def read_resource(topic: str) -> tuple[Operation, ResourceType, str]:
    """What reading a message of ``topic`` needs: READ on the topic, or on the group a retry /
    DLQ topic belongs to."""
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if topic.startswith(prefix):
            return Operation.READ, ResourceType.GROUP, topic[len(prefix):]
    return Operation.READ, ResourceType.TOPIC, topic


@dataclass(frozen=True)
class ReadPath:
    protocol: str   # kafka | remoting | grpc | admin | cli
    request: str    # the API / request code / RPC / route
    checked: str    # where the check is made


# Every request that answers message content (or offsets / metadata of a topic an ordinary
# principal may not see). The remoting entries name request codes, the Kafka ones API names,
# the gRPC ones RPCs, the admin ones routes.
READ_PATHS: tuple[ReadPath, ...] = (
    ReadPath("remoting", "PULL_MESSAGE", "gateway_native/security.py: READ topic and group"),
    ReadPath("remoting", "LITE_PULL_MESSAGE", "gateway_native/security.py: READ topic and group"),
    ReadPath("remoting", "POP_MESSAGE", "gateway_native/security.py: READ topic and group"),
    ReadPath("remoting", "QUERY_MESSAGE", "gateway_native/security.py: READ topic (the index answers only that topic's units)"),
    ReadPath("remoting", "VIEW_MESSAGE_BY_ID", "processors/query.py: READ on the topic of the message found"),
    ReadPath("remoting", "CONSUMER_SEND_MSG_BACK", "processors/send_back.py: READ on the topic of the message copied"),
    ReadPath("remoting", "GET_MAX_OFFSET", "gateway_native/security.py: DESCRIBE topic"),
    ReadPath("remoting", "GET_MIN_OFFSET", "gateway_native/security.py: DESCRIBE topic"),
    ReadPath("remoting", "SEARCH_OFFSET_BY_TIMESTAMP", "gateway_native/security.py: DESCRIBE topic"),
    ReadPath("remoting", "GET_ROUTEINFO_BY_TOPIC", "gateway_native/security.py: DESCRIBE topic"),
    ReadPath("cli", "rockafka admin query id", "the remoting VIEW_MESSAGE_BY_ID row, signed with the caller's keys"),
    ReadPath("cli", "rockafka admin query key", "the remoting QUERY_MESSAGE row, signed with the caller's keys"),
    ReadPath("kafka", "Fetch", "gateway_kafka/apis/fetch.py: READ topic"),
    ReadPath("kafka", "ShareFetch", "gateway_kafka/apis/share_fetch.py: READ topic"),
    ReadPath("kafka", "ListOffsets", "gateway_kafka/apis/list_offsets.py: DESCRIBE topic"),
    ReadPath("kafka", "OffsetForLeaderEpoch", "gateway_kafka/apis/offset_for_leader_epoch.py: DESCRIBE topic"),
    ReadPath("kafka", "ConsumerGroupHeartbeat", "gateway_kafka/authz.py: DESCRIBE each subscribed topic"),
    ReadPath("kafka", "Metadata", "gateway_kafka/apis/metadata.py: DESCRIBE topic (others left out)"),
    ReadPath("kafka", "DescribeTopicPartitions", "gateway_kafka/apis/describe_topic_partitions.py: DESCRIBE topic"),
    ReadPath("grpc", "ReceiveMessage", "gateway_grpc/security.py: READ topic and group"),
    ReadPath("grpc", "QueryRoute", "gateway_grpc/security.py: DESCRIBE topic"),
    ReadPath("admin", "GET /api/messages", "rockafka/admin_http.py: READ on each message's topic"),
    ReadPath("admin", "GET /api/messages/{msg_id}", "rockafka/admin_http.py: READ on the message's topic"),
    ReadPath("admin", "GET /messages", "rockafka/admin_http.py (the console's search): READ on each message's topic"),
    ReadPath("admin", "GET /api/dlq/{group}", "rockafka/admin_security.py: READ group"),
    ReadPath("admin", "GET /dlq/{group}", "rockafka/admin_security.py: READ group"),
    ReadPath("admin", "POST /api/dlq/{group}/resend", "rockafka/admin_security.py: READ group"),
)
