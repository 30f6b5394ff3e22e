"""The controller's consensus shell (engine/controller/raft.py): three pysyncobj peers on
loopback elect a leader, commit commands on a majority, keep the state when the leader dies, and
a restarted peer recovers it from its journal."""

from __future__ import annotations

import threading

import pytest

from engine.controller.raft import ControllerRaft
from tests.support.group import wait_until
from tests.support.node import free_port

pytestmark = pytest.mark.timeout(120)


def _propose(peer: ControllerRaft, cmd: dict) -> dict:
    done = threading.Event()
    out: dict = {}

    def cb(result, error):
        out.update(result=result, error=error)
        done.set()
    peer.propose(cmd, cb)
    assert done.wait(10), "no answer from the quorum"
    assert out["error"] is None, out["error"]
    return out["result"]


@pytest.fixture
def quorum(tmp_path):
    addrs = [f"127.0.0.1:{free_port()}" for _ in range(3)]
    peers: list[ControllerRaft | None] = []

    def make(i: int) -> ControllerRaft:
        return ControllerRaft(addrs[i], [a for a in addrs if a != addrs[i]], tmp_path / f"n{i}")
    peers.extend(make(i) for i in range(3))
    yield peers, make
    for p in peers:
        if p is not None:
            p.destroy()


def _leader(peers):
    live = [p for p in peers if p is not None and p.is_leader]
    return live[0] if len(live) == 1 else None


def test_commands_commit_on_every_peer_and_survive_the_leader(quorum):
    peers, make = quorum
    leader = wait_until(lambda: _leader(peers), 30, what="a Raft leader")
    follower = next(p for p in peers if p is not leader)
    refused: dict = {}
    follower.propose({"op": "register"}, lambda r, e: refused.update(error=e))
    assert "not the controller leader" in refused["error"]
    for b in (1, 2):
        assert _propose(leader, {"op": "register", "group": "g", "brokerId": b, "brokerAddress": f"h:{b}"})["ok"]
    r = _propose(leader, {"op": "elect", "group": "g", "alive": {"1": {"epoch": 0, "maxOffset": 0}}})
    assert r["group"]["masterBrokerId"] == 1
    wait_until(lambda: all(p.group("g") and p.group("g")["masterEpoch"] == 1 for p in peers), 10,
               what="every peer applied the election")
    # the leader dies: another peer leads with the same state and takes commands
    i = peers.index(leader)
    leader.destroy()
    peers[i] = None
    new = wait_until(lambda: _leader(peers), 30, what="a new Raft leader")
    assert new.group("g")["masterBrokerId"] == 1
    r = _propose(new, {"op": "elect", "group": "g", "alive": {"1": {"epoch": 1, "maxOffset": 9}}, "designated": 1})
    assert r["ok"] and r["group"]["masterEpoch"] == 1  # already master: nothing to do
    # the dead peer comes back from its journal and catches up
    peers[i] = make(i)
    wait_until(lambda: peers[i].group("g") and peers[i].group("g")["masterEpoch"] == 1, 30,
               what="the restarted peer recovered the state")
