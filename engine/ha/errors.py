"""Errors of replication (``engine.ha``)."""

from __future__ import annotations

from ..errors import StoreError


class ReplicationError(StoreError):
    """Replicated bytes that do not continue the slave's log, or a handshake that cannot go on:
    the HA connection is closed and, for the slave, retried after a pause."""
