"""The failover controller inside a NameServer (``enableControllerInNamesrv``, RocketMQ 5's
embedded controller): remoting requests around ``engine.controller`` (the state machine and its
Raft log), and the leader's scan for dead masters.

Requests (RocketMQ 5's request codes and header names; bodies JSON):
- ``CONTROLLER_REGISTER_BROKER`` (1003): clusterName, brokerName, brokerId, brokerAddress,
  haAddress (+ body: what the broker adds, e.g. its Kafka node) -> replica info
- ``BROKER_HEARTBEAT`` (904): clusterName, brokerName, brokerId, brokerAddr, epoch, maxOffset,
  heartbeatTimeoutMills -> replica info of the group (the broker acts on it: become master,
  follow, extend its lease)
- ``CONTROLLER_ALTER_SYNC_STATE_SET`` (1001): brokerName, masterBrokerId, masterEpoch + body
  ``{"syncStateSet": [...], "syncStateSetEpoch": n}``
- ``CONTROLLER_ELECT_MASTER`` (1002): clusterName, brokerName, brokerId (designated; absent =
  the controller picks), designateElect
- ``CONTROLLER_GET_REPLICA_INFO`` (1004): brokerName
- ``CONTROLLER_GET_METADATA_INFO`` (1005): the quorum: leader, peers, this peer's role
- ``CONTROLLER_GET_SYNC_STATE_DATA`` (1006): body = JSON list of broker names -> BrokerReplicasInfo
- ``GET_CONTROLLER_CONFIG`` (1010) / ``UPDATE_CONTROLLER_CONFIG`` (1009): this peer's
  ``ControllerConfig`` as ``key=value`` lines (``mqadmin getControllerConfig`` /
  ``updateControllerConfig``); ``scanNotActiveBrokerInterval`` and ``enableElectUncleanMaster``
  change on the running peer until its restart, the start-only keys answer NO_PERMISSION
- ``CLEAN_BROKER_DATA`` (1011): clusterName, brokerName, brokerControllerIdsToClean (``1;2``),
  isCleanLivingBroker (``mqadmin cleanBrokerMetadata``): forgets those members, or the group;
  refused (CONTROLLER_INVALID_CLEAN_BROKER_METADATA) while one of them is alive unless told to

Every request but the metadata and config ones is answered by the Raft leader only; a follower answers
CONTROLLER_NOT_LEADER with the leader's address (``controllerLeaderAddress``) when it knows it.

Liveness (not replicated, RocketMQ's ``BrokerHeartbeatManager``): the leader keeps each
broker's last heartbeat with its epoch and log end. Every ``scanNotActiveBrokerInterval``, and
at the moment a master's lease ends, it proposes an election for a group whose master was not
heard since the lease its last heartbeat could grant ended (``masterLeaseMills`` after it
arrived, +5 % and 50 ms; the master acknowledges nothing after it), or that has no master and an
alive member; other brokers are dead after their ``heartbeatTimeoutMills``. A heartbeat that
arrives while an election of its group is being committed waits for it, so no answer confirms
the master being replaced. A master stopping gracefully resigns (a heartbeat with
``resign=true``, sent after it revoked its lease): it is dead at once and the election runs in
that request. A lost connection is
evidence too: when the connection a broker's last heartbeat came on closes (its process died,
or the broker closed it) and no heartbeat follows, the broker counts as dead as soon as the
lease that heartbeat can have granted has run out (``masterLeaseMills`` after it arrived, plus
5 % and 50 ms for clock rates), without waiting out the heartbeat timeout; a scan is scheduled
for that moment. Sooner on certain evidence: the leader then probes the broker's registered
broker and HA ports, and if every one refuses connections in two rounds in a row (the process is
gone; ``engine/controller/probe.py``) the broker is dead at once; an accepted or unanswered
connect leaves the lease wait. A stalled master keeps its connection open and is still judged by the timeout. A controller that has
just become leader counts every broker as heard at that moment (it does not know when the old
leader last heard them), so it never elects before a full timeout has passed.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from engine import metrics
from engine.config import ControllerConfig

from .remoting.codes import RequestCode as RC, ResponseCode as R
from .remoting.command import RemotingCommand

log = structlog.get_logger("rockafka.controller")

DEFAULT_TIMEOUT_MS = 6000
PROPOSE_TIMEOUT_S = 5.0

_FAILURE_CODES = {"NO_SUCH_GROUP": R.CONTROLLER_BROKER_METADATA_NOT_EXIST, "NOT_ELECTED": R.CONTROLLER_MASTER_NOT_AVAILABLE,
                  "NOT_CANDIDATE": R.CONTROLLER_ELECT_MASTER_FAILED, "FENCED": R.CONTROLLER_FENCED_MASTER_EPOCH,
                  "INVALID": R.CONTROLLER_INVALID_REQUEST}


@dataclass
class BrokerLive:
    last_seen: float
    epoch: int
    max_offset: int
    timeout_s: float
    address: str
    lease_s: float | None = None  # the broker's masterLeaseMills, when its heartbeat says it
    conn: Any = None  # the connection the heartbeat came on
    lost: bool = False  # that connection closed and no heartbeat followed
    gone_at: float | None = None  # when its ports were found refusing (the process is gone)

    resigned: bool = False  # it said it is leaving (graceful stop) after giving up its lease

    def lease_end(self) -> float:
        """The latest moment a lease granted by this broker's last heartbeat can still run, on
        this controller's clock: the lease counts from the heartbeat's sending, which came before
        its arrival here; +5 % and 50 ms for clock rates and scheduling."""
        return self.last_seen + min((self.lease_s or self.timeout_s) * 1.05 + 0.05, self.timeout_s)

    def dead_at(self, as_master: bool = False) -> float:
        """When this broker counts as dead if nothing more is heard. A master with a known lease
        is dead when that lease has ended (it acknowledges nothing after it); anyone else after
        the heartbeat timeout unless its connection closed."""
        if self.resigned:
            return self.last_seen
        if self.lost and self.gone_at is not None:
            return self.gone_at
        if (self.lost or as_master) and self.lease_s is not None:
            return self.lease_end()
        return self.last_seen + self.timeout_s


class ControllerUnavailable(Exception):
    """Not the leader, or the command could not be committed; ``code`` is the remoting code."""

    def __init__(self, code: int, message: str, leader_address: str | None = None):
        super().__init__(message)
        self.code = code
        self.leader_address = leader_address


class ControllerService:
    """Owned by a NameServer started with ``enableControllerInNamesrv=true``."""

    def __init__(self, config: ControllerConfig, data_dir: str | Path, request_address: str,
                 raft_password: str | None = None):
        self.config = config
        self.raft_password = raft_password
        self.peers = config.peers()
        self.self_id = str(config.controller_d_leger_self_id)
        self.self_raft = self.peers[self.self_id]
        self.request_address = request_address  # where this NameServer answers (host:port)
        self.store_dir = Path(config.controller_store_path or Path(data_dir) / "controller")
        self.raft: Any = None
        self.live: dict[tuple[str, int], BrokerLive] = {}
        self.leader_since = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self._leader_event = asyncio.Event()
        self.elections = 0
        self._electing: dict[str, asyncio.Future] = {}  # group -> its election being committed
        self._lease_scans: dict[tuple[str, int], asyncio.TimerHandle] = {}

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        from engine.controller.raft import ControllerRaft

        self._loop = asyncio.get_running_loop()
        partners = [addr for pid, addr in sorted(self.peers.items()) if pid != self.self_id]
        self.raft = await self._loop.run_in_executor(
            None, lambda: ControllerRaft(self.self_raft, partners, self.store_dir, on_applied=self._applied,
                                         on_leader_change=self._leader_changed, password=self.raft_password))
        self._scan_task = asyncio.ensure_future(self._scan_loop())
        log.info("controller_started", self_id=self.self_id, raft=self.self_raft, peers=self.peers,
                 address=self.request_address, raft_encrypted=self.raft_password is not None)

    async def stop(self) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
            try:
                await self._scan_task
            except asyncio.CancelledError:
                pass
        if self.raft is not None:
            self.raft.destroy()

    def _leader_changed(self, leader: bool) -> None:  # pysyncobj's tick thread
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._on_leader_change, leader)

    def _on_leader_change(self, leader: bool) -> None:
        metrics.CONTROLLER_IS_LEADER.set(1 if leader else 0)
        if leader:
            self.leader_since = time.monotonic()
            self.live.clear()  # heard "now" for everyone: see _alive()
            log.info("controller_became_leader", self_id=self.self_id, term=self.raft.term)
            asyncio.ensure_future(self._announce())
        else:
            log.info("controller_lost_leadership", self_id=self.self_id)

    async def _announce(self) -> None:
        try:
            await self.propose({"op": "leader", "peer": self.self_id, "address": self.request_address,
                                "term": self.raft.term})
        except ControllerUnavailable as exc:
            log.info("controller_announce_failed", error=str(exc))

    def _applied(self, cmd: dict, result: dict) -> None:  # every peer, pysyncobj's tick thread
        if cmd.get("op") == "elect" and result.get("ok") and result.get("changed"):
            g = result["group"]
            metrics.CONTROLLER_ELECTIONS.labels(g["brokerName"], "unclean" if result.get("unclean") else
                                                ("manual" if cmd.get("designated") is not None else "auto")).inc()
            log.warning("controller_elected_master", group=g["brokerName"], master=g["masterBrokerId"],
                        old_master=result.get("oldMaster"), epoch=g["masterEpoch"], sync_state_set=g["syncStateSet"],
                        unclean=result.get("unclean"), reason=result.get("reason"),
                        **({"possible_loss": True} if result.get("unclean") else {}))
        elif cmd.get("op") == "alter_sync_state_set" and result.get("ok") and result.get("changed"):
            g = result["group"]
            log.info("controller_sync_state_set_changed", group=g["brokerName"], before=result.get("before"),
                     after=g["syncStateSet"], epoch=g["syncStateSetEpoch"])

    # -- consensus -------------------------------------------------------------------------------
    def leader_address(self) -> str | None:
        if self.raft is None:
            return None
        if self.raft.is_leader:
            return self.request_address
        info = self.raft.announced_leader()
        leader = self.raft.leader
        if info and leader and self.peers.get(info.get("peer", "")) == leader:
            return info.get("address")
        return None

    def require_leader(self) -> None:
        if self.raft is None or not self.raft.is_leader:
            addr = self.leader_address()
            raise ControllerUnavailable(R.CONTROLLER_NOT_LEADER,
                                        f"controller {self.self_id} is not the leader"
                                        + (f"; the leader answers at {addr}" if addr else "; no leader known yet"), addr)

    async def propose(self, cmd: dict) -> dict:
        self.require_leader()
        assert self._loop is not None
        loop = self._loop
        fut: asyncio.Future = loop.create_future()

        def done(result: Any, error: Any) -> None:
            def settle() -> None:
                if not fut.done():
                    if error is not None:
                        fut.set_exception(ControllerUnavailable(R.CONTROLLER_NOT_LEADER, f"not committed: {error}",
                                                                self.leader_address()))
                    else:
                        fut.set_result(result)
            if not loop.is_closed():
                loop.call_soon_threadsafe(settle)
        self.raft.propose(cmd, done)
        try:
            return await asyncio.wait_for(fut, PROPOSE_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise ControllerUnavailable(R.SYSTEM_BUSY, "the controller quorum did not commit in time") from None

    # -- liveness --------------------------------------------------------------------------------
    def heartbeat(self, group: str, broker_id: int, epoch: int, max_offset: int, timeout_ms: int, address: str,
                  lease_ms: int | None = None, conn: Any = None, resigning: bool = False) -> None:
        key = (group, broker_id)
        before = self.live.get(key)
        live = self.live[key] = BrokerLive(time.monotonic(), epoch, max_offset, max(timeout_ms, 1) / 1000, address,
                                           lease_ms / 1000 if lease_ms and lease_ms > 0 else None, conn,
                                           resigned=resigning)
        if conn is not None and (before is None or before.conn is not conn):
            conn.on_close(lambda closed, key=key: self.connection_lost(key, closed))
        g = self.replica_info(group)
        if g is not None and _is_master(g, broker_id) and self._loop is not None:
            # the master is dead the moment the lease this heartbeat can grant ends: scan then,
            # not at the next regular scan (up to scanNotActiveBrokerInterval later)
            old = self._lease_scans.pop(key, None)
            if old is not None:
                old.cancel()
            if not resigning:
                self._lease_scans[key] = self._loop.call_later(
                    max(0.0, live.dead_at(True) - time.monotonic()) + 0.01,
                    lambda: asyncio.ensure_future(self._scan_now()))

    async def settled(self, group: str) -> None:
        """Wait (bounded) for an election of ``group`` being committed: a heartbeat answered in
        that window must not confirm the master being replaced (its lease would outlive the
        election)."""
        fut = self._electing.get(group)
        if fut is not None:
            try:
                await asyncio.wait_for(asyncio.shield(fut), PROPOSE_TIMEOUT_S)
            except Exception:
                pass

    async def elect(self, group: str, command: dict) -> dict:
        """Propose an election; heartbeats of the group wait for its outcome (``settled``)."""
        fut = self._electing.get(group)
        if fut is None or fut.done():
            fut = self._electing[group] = asyncio.get_running_loop().create_future()
        try:
            return await self.propose(command)
        finally:
            if not fut.done():
                fut.set_result(None)
            if self._electing.get(group) is fut:
                del self._electing[group]

    async def resign(self, group: str, broker_id: int) -> None:
        """A master stopping gracefully said so after it gave up its lease: it is dead now (it
        acknowledges nothing more), so the election runs at once instead of at its lease end."""
        live = self.live.get((group, broker_id))
        g = self.replica_info(group)
        log.info("controller_broker_resigned", group=group, broker_id=broker_id,
                 was_master=bool(g and _is_master(g, broker_id)))
        if live is not None and g is not None and _is_master(g, broker_id):
            await self._scan_now()

    def connection_lost(self, key: tuple[str, int], conn: Any) -> None:
        """The connection ``key``'s heartbeats came on closed: unless another heartbeat arrives,
        the broker is dead once the lease it may hold ran out; scan then."""
        live = self.live.get(key)
        if live is None or live.conn is not conn or self.raft is None or not self.raft.is_leader:
            return
        live.lost = True
        delay = max(0.0, live.dead_at() - time.monotonic())
        log.info("controller_broker_connection_lost", group=key[0], broker_id=key[1],
                 dead_in_s=round(delay, 3), lease_known=live.lease_s is not None)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_later(delay + 0.01, lambda: asyncio.ensure_future(self._scan_now()))
            loop.call_soon(lambda: asyncio.ensure_future(self._probe_gone(key, live)))

    async def _probe_gone(self, key: tuple[str, int], live: BrokerLive) -> None:
        """Certain evidence of death: every port the broker registered (broker and HA) refuses
        connections in two rounds in a row -> it counts as dead now and a scan runs. An accepted
        or unanswered connect proves nothing; the lease wait stands (``engine/controller/probe.py``)."""
        from engine.controller.probe import ports_refused

        info = ((self.replica_info(key[0]) or {}).get("replicas") or {}).get(str(key[1])) or {}
        addresses = [a for a in (info.get("brokerAddress") or live.address, info.get("haAddress")) if a]
        try:
            gone, rounds = await ports_refused(
                addresses, live.dead_at(),
                lambda: self.live.get(key) is live and live.lost and self.raft is not None and self.raft.is_leader)
        except Exception:
            log.exception("controller_broker_probe_failed", group=key[0], broker_id=key[1])
            return
        if not gone:
            log.info("controller_broker_probe_inconclusive", group=key[0], broker_id=key[1], rounds=len(rounds),
                     last=rounds[-1] if rounds else None)
            return
        live.gone_at = time.monotonic()
        log.info("controller_broker_gone", group=key[0], broker_id=key[1], evidence=rounds,
                 lease_left_s=round(max(0.0, live.last_seen + (live.lease_s or live.timeout_s) - live.gone_at), 3))
        await self._scan_now()

    async def _scan_now(self) -> None:
        try:
            await self.scan()
        except ControllerUnavailable:
            pass
        except Exception:
            log.exception("controller_scan_failed")

    def _alive(self, group: str, broker_id: int, now: float, g: dict[str, Any] | None = None) -> bool:
        live = self.live.get((group, broker_id))
        if live is None:
            # not heard since this controller leads: alive until a full heartbeat timeout of that
            # broker (registered with it) has passed, since its lease may still run
            info = ((g or {}).get("replicas") or {}).get(str(broker_id)) or {}
            timeout_ms = int(info.get("heartbeatTimeoutMills") or DEFAULT_TIMEOUT_MS)
            return now - self.leader_since < timeout_ms / 1000
        return now <= live.dead_at(_is_master(g, broker_id))

    def alive_members(self, group: str, g: dict[str, Any], now: float) -> dict[str, dict[str, int]]:
        out = {}
        for bid in g.get("replicas", {}):
            live = self.live.get((group, int(bid)))
            if live is not None and now <= live.dead_at(_is_master(g, int(bid))):
                out[str(bid)] = {"epoch": live.epoch, "maxOffset": live.max_offset}
        return out

    async def _scan_loop(self) -> None:
        while True:  # the interval is read each time: updateControllerConfig changes it
            await asyncio.sleep(max(self.config.scan_not_active_broker_interval, 50) / 1000)
            try:
                await self.scan()
            except ControllerUnavailable:
                pass
            except Exception:
                log.exception("controller_scan_failed")

    async def scan(self) -> None:
        if self.raft is None or not self.raft.is_leader:
            return
        now = time.monotonic()
        for name, g in self.raft.view().items():
            master = int(g["masterBrokerId"])
            if master >= 0 and self._alive(name, master, now, g):
                continue
            alive = self.alive_members(name, g, now)
            if not alive:
                continue
            gone_live = self.live.get((name, master)) if master >= 0 else None
            lost = getattr(gone_live, "lost", False)
            gone = lost and getattr(gone_live, "gone_at", None) is not None
            resigned = getattr(gone_live, "resigned", False)
            leased = getattr(gone_live, "lease_s", None) is not None
            reason = ("no master" if master < 0
                      else f"master {master} resigned (graceful stop, lease given up)" if resigned
                      else f"master {master} lost its connection and its ports refuse connections (process gone)"
                      if gone else f"master {master} lost its connection and its lease ran out"
                      if lost else f"master {master} not heard since its lease ran out"
                      if leased else f"master {master} not heard for its heartbeat timeout")
            if gone_live is not None:  # when its lease (at most) ended: the last heartbeat received + lease
                log.info("controller_electing", group=name, master=master, reason=reason,
                         last_heartbeat_ago_s=round(now - gone_live.last_seen, 3), lease_s=gone_live.lease_s)
            result = await self.elect(name, {"op": "elect", "group": name, "alive": alive, "designated": None,
                                             "unclean": self.config.enable_elect_unclean_master, "reason": reason})
            if not result.get("ok"):
                log.warning("controller_election_impossible", group=name, code=result.get("code"),
                            error=result.get("error"))

    # -- views -----------------------------------------------------------------------------------
    def replica_info(self, name: str) -> dict[str, Any] | None:
        return self.raft.group(name) if self.raft is not None else None

    def metadata(self) -> dict[str, Any]:
        status = self.raft.status() if self.raft is not None else {}
        return {"group": self.config.controller_d_leger_group, "controllerLeaderId": self._leader_peer_id(),
                "controllerLeaderAddress": self.leader_address(), "isLeader": bool(status.get("isLeader")),
                "peers": ";".join(f"{pid}-{addr}" for pid, addr in sorted(self.peers.items())),
                "selfId": self.self_id, "term": status.get("term"), "hasQuorum": status.get("hasQuorum")}

    def _leader_peer_id(self) -> str | None:
        leader = self.raft.leader if self.raft is not None else None
        return next((pid for pid, addr in self.peers.items() if addr == leader), None)

    def sync_state_data(self, names: list[str] | None) -> dict[str, Any]:
        """RocketMQ's BrokerReplicasInfo, plus each replica's liveness as this leader sees it."""
        now = time.monotonic()
        table = {}
        for name, g in (self.raft.view() if self.raft is not None else {}).items():
            if names and name not in names:
                continue
            ins, outs = [], []
            for bid, info in sorted(g["replicas"].items(), key=lambda kv: int(kv[0])):
                entry = {"brokerName": name, "brokerId": int(bid), "brokerAddress": info.get("brokerAddress"),
                         "alive": self._alive(name, int(bid), now, g) if self.raft.is_leader else None}
                (ins if int(bid) in g["syncStateSet"] else outs).append(entry)
            table[name] = {"masterBrokerId": g["masterBrokerId"], "masterAddress": g["masterAddress"],
                           "masterEpoch": g["masterEpoch"], "syncStateSetEpoch": g["syncStateSetEpoch"],
                           "inSyncReplicas": ins, "notInSyncReplicas": outs}
        return {"replicasInfoTable": table}


def _is_master(g: dict[str, Any] | None, broker_id: int) -> bool:
    return g is not None and int(g.get("masterBrokerId", -1)) == broker_id


# -- request handlers (registered in the NameServer's table) -------------------------------------
def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def _replica_fields(g: dict[str, Any]) -> dict[str, Any]:
    return {"masterBrokerId": g["masterBrokerId"], "masterAddress": g.get("masterAddress") or "",
            "masterEpoch": g["masterEpoch"], "syncStateSetEpoch": g["syncStateSetEpoch"]}


def _unavailable(cmd: RemotingCommand, exc: ControllerUnavailable) -> RemotingCommand:
    fields = {"controllerLeaderAddress": exc.leader_address} if exc.leader_address else None
    return cmd.response(exc.code, str(exc), fields)


def _failed(cmd: RemotingCommand, result: dict[str, Any]) -> RemotingCommand:
    return cmd.response(_FAILURE_CODES.get(result.get("code", ""), R.CONTROLLER_INVALID_REQUEST), result.get("error"))


def _body_json(cmd: RemotingCommand) -> Any:
    if not cmd.body:
        return None
    try:
        return json.loads(bytes(cmd.body))
    except ValueError as exc:
        raise ValueError(f"request body is not valid JSON: {exc}") from None


def register_handlers(table: Any) -> None:
    def handler(code: int, leader: bool = True) -> Any:
        """Register ``fn(controller, conn, cmd)`` for ``code``: answered REQUEST_CODE_NOT_SUPPORTED
        without a controller, CONTROLLER_NOT_LEADER by a follower (``leader``) or when a command
        could not be committed."""
        def wrap(fn: Any) -> Any:
            @table.register(code)
            async def run(ns: Any, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
                c = getattr(ns, "controller", None)
                if c is None:
                    return cmd.response(R.REQUEST_CODE_NOT_SUPPORTED,
                                        "this NameServer runs no controller (enableControllerInNamesrv=false)")
                try:
                    if leader:
                        c.require_leader()
                    return await fn(c, conn, cmd)
                except ControllerUnavailable as exc:
                    return _unavailable(cmd, exc)
                except ValueError as exc:  # a body that is not the JSON the request needs
                    return cmd.response(R.CONTROLLER_INVALID_REQUEST, str(exc))
            return run
        return wrap

    @handler(RC.CONTROLLER_REGISTER_BROKER)
    async def register_broker(c: ControllerService, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        extra = _body_json(cmd) or {}
        result = await c.propose({"op": "register", "group": cmd.require_str("brokerName"),
                                  "cluster": cmd.get_str("clusterName") or "DefaultCluster",
                                  "brokerId": cmd.require_int("brokerId"),
                                  "brokerAddress": cmd.require_str("brokerAddress"),
                                  "haAddress": cmd.get_str("haAddress"),
                                  "extra": extra if isinstance(extra, dict) else {}})
        if not result.get("ok"):
            return _failed(cmd, result)
        g = result["group"]
        return cmd.response(R.SUCCESS, None, _replica_fields(g), _json(g))

    @handler(RC.BROKER_HEARTBEAT)
    async def broker_heartbeat(c: ControllerService, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        name = cmd.require_str("brokerName")
        bid = cmd.require_int("brokerId")
        await c.settled(name)  # never confirm a master an election in flight replaces
        g = c.replica_info(name)
        if g is None or str(bid) not in g["replicas"]:
            return cmd.response(R.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                                f"broker {bid} of {name} has not registered with the controller")
        resigning = (cmd.get_str("resign") or "").lower() == "true"
        c.heartbeat(name, bid, cmd.get_int("epoch", 0) or 0, cmd.get_int("maxOffset", 0) or 0,
                    cmd.get_int("heartbeatTimeoutMills", DEFAULT_TIMEOUT_MS) or DEFAULT_TIMEOUT_MS,
                    cmd.get_str("brokerAddr") or "", cmd.get_int("masterLeaseMills", 0) or None, conn,
                    resigning=resigning)
        if resigning:
            await c.resign(name, bid)
            g = c.replica_info(name) or g
        return cmd.response(R.SUCCESS, None, _replica_fields(g), _json(g))

    @handler(RC.CONTROLLER_ALTER_SYNC_STATE_SET)
    async def alter_sync_state_set(c: ControllerService, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        try:
            body = _body_json(cmd) or {}
            command = {"op": "alter_sync_state_set", "group": cmd.require_str("brokerName"),
                       "masterBrokerId": cmd.require_int("masterBrokerId"), "masterEpoch": cmd.require_int("masterEpoch"),
                       "syncStateSetEpoch": int(body["syncStateSetEpoch"]),
                       "syncStateSet": [int(b) for b in body["syncStateSet"]]}
        except (KeyError, TypeError, ValueError) as exc:
            return cmd.response(R.CONTROLLER_INVALID_REQUEST, f"alter SyncStateSet: {exc}")
        result = await c.propose(command)
        if not result.get("ok"):
            code = R.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH if "SyncStateSet epoch" in (result.get("error") or "") \
                else _FAILURE_CODES.get(result.get("code", ""), R.CONTROLLER_INVALID_REQUEST)
            return cmd.response(code, result.get("error"))
        g = result["group"]
        return cmd.response(R.SUCCESS, None, {"newSyncStateSetEpoch": g["syncStateSetEpoch"]},
                            _json({"syncStateSet": g["syncStateSet"], "syncStateSetEpoch": g["syncStateSetEpoch"]}))

    @handler(RC.CONTROLLER_ELECT_MASTER)
    async def elect_master(c: ControllerService, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        name = cmd.require_str("brokerName")
        g = c.replica_info(name)
        if g is None:
            return cmd.response(R.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no broker of group {name} has registered")
        result = await c.elect(name, {"op": "elect", "group": name, "alive": c.alive_members(name, g, time.monotonic()),
                                  "designated": cmd.get_int("brokerId"),
                                  "unclean": c.config.enable_elect_unclean_master,
                                  "reason": f"requested by {getattr(conn, 'remote', None) or 'admin'}"})
        if not result.get("ok"):
            return _failed(cmd, result)
        g = result["group"]
        member_group = {"cluster": g["clusterName"], "brokerName": name,
                        "brokerAddrs": {str(b): r.get("brokerAddress") for b, r in g["replicas"].items()}}
        return cmd.response(R.SUCCESS, None, _replica_fields(g), _json(member_group))

    @handler(RC.CONTROLLER_GET_REPLICA_INFO)
    async def get_replica_info(c: ControllerService, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        name = cmd.require_str("brokerName")
        g = c.replica_info(name)
        if g is None:
            return cmd.response(R.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no broker of group {name} has registered")
        return cmd.response(R.SUCCESS, None, _replica_fields(g),
                            _json({"syncStateSet": g["syncStateSet"], "syncStateSetEpoch": g["syncStateSetEpoch"],
                                   "rockafka": g}))

    @handler(RC.CONTROLLER_GET_METADATA_INFO, leader=False)
    async def get_metadata(c: ControllerService, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        meta = c.metadata()
        fields = {k: v for k, v in meta.items() if v is not None and k in
                  ("group", "controllerLeaderId", "controllerLeaderAddress", "isLeader", "peers")}
        return cmd.response(R.SUCCESS, None, fields, _json(meta))

    @handler(RC.CONTROLLER_GET_SYNC_STATE_DATA)
    async def get_sync_state_data(c: ControllerService, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        try:
            names = _body_json(cmd)
        except ValueError as exc:
            return cmd.response(R.CONTROLLER_INVALID_REQUEST, str(exc))
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            return cmd.response(R.CONTROLLER_INVALID_REQUEST, "body must be a JSON list of broker names")
        return cmd.response(R.SUCCESS, body=_json(c.sync_state_data(names)))

    @handler(RC.GET_CONTROLLER_CONFIG, leader=False)
    async def get_controller_config(c: ControllerService, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(R.SUCCESS, body="".join(f"{k}={v}\n" for k, v in controller_properties(c.config).items()).encode())

    @handler(RC.UPDATE_CONTROLLER_CONFIG, leader=False)
    async def update_controller_config(c: ControllerService, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        from .processors.broker_admin import parse_properties

        try:
            props = parse_properties((cmd.body or b"").decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            return cmd.response(R.SYSTEM_ERROR, f"string2Properties error: {exc}")
        known = controller_properties(c.config)
        unknown = sorted(k for k in props if k not in known)
        if unknown:
            return cmd.response(R.INVALID_PARAMETER, f"unknown controller keys: {', '.join(unknown)}; known: "
                                + ", ".join(sorted(known)))
        blocked = sorted(k for k in props if k not in _RUNTIME_KEYS)
        if blocked:
            return cmd.response(R.NO_PERMISSION, f"Can not update config in black list: {', '.join(blocked)} "
                                "(set at start only)")
        try:
            updates = {key: parse(props[key]) for key, (_attr, parse) in _RUNTIME_KEYS.items() if key in props}
        except ValueError as exc:
            return cmd.response(R.INVALID_PARAMETER, f"bad value: {exc}")
        for key, value in updates.items():
            setattr(c.config, _RUNTIME_KEYS[key][0], value)
        log.info("controller_config_updated", keys=sorted(updates), caller=getattr(conn, "remote_addr", None))
        return cmd.response(R.SUCCESS)

    @handler(RC.CLEAN_BROKER_DATA)
    async def clean_broker_data(c: ControllerService, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        name = cmd.require_str("brokerName")
        living = (cmd.get_str("isCleanLivingBroker") or cmd.get_str("cleanLivingBroker") or "").lower() == "true"
        raw_ids = (cmd.get_str("brokerControllerIdsToClean") or "").strip()
        try:
            ids = sorted({int(x) for x in raw_ids.split(";") if x.strip()}) if raw_ids else None
        except ValueError as exc:
            return cmd.response(R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "Please set the option "
                                f"<brokerControllerIdsToClean> according to the format, exception: {exc}")
        g = c.replica_info(name)
        if g is None:
            return cmd.response(R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                f"Broker {name} is not existed,clean broker data failure.")
        if not living:
            now = time.monotonic()
            if ids is None and g["masterBrokerId"] >= 0 and c._alive(name, g["masterBrokerId"], now, g):
                return cmd.response(R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                    f"Broker {name} is still alive, clean up failure")
            for bid in ids or ():
                if c._alive(name, bid, now, g):
                    return cmd.response(R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                        f"Broker [{name},  {bid}] is still alive, clean up failure")
        result = await c.propose({"op": "clean", "group": name, "brokerIds": ids})
        if not result.get("ok"):
            return cmd.response(R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, result.get("error"))
        log.info("controller_broker_metadata_cleaned", group=name, broker_ids=ids, caller=getattr(conn, "remote_addr", None))
        return cmd.response(R.SUCCESS)


def _bool(text: str) -> bool:
    if text.strip().lower() not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return text.strip().lower() == "true"


def _interval(text: str) -> int:
    value = int(text)
    if value < 50:
        raise ValueError(f"scanNotActiveBrokerInterval {value} is below 50 ms")
    return value


# keys a running controller takes (mqadmin updateControllerConfig): camelCase -> (attribute, parser)
_RUNTIME_KEYS = {"scanNotActiveBrokerInterval": ("scan_not_active_broker_interval", _interval),
                 "enableElectUncleanMaster": ("enable_elect_unclean_master", _bool)}


def controller_properties(config: ControllerConfig) -> dict[str, str]:
    """The peer's ControllerConfig as RocketMQ's camelCase ``key=value`` properties."""
    from dataclasses import fields

    from engine.config import camel_case

    out = {}
    for f in fields(config):
        value = getattr(config, f.name)
        out[camel_case(f.name)] = "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
    return out
