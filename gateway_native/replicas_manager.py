"""A broker in controller mode (``enableControllerMode``): RocketMQ 5's ``ReplicasManager``.

Owns this broker's conversation with the failover controller (``docs/design/failover.md``):
registration (CONTROLLER_REGISTER_BROKER), a heartbeat every ``brokerHeartbeatInterval``
(BROKER_HEARTBEAT, with this store's epoch and log end; every 0.1 s for a slave whose
replication link to its master dropped, for at most a heartbeat timeout) and, as master, SyncStateSet proposals
every ``checkSyncStateSetPeriod`` (CONTROLLER_ALTER_SYNC_STATE_SET). Every answer carries the
group's replica info, and ``apply`` acts on it:

- named master at an epoch this store has not opened yet: become master (``change_role``, the
  epoch file gets ``masterEpoch`` at the log end), wait on the confirmed SyncStateSet;
- named master at the current epoch: extend the lease (from the heartbeat's send time);
- another broker named master (or none): give up the lease at once, step down if master, and
  follow the named master's HA address (truncating to the consistent point first).

Invariants: the store's role changes only on the controller's word; a master's lease is
extended only by an answer of the controller leader that names it master at its own epoch; the
broker registers with the NameServers as brokerId 0 only while it holds a valid lease.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import structlog

from broker.replication import Replication
from engine import metrics
from engine.controller.lease import MasterLease

from .remoting.codes import RequestCode as RC, ResponseCode as R
from .remoting.command import RemotingCommand
from .transport import Connection, ConnectionClosedError, RemotingTimeoutError, open_connection

log = structlog.get_logger("rockafka.native.replicas")

REQUEST_TIMEOUT_S = 2.0


class ReplicasManager:
    def __init__(self, broker: Any):
        self.broker = broker
        self.store = broker.store
        self.ha = Replication(self.store)  # what the controller decided goes to the engine through it
        bc = broker.broker_config
        self.bc = bc
        self.broker_id = bc.broker_id  # this replica's identity in the group
        self.group = bc.broker_name
        self.addrs = [a.strip() for a in str(bc.controller_addr or "").split(";") if a.strip()]
        self.heartbeat_s = bc.broker_heartbeat_interval / 1000
        self.check_sss_s = bc.check_sync_state_set_period / 1000
        self.sync_metadata_s = bc.sync_broker_metadata_period / 1000
        self.master_role = getattr(self.store, "master_role", "ASYNC_MASTER")
        self.lease = MasterLease(bc.master_lease_mills / 1000, on_expired=self._lease_expired)
        self.ha.set_lease(self.lease)
        self.ha.set_sync_state_set(frozenset())  # acknowledgements follow the confirmed set
        self.view: dict[str, Any] = {}  # the group as the controller last answered
        self.controller: str | None = None  # the address that answered as leader last
        self.registered = False
        self.last_error: str | None = None
        self._conns: dict[str, Connection] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._role_lock = asyncio.Lock()
        self._last_sss_check = 0.0
        self._last_metadata = 0.0
        self._link_lost_at: float | None = None  # when this slave's replication link was found down
        self._wake = asyncio.Event()  # heartbeat now (a new master without a lease yet)
        # SyncStateSet member -> when this master last saw it in sync (or took office)
        self._member_seen: dict[int, float] = {}
        self.not_catchup_s = self.store.config.ha_max_time_slave_not_catchup / 1000

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._tasks.append(asyncio.ensure_future(self._loop()))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        # a graceful stop resigns: first the lease goes (this store acknowledges nothing more as
        # master), then the controller hears it, so it elects at once instead of at the lease end
        resign = self.registered and self.is_master and self.lease.valid()
        self.lease.revoke()
        if resign:
            await self.resign()
        for c in self._conns.values():
            c.close()

    async def resign(self) -> None:
        """A last heartbeat with ``resign=true`` (bounded; the lease is already revoked, so an
        unanswered one only leaves the controller its lease-end wait)."""
        try:
            resp = await asyncio.wait_for(self.invoke(RC.BROKER_HEARTBEAT, dict(
                self._heartbeat_fields(), resign="true")), REQUEST_TIMEOUT_S)
            log.info("failover_resigned", broker_id=self.broker_id, group=self.group, code=resp.code,
                     master=(resp.ext_fields or {}).get("masterBrokerId"))
        except (asyncio.TimeoutError, ConnectionClosedError, RemotingTimeoutError, OSError) as exc:
            log.warning("failover_resign_unanswered", broker_id=self.broker_id, error=str(exc))

    @property
    def is_master(self) -> bool:
        return not self.store.is_slave

    def registered_broker_id(self) -> int:
        """The id this broker registers under with the NameServers: 0 while it is a master with a
        valid lease (RocketMQ 5's rule), its own id otherwise."""
        return 0 if self.is_master and self.lease.valid() else self.broker_id

    def _lease_expired(self) -> None:
        metrics.FAILOVER_LEASE_EXPIRED.inc()
        log.warning("failover_lease_expired", broker_id=self.broker_id, epoch=self.lease.epoch,
                    controller=self.controller)
        self.broker.request_registration()

    # -- controller requests -----------------------------------------------------------------------
    async def _conn(self, addr: str) -> Connection:
        c = self._conns.get(addr)
        if c is None or c.closed:
            # signed with the inner credentials, over TLS when tlsEnable: the controller (a
            # NameServer's listener) asks CLUSTER_ACTION of these requests, as of REGISTER_BROKER
            from .security import node_client_options

            c = await open_connection(addr, None, timeout=REQUEST_TIMEOUT_S, **node_client_options(self.broker.config))
            self._conns[addr] = c
        return c

    async def invoke(self, code: int, fields: dict[str, Any], body: bytes = b"") -> RemotingCommand:
        """Send to the controller leader: the last one that answered, else each address in turn
        (a follower's CONTROLLER_NOT_LEADER names the leader when it knows it)."""
        order = ([self.controller] if self.controller else []) + [a for a in self.addrs if a != self.controller]
        tried: set[str] = set()
        last: str = "no controller address"
        while order:
            addr = order.pop(0)
            if addr in tried:
                continue
            tried.add(addr)
            try:
                conn = await self._conn(addr)
                resp = await conn.invoke(RemotingCommand.request(code, fields, body, language=0), REQUEST_TIMEOUT_S)
            except (ConnectionClosedError, RemotingTimeoutError, OSError, ValueError) as exc:
                last = f"{addr}: {exc}"
                dropped = self._conns.pop(addr, None)
                if dropped is not None:
                    dropped.close()
                continue
            if resp.code == R.CONTROLLER_NOT_LEADER:
                leader = (resp.ext_fields or {}).get("controllerLeaderAddress")
                if leader and leader not in tried:
                    order.insert(0, str(leader))
                last = f"{addr}: {resp.remark}"
                continue
            self.controller = addr
            return resp
        self.controller = None
        raise ConnectionClosedError(f"no controller leader answered ({last})")

    async def register(self) -> None:
        ha_addr = self.broker.ha_server_addr
        # incarnation: a master that restarted before the controller replaced it must not go on
        # in its old epoch (engine/controller/state.py)
        # heartbeatTimeoutMills: a new controller leader waits that long before it may elect
        body = json.dumps({"kafkaNodeId": self._kafka_node_id(),
                           "incarnation": int(self.broker.started_at * 1000),
                           "heartbeatTimeoutMills": self.bc.controller_heart_beat_timeout_mills}).encode()
        resp = await self.invoke(RC.CONTROLLER_REGISTER_BROKER, {
            "clusterName": self.bc.broker_cluster_name, "brokerName": self.group, "brokerId": self.broker_id,
            "brokerAddress": self.broker.addr, "haAddress": ha_addr}, body)
        if resp.code != R.SUCCESS:
            raise RuntimeError(f"controller refused registration: {resp.code} {resp.remark}")
        self.registered = True
        log.info("failover_registered", controller=self.controller, broker_id=self.broker_id, group=self.group)
        await self.apply(json.loads(bytes(resp.body)), None)

    def _kafka_node_id(self) -> int:
        ident = self.ha.identity or {}
        return int(ident.get("kafkaNodeId", self.broker_id))

    async def heartbeat(self) -> None:
        sent = time.monotonic()
        resp = await self.invoke(RC.BROKER_HEARTBEAT, self._heartbeat_fields())
        if resp.code == R.CONTROLLER_BROKER_METADATA_NOT_EXIST:
            self.registered = False
            return
        if resp.code != R.SUCCESS:
            raise RuntimeError(f"heartbeat refused: {resp.code} {resp.remark}")
        await self.apply(json.loads(bytes(resp.body)), sent)

    def _heartbeat_fields(self) -> dict[str, Any]:
        return {"clusterName": self.bc.broker_cluster_name, "brokerName": self.group, "brokerId": self.broker_id,
                "brokerAddr": self.broker.addr, "epoch": self.ha.master_epoch,
                "maxOffset": self.store.confirmed_offset,
                "heartbeatTimeoutMills": self.bc.controller_heart_beat_timeout_mills,
                # the controller counts a master dead once the lease a heartbeat grants has ended
                "masterLeaseMills": self.bc.master_lease_mills}

    async def sync_metadata(self) -> None:
        """CONTROLLER_GET_REPLICA_INFO every syncBrokerMetadataPeriod (RocketMQ's periodic
        metadata sync); heartbeat answers carry the same every second, this also reaches a
        broker whose heartbeats the controller refuses."""
        resp = await self.invoke(RC.CONTROLLER_GET_REPLICA_INFO, {"brokerName": self.group})
        if resp.code == R.SUCCESS and resp.body:
            g = json.loads(bytes(resp.body)).get("rockafka")
            if g:
                await self.apply(g, None)

    async def elect(self, designated: int | None) -> tuple[bool, str | None]:
        """Ask the controller to elect ``designated`` (or whom it picks) master of this group:
        (True, None) once elected (or already master), (False, reason) when refused."""
        fields: dict[str, Any] = {"clusterName": self.bc.broker_cluster_name, "brokerName": self.group,
                                  "designateElect": designated is not None}
        if designated is not None:
            fields["brokerId"] = designated
        try:
            resp = await self.invoke(RC.CONTROLLER_ELECT_MASTER, fields)
        except ConnectionClosedError as exc:
            return False, str(exc)
        if resp.code != R.SUCCESS:
            return False, resp.remark or f"controller answered {resp.code}"
        return True, None

    async def propose_sync_state_set(self) -> None:
        g = self.view
        if not self.is_master or not g or int(g.get("masterBrokerId", -1)) != self.broker_id:
            return
        current = set(int(b) for b in g.get("syncStateSet", []))
        now = time.monotonic()
        caught_up = set(self.ha.local_in_sync_ids())
        for b in caught_up:
            self._member_seen[b] = now
        # a member leaves only after haMaxTimeSlaveNotCatchup out of sync (RocketMQ's and Kafka's
        # rule): a slave reconnecting after a failover or a short hiccup keeps its place
        keep = {b for b in current - caught_up if now - self._member_seen.setdefault(b, now) <= self.not_catchup_s}
        proposal = caught_up | keep | {self.broker_id}
        if proposal == current:
            return
        body = json.dumps({"syncStateSet": sorted(proposal), "syncStateSetEpoch": g["syncStateSetEpoch"]}).encode()
        resp = await self.invoke(RC.CONTROLLER_ALTER_SYNC_STATE_SET, {
            "brokerName": self.group, "masterBrokerId": self.broker_id, "masterEpoch": g["masterEpoch"]}, body)
        if resp.code == R.SUCCESS:
            confirmed = json.loads(bytes(resp.body))
            g = dict(g, syncStateSet=confirmed["syncStateSet"], syncStateSetEpoch=confirmed["syncStateSetEpoch"])
            self.view = g
            self._apply_sync_state_set(g)
            log.info("failover_sync_state_set_altered", before=sorted(current), after=confirmed["syncStateSet"],
                     epoch=confirmed["syncStateSetEpoch"])
        else:
            log.info("failover_sync_state_set_refused", code=resp.code, remark=resp.remark)

    # -- acting on the controller's word -----------------------------------------------------------
    def _apply_sync_state_set(self, g: dict[str, Any]) -> None:
        if self.is_master:
            self.ha.set_sync_state_set(b for b in g.get("syncStateSet", []) if int(b) != self.broker_id)

    async def apply(self, g: dict[str, Any], sent_at: float | None) -> None:
        async with self._role_lock:
            await self._apply(g, sent_at)

    async def _apply(self, g: dict[str, Any], sent_at: float | None) -> None:
        old_view, self.view = self.view, g
        master = int(g.get("masterBrokerId", -1))
        epoch = int(g.get("masterEpoch", 0))
        loop = asyncio.get_running_loop()
        if master == self.broker_id:
            if not self.is_master or self.ha.master_epoch != epoch:
                if self.ha.master_epoch > epoch:
                    log.error("failover_epoch_regressed", local_epoch=self.ha.master_epoch, controller_epoch=epoch)
                    return
                if self.is_master:  # re-elected at a newer epoch: step down and up for a fresh epoch
                    await loop.run_in_executor(None, self.store.change_role, "SLAVE", None)
                self.ha.set_sync_state_set(frozenset())
                self._apply_sync_state_set(g)
                self._member_seen = {int(b): time.monotonic() for b in g.get("syncStateSet", [])}
                await loop.run_in_executor(None, lambda: self.store.change_role(self.master_role, None, epoch))
                metrics.FAILOVER_ROLE_CHANGES.labels("master").inc()
                log.warning("failover_became_master", broker_id=self.broker_id, group=self.group, epoch=epoch,
                            sync_state_set=g.get("syncStateSet"), log_end=self.store.confirmed_offset)
                if sent_at is not None:
                    self.lease.extend(sent_at, epoch)
                else:
                    # a registration or metadata answer: no send time the controller saw, so no
                    # lease from it (the controller elects at a lease's end counted from the last
                    # heartbeat it received); a heartbeat goes out now and grants it
                    self._wake.set()
                self.broker.on_role_changed()
                return
            self._apply_sync_state_set(g)
            if sent_at is not None:
                was_valid = self.lease.valid()
                self.lease.extend(sent_at, epoch)
                if not was_valid:
                    self.broker.request_registration()
            return
        # another broker leads (or nobody): never acknowledge as master again at this epoch
        self.lease.revoke()
        ha_addr = g.get("masterHaAddress") if master >= 0 else None
        if self.is_master:
            await loop.run_in_executor(None, self.store.change_role, "SLAVE", ha_addr)
            metrics.FAILOVER_ROLE_CHANGES.labels("slave").inc()
            log.warning("failover_became_slave", broker_id=self.broker_id, group=self.group, master=master,
                        epoch=epoch, master_ha_address=ha_addr)
            self.broker.on_role_changed()
        elif ha_addr:
            before = self.ha.runtime_info().get("masterAddress")
            if before != ha_addr:
                self.ha.update_master_address(ha_addr)
                log.info("failover_following", master=master, epoch=epoch, master_ha_address=ha_addr)
                if int(old_view.get("masterBrokerId", -1)) != master:
                    self.broker.on_role_changed()

    # -- the loop --------------------------------------------------------------------------------
    async def _loop(self) -> None:
        while True:
            started = time.monotonic()
            try:
                if not self.registered:
                    await self.register()
                await self.heartbeat()
                now = time.monotonic()
                if now - self._last_metadata >= self.sync_metadata_s:
                    self._last_metadata = now
                    await self.sync_metadata()
                if self.is_master and now - self._last_sss_check >= self.check_sss_s:
                    self._last_sss_check = now
                    await self.propose_sync_state_set()
                self.last_error = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if str(exc) != self.last_error:
                    log.warning("failover_controller_unreachable", error=str(exc))
                self.last_error = str(exc)
            try:
                await asyncio.wait_for(self._wake.wait(), max(0.0, self._interval() - (time.monotonic() - started)))
            except asyncio.TimeoutError:
                pass
            self._wake.clear()

    def _interval(self) -> float:
        """The heartbeat interval; a slave whose replication link to its master dropped asks the
        controller every 0.1 s (for at most a heartbeat timeout), so it learns an election at once
        instead of at its next regular heartbeat (``docs/design/failover.md``)."""
        if self.is_master or not self.registered or int(self.view.get("masterBrokerId", -1)) < 0:
            self._link_lost_at = None
            return self.heartbeat_s
        try:
            connected = bool(self.ha.runtime_info().get("connected"))
        except Exception:
            connected = True
        now = time.monotonic()
        if connected:
            self._link_lost_at = None
            return self.heartbeat_s
        if self._link_lost_at is None:
            self._link_lost_at = now
        if now - self._link_lost_at < self.bc.controller_heart_beat_timeout_mills / 1000:
            return min(self.heartbeat_s, 0.1)
        return self.heartbeat_s

    def runtime_info(self) -> dict[str, Any]:
        return {"controllerMode": True, "controller": self.controller, "controllerAddr": self.addrs,
                "registered": self.registered, "brokerId": self.broker_id,
                "registeredAs": self.registered_broker_id(), "lease": self.lease.view(),
                "replicaInfo": self.view, "lastError": self.last_error}
