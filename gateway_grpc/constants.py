"""What the gRPC front's parts share: the proxy's defaults and how a FIFO message
group picks its queue."""

from __future__ import annotations

from engine.message import java_hash

DEFAULT_PORT = 8081
TXN_GROUP_PREFIX = "%GRPC_TXN%"  # producer group of gRPC half messages (gRPC producers have none)
DEFAULT_INVISIBLE_MS = 60_000     # auto_renew receives (PushConsumer): RocketMQ's defaultInvisibleTimeMills
LONG_POLLING_MS = 20_000          # what the proxy tells consumers (grpcClientConsumerMaxLongPollingTimeoutMillis)
CUSTOMIZED_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)


def queue_for_group(group: str, n: int) -> int:
    """The queue of a FIFO message group: the same group always lands in the same queue (Java's
    ``String.hashCode``, as the proxy computes it)."""
    return abs(java_hash(group) % n) if n > 0 else 0
