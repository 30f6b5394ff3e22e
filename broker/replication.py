"""What a gateway may know of, and tell, replication: the facade over the engine's HA service.

The engine owns replication (``engine/ha/``: the connection, epochs, truncation); a gateway only
asks "may this node take a write now?", "how many replicas are in sync?" and reports what the
failover controller decided. This facade is the whole of that conversation, so no gateway
reaches into ``store.ha`` (tests/test_layering.py fails when one does).

Invariant: every method reads ``store.ha`` afresh (a store keeps one HA service for its life,
but the facade holds no state of its own to go stale).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Iterable


class LoopAcks:
    """The node's event loop as the engine's HA service sees it (``store.ha.loop_hook``): a
    master reads its slaves' ACKs there, so a SYNC_MASTER answer costs one wake-up (the loop's,
    on the ACK) instead of two. Create it on the loop's own thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._thread = threading.get_ident()

    def on_loop(self) -> bool:
        return threading.get_ident() == self._thread

    def call(self, fn: Callable[[], None]) -> bool:
        """Run ``fn`` on the loop: now when on its thread, else scheduled. False: the loop is
        closed (``fn`` will not run)."""
        if threading.get_ident() == self._thread:
            fn()
            return True
        try:
            self.loop.call_soon_threadsafe(fn)
        except RuntimeError:
            return False
        return True

    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        self.loop.add_reader(fd, callback)

    def remove_reader(self, fd: int) -> None:
        if not self.loop.is_closed():
            self.loop.remove_reader(fd)


class Replication:
    def __init__(self, store: Any):
        self._store = store

    @property
    def available(self) -> bool:
        """The store replicates at all (a stand-in store in a test may not)."""
        return getattr(self._store, "ha", None) is not None

    # -- may this node write? -------------------------------------------------------------
    @property
    def is_master(self) -> bool:
        return self._store.ha.is_master

    def lease_valid(self) -> bool:
        """False while a controller-mode master's lease is expired (puts and waits refused)."""
        return self._store.ha.lease_valid()

    def in_sync_count(self) -> int:
        """In-sync slaves (the master not counted)."""
        return self._store.ha.in_sync_count()

    def has_replicas(self) -> bool:
        """Some slave is connected, or a SyncStateSet is in force (controller mode)."""
        ha = self._store.ha
        return bool(ha.connections()) or bool(ha.sync_state_set)

    def in_sync_slave_ids(self) -> list[int]:
        return [v["brokerId"] for v in self._store.ha.in_sync_slaves()]

    def slave_identities(self) -> dict[int, dict[str, Any]]:
        """What each connected slave told about itself (addresses, Kafka listener), by broker id."""
        return {c.broker_id: c.identity for c in self._store.ha.connections()}

    @property
    def listen_port(self) -> int | None:
        """The port the HA service listens on (None before it bound one)."""
        return getattr(getattr(self._store, "ha", None), "port", None)

    @property
    def state_version(self) -> int:
        """Grows when connected or in-sync slaves change."""
        return int(getattr(getattr(self._store, "ha", None), "state_version", 0))

    @property
    def master_epoch(self) -> int:
        return self._store.ha.master_epoch

    def runtime_info(self) -> dict[str, Any]:
        """Role, epoch, slaves and their lag (master) / master and how far behind (slave)."""
        return self._store.ha.runtime_info()

    def local_in_sync_ids(self) -> list[int]:
        return self._store.ha.local_in_sync_ids()

    @property
    def identity(self) -> dict[str, Any]:
        """What this node, as a slave, tells its master about itself (addresses)."""
        return self._store.ha.identity

    def read_acks_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read the slaves' ACKs on ``loop`` (the caller's running loop; call on its thread,
        before the store starts). Connections already streaming keep their reader thread."""
        self._store.ha.loop_hook = LoopAcks(loop)

    def batch_pushes(self, more: bool) -> None:
        """Called on the loop by a gateway before each put of a request: ``more`` requests are
        already received (handled in this same step), so the slaves get the batch's puts in
        one push, made by its last put (engine.ha)."""
        self._store.ha.batch_pushes(more)

    def wake_dispatcher(self) -> None:
        """Replicated writes were answered: let the dispatcher index them now (engine.ha
        leaves it asleep during the round trip to the slaves)."""
        self._store.ha.wake_dispatcher()

    # -- what the failover controller and the NameServer decided ---------------------------
    def update_master_address(self, address: str | None) -> None:
        self._store.ha.update_master_address(address)

    def set_sync_state_set(self, slave_ids: Iterable[int] | None) -> None:
        self._store.ha.set_sync_state_set(slave_ids)

    def set_lease(self, lease: Any) -> None:
        """The controller's master lease (engine.controller.lease.MasterLease) fencing puts."""
        self._store.ha.lease = lease
