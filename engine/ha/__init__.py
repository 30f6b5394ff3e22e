"""Replication of the commitlog between a master and its slaves (RocketMQ's ``store/ha``).

- ``epoch``: the epoch -> start-offset file and the consistent point of two logs;
- ``protocol``: the HA wire format (sans-IO);
- ``master``: the HA listener and one streaming connection per slave;
- ``slave``: the slave's client (handshake, truncation, applying data and metadata);
- ``metadata``: documents outside the log a slave copies;
- ``service``: ``HAService``, the store's ``ha`` attribute, chosen by ``brokerRole``.

Design and formats: ``docs/design/replication.md``. No client protocol is known here.
"""

from .errors import ReplicationError
from .service import FLUSH_SLAVE_TIMEOUT, PUT_OK, SLAVE_NOT_AVAILABLE, HAService

__all__ = ["HAService", "ReplicationError", "PUT_OK", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"]
