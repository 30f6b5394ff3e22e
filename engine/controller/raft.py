"""The consensus shell: pysyncobj (Raft) replicates ``ControllerState`` commands between the
controller peers (the NameServers, ``enableControllerInNamesrv``).

``ControllerRaft(self_address, partner_addresses, store_dir)`` joins the quorum. ``propose(cmd,
callback)`` appends a command to the Raft log; once a majority holds it, every peer applies it to
its ``ControllerState`` and the proposer's ``callback(result, error)`` runs (on pysyncobj's tick
thread) with the state machine's result, or ``error`` text when the entry could not be committed
(not leader, quorum lost, timeout). Reads (``view``) are of the locally applied state.

Persistence: the Raft journal and snapshots live in ``store_dir`` (``journal``, ``dump``), so a
restarted peer recovers its state and term.

Timing (why these values): ``leaderFallbackTimeout`` 1 s — a leader cut off from the majority
stops acting as leader within a second, so it stops confirming master leases long before the
majority's new leader (elected after ``raftMinTimeout``) waits out a broker heartbeat timeout
and elects a new master (``docs/design/failover.md``, "Fencing").
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any, Callable

import structlog

# pysyncobj (0.3.x) replaces socket.inet_ntop on every platform with a Windows-only version when
# it is imported; everything else in the process (message ids, addresses) needs the real one
_inet_ntop = socket.inet_ntop
from pysyncobj import SyncObj, SyncObjConf, SyncObjConsumer, replicated  # noqa: E402

socket.inet_ntop = _inet_ntop

from .state import ControllerState

log = structlog.get_logger("rockafka.engine.controller")

LEADER_FALLBACK_S = 1.0
RAFT_MIN_TIMEOUT_S = 0.4
RAFT_MAX_TIMEOUT_S = 1.4


class _ReplicatedState(SyncObjConsumer):
    """The state pysyncobj serializes in snapshots (attributes set after ``__init__``)."""

    def __init__(self, on_applied: Callable[[dict, dict], None]):
        self._lock = threading.Lock()
        self._on_applied = on_applied
        super().__init__()
        self.state = ControllerState()

    @replicated
    def apply_command(self, cmd: dict) -> dict:
        with self._lock:
            result = self.state.apply(cmd)
        try:
            self._on_applied(cmd, result)
        except Exception:  # an observer's bug must not break the replicated state
            log.exception("controller_apply_listener_failed")
        return result

    def view(self) -> dict[str, Any]:
        with self._lock:
            return self.state.view()

    def group(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            g = self.state.group(name)
            return g.view() if g is not None else None

    def leader_info(self) -> dict[str, Any]:
        with self._lock:
            return dict(self.state.leader)


class ControllerRaft:
    def __init__(self, self_address: str, partners: list[str], store_dir: str | Path,
                 on_applied: Callable[[dict, dict], None] | None = None,
                 on_leader_change: Callable[[bool], None] | None = None, password: str | None = None):
        self.self_address = self_address
        self.partners = list(partners)
        self.store_dir = Path(store_dir)
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self._on_leader_change = on_leader_change
        self._replicated = _ReplicatedState(on_applied or (lambda cmd, result: None))
        conf = SyncObjConf(
            journalFile=str(self.store_dir / "journal"), fullDumpFile=str(self.store_dir / "dump"),
            raftMinTimeout=RAFT_MIN_TIMEOUT_S, raftMaxTimeout=RAFT_MAX_TIMEOUT_S,
            leaderFallbackTimeout=LEADER_FALLBACK_S, connectionRetryTime=0.5, connectionTimeout=2.0,
            appendEntriesUseBatch=False, dynamicMembershipChange=False,
            onStateChanged=self._state_changed, logCompactionMinEntries=10_000,
            # a shared secret: every Raft connection encrypted and authenticated (pysyncobj's own
            # scheme); without it anyone reaching the port could follow the log as a read-only node
            password=password or None)
        self._sync = SyncObj(self_address, self.partners, conf, consumers=[self._replicated])
        log.info("controller_raft_started", self_address=self_address, partners=self.partners,
                 store_dir=str(self.store_dir))

    def _state_changed(self, old: int, new: int) -> None:
        leader = new == 2
        log.info("controller_raft_state", state={0: "follower", 1: "candidate", 2: "leader"}.get(new, new),
                 term=self.term)
        if self._on_leader_change is not None and (old == 2) != leader:
            try:
                self._on_leader_change(leader)
            except Exception:
                log.exception("controller_leader_listener_failed")

    # -- queries -------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self._sync._isLeader()

    @property
    def leader(self) -> str | None:
        node = self._sync._getLeader()
        return node.id if node is not None else None

    @property
    def term(self) -> int:
        try:
            return int(self._sync.raftCurrentTerm)
        except Exception:
            return -1

    def view(self) -> dict[str, Any]:
        return self._replicated.view()

    def group(self, name: str) -> dict[str, Any] | None:
        return self._replicated.group(name)

    def announced_leader(self) -> dict[str, Any]:
        """The last leader that announced its request address (``leader`` command)."""
        return self._replicated.leader_info()

    def status(self) -> dict[str, Any]:
        s = self._sync.getStatus()
        return {"self": self.self_address, "leader": self.leader, "isLeader": self.is_leader,
                "term": self.term, "hasQuorum": bool(s.get("has_quorum")),
                "commitIndex": s.get("commit_idx"), "lastApplied": s.get("last_applied"),
                "peers": [self.self_address] + self.partners}

    # -- commands ------------------------------------------------------------------------------
    def propose(self, cmd: dict, callback: Callable[[dict | None, str | None], None]) -> None:
        """Append ``cmd``; ``callback(result, None)`` once applied, ``callback(None, reason)`` if not."""
        if not self.is_leader:
            callback(None, f"not the controller leader (leader: {self.leader})")
            return

        def done(result: Any, err: Any) -> None:
            if err:  # pysyncobj's FAIL_REASON (non-zero)
                callback(None, {1: "queue full", 2: "no leader", 3: "entry discarded (leader changed)",
                                4: "not leader", 5: "leader changed", 6: "request denied"}.get(err, f"failed ({err})"))
            else:
                callback(result, None)

        self._replicated.apply_command(cmd, callback=done)

    def destroy(self) -> None:
        self._sync.destroy()
