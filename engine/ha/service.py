"""HAService: the store's replication, as its role says (``store.ha``).

Master (ASYNC_MASTER / SYNC_MASTER): opens a new epoch at start, accepts slaves on the HA port
(``master.HAServer``), streams the commitlog to them, tracks which are in sync and completes
replication waits. Slave: runs ``slave.HAClient`` against ``haMasterAddress`` or the address
the NameServer named (``update_master_address``).

What the rest of the node uses:
- ``wait_replicated(end_offset, min_replicas, timeout_s)`` -> ``concurrent.futures.Future``
  resolving to ``(status, error)``; status ``PUT_OK`` when every in-sync slave acked
  ``end_offset`` and at least ``min_replicas`` of them did, ``SLAVE_NOT_AVAILABLE`` when fewer
  than ``min_replicas`` slaves are in sync (at the start or at any point of the wait),
  ``FLUSH_SLAVE_TIMEOUT`` after ``timeout_s``. ``wait_replicated_blocking`` waits for it.
- ``in_sync_slaves()``: views of the slaves in sync now; ``runtime_info()``: everything for
  operations (GET_BROKER_RUNTIME_INFO, /metrics, the admin API); ``state_version`` grows
  whenever the set of connected or in-sync slaves changes (the broker re-registers then).
- ``notify_append()``: called by the put path; sends the new bytes to each idle connection at
  once (``SlaveConnection.push``) and wakes the writers of the others. ``wake_writers()``: a
  topic changed (the writers send the document before more data).

Controller mode (``docs/design/failover.md``): ``sync_state_set`` holds the slave broker ids of
the SyncStateSet the controller confirmed (None without a controller). Then a slave counts as in
sync only while it is a member, and a wait needs the acks of every member — with
``allAckInSyncStateSet=false`` (RocketMQ's default) every member whose HA connection still
streams, with ``true`` every member until the controller confirmed its removal.
``local_in_sync_ids()`` is what the master itself sees, which it proposes to the controller.
``min_sync_slaves()`` is how many slaves a SYNC_MASTER put needs (``minInSyncReplicas`` - 1 with a
controller, so a master whose SyncStateSet is itself alone acknowledges, as Kafka's acks=all does
on an ISR of one; 1 without, 0 with ``enableAutoInSyncReplicas``), and ``in_sync_refusal()`` the
reason to refuse a put before storing it (RocketMQ's IN_SYNC_REPLICAS_NOT_ENOUGH), if any.
``lease`` (an ``engine.controller.lease.MasterLease``) fences a master the controller no longer
confirms: with an expired lease no wait completes with PUT_OK.

Threads: ``ha-transfer`` re-evaluates the in-sync set (it also changes with time alone) and
times waits out; acks complete waits at once where they are read: on the node's event loop when
``loop_hook`` is set (see ``master``), else on the connection's reader thread. A hook has
``call(fn) -> bool`` (run ``fn`` on the loop: at once on the loop's thread, else scheduled;
False when the loop is gone), ``add_reader(fd, cb)`` / ``remove_reader(fd)`` (on the loop only)
and ``on_loop()``. A blocking wait (``wait_replicated_blocking``: a store put that waits for the
slaves inside the call) made on the loop's thread reads the loop-read connections itself until
it is answered -- the loop is blocked in it, so nobody else would.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import structlog

from . import metadata
from .epoch import EpochEntry, EpochFile

log = structlog.get_logger("rockafka.engine.ha")

PUT_OK, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE = "PUT_OK", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"
TICK_S = 0.1


@dataclass(order=True)
class _Waiter:
    end: int
    seq: int
    min_replicas: int = field(compare=False)
    deadline: float = field(compare=False)
    future: Future = field(compare=False)


def _end(w: _Waiter) -> int:
    return w.end


_PUT_DONE = (PUT_OK, None)


class HAService:
    def __init__(self, store: Any):
        self.store = store
        cfg = store.config
        self.heartbeat_s = cfg.ha_send_heartbeat_interval / 1000.0
        self.housekeeping_s = cfg.ha_housekeeping_interval / 1000.0
        self.batch_size = cfg.ha_transfer_batch_size
        self.max_not_catchup_s = cfg.ha_max_time_slave_not_catchup / 1000.0
        self.metadata_interval_s = cfg.ha_sync_metadata_interval / 1000.0
        self.bind_host = "0.0.0.0"  # the node sets its listen address before the store starts
        self.listen_port = store.broker_config.ha_listen_port
        self.identity: dict[str, Any] = {}  # what a slave tells its master about itself (addresses)
        # security (docs/design/security.md), set by the node before the store starts:
        # master: ``tls_server`` = (mode, ssl context), mode permissive or enforcing;
        # ``hello_verifier(identity_bytes, auth) -> (principal | None, why)``;
        # ``may_replicate(principal) -> bool``; ``auth_required``: refuse a HELLO without a
        # valid signature. Slave: ``tls_client`` (ssl context), ``hello_signer(identity_bytes)
        # -> auth dict | None``.
        self.tls_server: tuple[str, Any] | None = None
        self.tls_client: Any = None
        self.hello_verifier: Any = None
        self.hello_signer: Any = None
        self.may_replicate: Any = None
        self.cert_principal: Any = None  # master: TLS socket -> principal of its client certificate
        self.auth_required = False
        self.epochs = EpochFile(os.path.join(store.root, "ha", "epoch"))
        self.started_at = time.monotonic()
        self.truncated_bytes = 0
        self.state_version = 0
        self._lock = threading.RLock()
        self._conns: list[Any] = []
        self._waiters: list[_Waiter] = []  # in log order (end offset, then arrival)
        # bounds over the waiters, kept on registration and recomputed by every full pass: while
        # the lease holds, enough slaves are in sync for the most demanding waiter and no
        # deadline has come, only acknowledgements complete waits -- a prefix of the list
        self._most_replicas = 0
        self._first_deadline = float("inf")
        self._seq = 0
        self._in_sync_ids: tuple = ()
        self._server = None
        self._client = None
        self._transfer: threading.Thread | None = None
        self._stop = threading.Event()
        self._tick = threading.Condition(self._lock)
        self._meta_cache: tuple[float, dict[str, bytes]] | None = None
        self.running = False
        # controller mode: the confirmed SyncStateSet's slave ids, and the master's lease
        self.sync_state_set: frozenset[int] | None = None
        self.lease: Any = None
        # the node's event loop, if any: ACKs are read there (set before the store starts)
        self.loop_hook: Any = None
        # puts of a request batch the loop handles in one step leave their bytes to the
        # batch's last put, which pushes them all (``batch_pushes``)
        self._push_deferred = False
        self._push_scheduled = False

    # -- role ----------------------------------------------------------------------------------
    @property
    def role(self) -> str:
        return self.store.config.broker_role

    @property
    def is_master(self) -> bool:
        return self.role != "SLAVE"

    @property
    def port(self) -> int | None:
        return self._server.port if self._server is not None else None

    @property
    def master_epoch(self) -> int:
        return self.epochs.last_epoch

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self.epochs.load()
        self._stop.clear()
        self.started_at = time.monotonic()
        if self.is_master:
            self._become_master()
        else:
            from .slave import HAClient

            self._client = HAClient(self)
            self._client.start()
        self.running = True

    def _become_master(self, epoch: int | None = None) -> None:
        from .master import HAServer

        store = self.store
        start = store.confirmed_offset if self.epochs.last() is not None else store.commitlog.min_offset
        entry = self.epochs.open_epoch(start, epoch)
        log.info("ha_master_epoch", epoch=entry.epoch, start_offset=entry.start_offset, role=self.role)
        self._server = HAServer(self, self.bind_host, self.listen_port)
        self._server.start()
        self._transfer = threading.Thread(target=self._transfer_loop, name="ha-transfer", daemon=True)
        self._transfer.start()

    def change_role(self, role: str, master_address: str | None = None, epoch: int | None = None) -> None:
        """Become master (a new epoch opens at the log's end — ``epoch`` when a controller hands
        it out —, the HA port listens) or slave (of ``master_address``, or the one the NameServer
        names next). Waits in progress fail with SLAVE_NOT_AVAILABLE when a master steps down.
        The store's ``change_role`` calls this."""
        if (role == "SLAVE") == (self._client is not None) and (self._server is not None or self._client is not None):
            self.store.config.broker_role = role  # already on that side (a master flavour change)
            if role == "SLAVE" and master_address:
                self.update_master_address(master_address)
            return
        self._stop_side()
        self.store.config.broker_role = role
        self._stop.clear()
        if role != "SLAVE":
            self._become_master(epoch)
        else:
            from .slave import HAClient

            self._client = HAClient(self)
            if master_address:
                self._client.learned = master_address
            self._client.start()
        self.state_version += 1
        log.info("ha_role_changed", role=role, epoch=self.master_epoch)

    def _stop_side(self) -> None:
        """Stop the master's listener and connections or the slave's client."""
        self._stop.set()
        with self._tick:
            self._tick.notify_all()
        if self._server is not None:
            self._server.stop()
        if self._client is not None:
            self._client.stop()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            c.close("role change or shutdown")
        for c in conns:
            c.join(5)
        if self._transfer is not None:
            self._transfer.join(5)
        self._fail_all(SLAVE_NOT_AVAILABLE, "this broker is no longer the master")
        self._server = self._client = self._transfer = None

    def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        self._stop_side()

    # -- master: connections -------------------------------------------------------------------
    def accept(self, conn: Any) -> None:
        with self._lock:
            if self._stop.is_set():
                conn.sock.close()
                return
            self._conns.append(conn)
        log.info("ha_slave_connected", slave=conn.remote)
        conn.start()

    def connection_closed(self, conn: Any) -> None:
        with self._lock:
            if conn in self._conns:
                self._conns.remove(conn)
        self.state_changed()

    def connections(self) -> list[Any]:
        with self._lock:
            return list(self._conns)

    def batch_pushes(self, more: bool) -> None:
        """On the loop's thread (``loop_hook``), before a put of a request batch: ``more``
        requests already received and handled in this same loop step leave their bytes to the
        batch's last put (``more`` False), which pushes them all -- one frame, one write and one
        ACK for the batch instead of one each. A batch that ends without such a put is pushed at
        the loop's next turn; a put that waits for the slaves inside the call pushes first
        (``wait_replicated_blocking``)."""
        if not more:
            self._push_deferred = False  # this put pushes whatever the batch left
            return
        hook = self.loop_hook
        if hook is None or not self._conns or not hook.on_loop():
            return
        self._push_deferred = True
        if not self._push_scheduled:
            self._push_scheduled = True
            try:
                hook.loop.call_soon(self._push_deferred_now)
            except RuntimeError:  # the loop is closing: push now, as without a batch
                self._push_deferred_now()

    def _push_deferred_now(self) -> None:
        self._push_scheduled = False
        self._push_what_was_deferred()

    def _push_what_was_deferred(self) -> None:
        if self._push_deferred:
            self._push_deferred = False
            self.notify_append()

    def notify_append(self) -> bool:
        """True when there are slaves and every one of them has been sent everything stored
        (or will be by the end of the loop's request batch, ``batch_pushes``)."""
        conns = self._conns
        if self._push_deferred:
            return bool(conns)  # the batch's last put (or the next turn) sends everything stored
        all_sent = bool(conns)
        for c in conns:  # every connection, whatever the one before it did
            if not c.push():
                c.wake.set()
                all_sent = False
        return all_sent

    def wake_dispatcher(self) -> None:
        """A SYNC_MASTER put whose bytes went straight to the slaves holds its arrival (long-poll
        wake-ups) until the round trip is over. Whoever completes the wait releases it (the
        waiting request, or ``acked`` when no wait was completed, or the ``ha-transfer`` tick
        as a backstop)."""
        dispatcher = getattr(self.store, "dispatcher", None)  # None while the store starts
        if dispatcher is not None:
            dispatcher.wake()

    def wake_writers(self) -> None:
        for c in self._conns:
            c.wake.set()

    def read_chunk(self, offset: int) -> tuple[bytes, EpochEntry, int] | None:
        """The next bytes to stream from ``offset``: (data, its epoch, the master's end)."""
        store = self.store
        end = store.confirmed_offset
        if offset >= end:
            return None
        f = store.commitlog.mfq.find(offset)
        if f is None:
            from .protocol import ProtocolError

            raise ProtocolError(f"offset {offset} is no longer in this master's commitlog "
                                f"(min {store.commitlog.min_offset}); the slave starts over")
        limit = min(end, f.end_offset, offset + self.batch_size)
        entries = self.epochs.entries
        entry = EpochEntry(0, 0)
        for e in entries:  # the epoch holding `offset`; a frame stops where the next one starts
            if e.start_offset <= offset:
                entry = e
            else:
                limit = min(limit, e.start_offset)
                break
        try:
            data = f.read(offset - f.file_from_offset, limit - offset)
        except ValueError:  # unmapped by retention meanwhile
            return None
        return data, entry, end

    def metadata_snapshot(self, fresh: bool = False) -> dict[str, bytes]:
        """The metadata documents, encoded at most once per half interval for all connections
        (``fresh``: now, e.g. a topic was just created)."""
        with self._lock:
            cached = self._meta_cache
            now = time.monotonic()
            if fresh or cached is None or now - cached[0] >= self.metadata_interval_s / 2:
                self._meta_cache = cached = (now, metadata.collect(self.store))
            return cached[1]

    # -- master: in-sync set and waits ---------------------------------------------------------
    def is_in_sync(self, conn: Any, now: float) -> bool:
        """In sync as acknowledgements count it: a confirmed SyncStateSet member that streams
        (controller mode), else caught up within haMaxTimeSlaveNotCatchup."""
        sss = self.sync_state_set
        if sss is not None:
            return conn.broker_id in sss and conn.state == "TRANSFER"
        return conn.in_sync(now)

    def _all_ack(self) -> bool:
        return bool(getattr(self.store.broker_config, "all_ack_in_sync_state_set", False))

    def in_sync_slaves(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [c.view(now) for c in self.connections() if self.is_in_sync(c, now)]

    def min_sync_slaves(self) -> int:
        """Slaves (besides the master) a SYNC_MASTER put needs in sync: RocketMQ 5's
        ``minInSyncReplicas`` counts the master; without a controller a SYNC_MASTER needs one
        slave unless ``enableAutoInSyncReplicas`` lets it go down to ``minInSyncReplicas``."""
        bc = self.store.broker_config
        floor = max(int(getattr(bc, "min_in_sync_replicas", 1)) - 1, 0)
        if self.sync_state_set is not None or getattr(bc, "enable_auto_in_sync_replicas", False):
            return floor
        return max(floor, 1)

    def in_sync_refusal(self) -> str | None:
        """Why a SYNC_MASTER put must be refused before it is stored (controller mode: the
        SyncStateSet, master included, is smaller than ``minInSyncReplicas``), or None."""
        sss = self.sync_state_set
        if sss is None:
            return None
        need = self.min_sync_slaves()
        if len(sss) < need:
            return (f"in-sync replicas not enough: the SyncStateSet has {len(sss) + 1} member(s), "
                    f"minInSyncReplicas is {need + 1}")
        return None

    def in_sync_count(self) -> int:
        sss = self.sync_state_set
        if sss is not None:
            return len(sss)
        now = time.monotonic()
        return sum(1 for c in self._conns if c.in_sync(now))

    def local_in_sync_ids(self) -> list[int]:
        """Slaves this master sees caught up (haMaxTimeSlaveNotCatchup), whatever the controller says."""
        now = time.monotonic()
        return sorted({c.broker_id for c in self.connections() if c.in_sync(now)})

    def set_sync_state_set(self, slave_ids: Any) -> None:
        """Controller mode: the confirmed SyncStateSet's slave ids (None: no controller)."""
        new = None if slave_ids is None else frozenset(int(b) for b in slave_ids)
        if new != self.sync_state_set:
            log.info("ha_sync_state_set", slaves=sorted(new) if new is not None else None)
            self.sync_state_set = new
            self.state_changed()

    def lease_valid(self) -> bool:
        lease = self.lease
        return lease is None or lease.valid()

    def state_changed(self) -> None:
        with self._tick:
            self._evaluate(time.monotonic())
            self._tick.notify_all()

    def acked(self, conn: Any) -> None:
        now = time.monotonic()
        with self._lock:
            completed = self._evaluate(now)
        if not completed:  # nobody waiting was answered by this ack: nobody else wakes the dispatcher
            self.wake_dispatcher()

    def wait_replicated(self, end_offset: int, min_replicas: int, timeout_s: float) -> Future:
        fut: Future = Future()
        if not self.is_master:
            fut.set_result((SLAVE_NOT_AVAILABLE, "this broker is a slave"))
            return fut
        with self._tick:
            self._seq += 1
            now = time.monotonic()
            w = _Waiter(end_offset, self._seq, min_replicas, now + timeout_s, fut)
            waiters = self._waiters
            # A wait behind one still pending, needing no more replicas than some pending wait
            # does, cannot be completed now: every ACK since that one's registration was
            # evaluated (under this lock) and left it waiting, and this one ends no earlier. The
            # tick times both out or fails them when the lease or the in-sync set changes.
            # Pipelined sends (256 in flight) register this way; a lone wait is evaluated.
            in_order = not waiters or waiters[-1].end <= end_offset
            behind = bool(waiters) and in_order and min_replicas <= self._most_replicas
            if in_order:
                waiters.append(w)  # puts end in order: no comparisons of the dataclass in Python
            else:
                bisect.insort(waiters, w)
            self._most_replicas = max(self._most_replicas, min_replicas)
            self._first_deadline = min(self._first_deadline, w.deadline)
            if not behind:
                self._evaluate(now)
            if timeout_s < TICK_S:  # ``ha-transfer`` times waits out; it wakes by itself every tick
                self._tick.notify_all()
        return fut

    def wait_replicated_blocking(self, end_offset: int, min_replicas: int, timeout_s: float) -> tuple[str, str | None]:
        """For the store's SYNC_MASTER puts: (status name, error)."""
        self._push_what_was_deferred()  # this put's bytes (and the batch's before it) go out now
        fut = self.wait_replicated(end_offset, min_replicas, timeout_s)
        hook = self.loop_hook
        if hook is not None and not fut.done() and hook.on_loop():
            self._read_acks_until(fut, time.monotonic() + timeout_s + 5)
        status, error = fut.result(timeout_s + 5)
        if status != PUT_OK:
            log.warning("replication_wait_failed", status=status, offset=end_offset, error=error)
        return status, error

    def _read_acks_until(self, fut: Future, deadline: float) -> None:
        """On the loop's thread, blocked in a wait: read the loop-read connections here until
        ``fut`` is answered (``ha-transfer`` answers it at the latest at its deadline)."""
        import select

        while not fut.done():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            # (one the loop is reading right now -- this wait runs inside its read -- is skipped)
            conns = {c._ack_fd: c for c in self.connections() if c.reads_on_loop and not c._in_read}
            if not conns:
                try:
                    fut.result(min(left, TICK_S))  # read by threads (or none left): just wait
                except Exception:
                    pass
                continue
            poller = select.poll()
            for fd in conns:
                poller.register(fd, select.POLLIN)
            for fd, _ev in poller.poll(min(left, TICK_S) * 1000):
                conns[fd].on_readable()

    def _evaluate(self, now: float) -> int:
        """Under the lock: note in-sync changes and complete the waits that can be completed
        (how many were)."""
        sss = self.sync_state_set
        in_sync = [c for c in self._conns if self.is_in_sync(c, now)]
        ids = tuple(sorted(c.broker_id for c in in_sync))
        if ids != self._in_sync_ids:
            log.info("ha_in_sync_changed", in_sync_broker_ids=list(ids), before=list(self._in_sync_ids))
            self._in_sync_ids = ids
            self.state_version += 1
        waiters = self._waiters
        if not waiters:
            return 0
        acked = min((c.ack_offset for c in in_sync), default=None)
        n = len(in_sync)
        if sss is not None:
            n = len(sss)
            # allAckInSyncStateSet: a member without a streaming connection holds the wait until
            # the controller confirmed its removal; otherwise the streaming members decide
            if self._all_ack() and {c.broker_id for c in in_sync} != set(sss):
                acked = -1 if sss else None
        fenced = not self.lease_valid()
        if not fenced and n >= self._most_replicas and now < self._first_deadline:
            # the common case, without a pass over every waiter (256 sends in flight made each
            # registration and each ACK walk all of them): the acknowledged prefix completes
            cut = len(waiters) if acked is None else bisect.bisect_right(waiters, acked, key=_end)
            if cut:
                completed = waiters[:cut]
                del waiters[:cut]
                for w in completed:
                    if not w.future.done():
                        w.future.set_result(_PUT_DONE)
            return cut
        done: list[tuple[_Waiter, str, str | None]] = []
        keep: list[_Waiter] = []
        for w in waiters:
            if fenced:
                done.append((w, FLUSH_SLAVE_TIMEOUT, "master lease expired: the controller no longer confirms this "
                                                     "broker as master; not acknowledged"))
            elif n < w.min_replicas:
                done.append((w, SLAVE_NOT_AVAILABLE,
                             f"{n} slave(s) in sync, {w.min_replicas} needed; the message is stored on the master only"))
            elif acked is None or acked >= w.end:
                done.append((w, PUT_OK, None))
            elif now >= w.deadline:
                done.append((w, FLUSH_SLAVE_TIMEOUT,
                             f"the in-sync slaves did not acknowledge offset {w.end} in time (they have {acked})"))
            else:
                keep.append(w)
        self._waiters = keep
        self._most_replicas = max((w.min_replicas for w in keep), default=0)
        self._first_deadline = min((w.deadline for w in keep), default=float("inf"))
        for w, status, error in done:
            if not w.future.done():
                w.future.set_result((status, error))
        return len(done)

    def _fail_all(self, status: str, error: str) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
            self._most_replicas, self._first_deadline = 0, float("inf")
        for w in waiters:
            if not w.future.done():
                w.future.set_result((status, error))

    def _transfer_loop(self) -> None:
        while not self._stop.is_set():
            with self._tick:
                self._evaluate(time.monotonic())
                timeout = TICK_S
                if self._waiters:
                    timeout = max(0.001, min(timeout, self._first_deadline - time.monotonic()))
                self._tick.wait(timeout)
            dispatcher = getattr(self.store, "dispatcher", None)
            if self.is_master and dispatcher is not None and dispatcher.holding:
                self.wake_dispatcher()  # a deferred wake whose waiter went away

    # -- slave ---------------------------------------------------------------------------------
    def update_master_address(self, address: str | None) -> None:
        """A slave learns (or re-learns) its master's HA address, e.g. from the NameServer."""
        if self._client is not None and address:
            self._client.set_learned_address(address)

    def note_truncated(self, dropped: int) -> None:
        self.truncated_bytes += dropped

    # -- operations ----------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, Any]:
        store = self.store
        now = time.monotonic()
        info: dict[str, Any] = {
            "brokerRole": self.role, "masterEpoch": self.master_epoch,
            "epochs": [[e.epoch, e.start_offset] for e in self.epochs.all()],
            "commitLogMinOffset": store.commitlog.min_offset, "commitLogMaxOffset": store.confirmed_offset,
            "truncatedBytes": self.truncated_bytes,
        }
        if self.sync_state_set is not None:
            info["syncStateSet"] = sorted(self.sync_state_set)
        if self.lease is not None:
            info["lease"] = self.lease.view()
        if self.is_master:
            conns = self.connections()
            info.update({
                "haListenPort": self.port, "haConnections": len(conns),
                "inSyncSlaves": sum(1 for c in conns if self.is_in_sync(c, now)),
                "slaves": [c.view(now) for c in sorted(conns, key=lambda c: c.broker_id)],
            })
        elif self._client is not None:
            info.update(self._client.view(now))
        return info
