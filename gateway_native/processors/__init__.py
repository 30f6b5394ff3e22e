"""Broker request processors: one module per request-code family, registered in one table.

``BROKER_PROCESSORS`` maps a request code to its handler (``async (broker, conn, cmd) ->
response | None``); registering a code twice fails at import. Codes without a processor are
answered REQUEST_CODE_NOT_SUPPORTED with a remark (``gateway_native.dispatch``). Later
families (CONSUMER_SEND_MSG_BACK, END_TRANSACTION, LOCK_BATCH_MQ / UNLOCK_BATCH_MQ) slot in as
new modules imported below.
"""

from __future__ import annotations

from ..dispatch import ProcessorTable

BROKER_PROCESSORS = ProcessorTable("broker")

from . import send, pull, client_manage, consumer_offsets, queue_offsets, query, topics  # noqa: E402,F401  (registration)
from . import stats  # noqa: E402,F401  (registration)
from . import transaction  # noqa: E402,F401  (registration)
from . import queue_lock  # noqa: E402,F401  (registration)
from . import send_back  # noqa: E402,F401  (registration)
from . import admin_ops  # noqa: E402,F401  (registration)
from . import pop  # noqa: E402,F401  (registration)
from . import broker_admin  # noqa: E402,F401  (registration)
from . import acl_config  # noqa: E402,F401  (registration)
from . import auth_admin  # noqa: E402,F401  (registration)
