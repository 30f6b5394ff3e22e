"""The controller's state machine (engine/controller/state.py): elections only from the
SyncStateSet, unclean election only when allowed and then reported, SyncStateSet changes only
from the current master at the current epochs, epochs that only grow."""

from __future__ import annotations

from engine.controller.state import ControllerState

G = "broker-a"


def _group(*ids: int) -> ControllerState:
    s = ControllerState()
    for b in ids:
        assert s.apply({"op": "register", "group": G, "cluster": "c", "brokerId": b,
                        "brokerAddress": f"h:{b}", "haAddress": f"h:{b + 100}"})["ok"]
    return s


def _alive(*ids: int, offsets: dict[int, int] | None = None, epoch: int = 0) -> dict:
    return {str(b): {"epoch": epoch, "maxOffset": (offsets or {}).get(b, 0)} for b in ids}


def _elect(s: ControllerState, alive: dict, **kw) -> dict:
    return s.apply({"op": "elect", "group": G, "alive": alive, "designated": kw.get("designated"),
                    "unclean": kw.get("unclean", False)})


def _grow(s: ControllerState, master: int, members: list[int]) -> dict:
    g = s.group(G)
    return s.apply({"op": "alter_sync_state_set", "group": G, "masterBrokerId": master, "masterEpoch": g.master_epoch,
                    "syncStateSetEpoch": g.sync_state_set_epoch, "syncStateSet": members})


def test_first_election_picks_an_alive_member_and_the_set_is_the_master_alone():
    s = _group(1, 2, 3)
    r = _elect(s, _alive(2, 3, offsets={3: 500}))
    assert r["ok"] and r["group"]["masterBrokerId"] == 3  # the longest log leads
    assert r["group"]["masterEpoch"] == 1 and r["group"]["syncStateSet"] == [3]
    assert r["group"]["masterHaAddress"] == "h:103"


def test_a_dead_master_is_replaced_by_a_sync_state_set_member_only():
    s = _group(1, 2, 3)
    _elect(s, _alive(1))
    assert _grow(s, 1, [1, 2])["ok"]  # 3 never caught up
    r = _elect(s, _alive(2, 3, offsets={3: 10_000}))
    assert r["ok"] and r["group"]["masterBrokerId"] == 2, r  # 3 has more bytes but is not in the set
    assert r["group"]["masterEpoch"] == 2
    assert r["group"]["syncStateSet"] == [2]  # the old master left the set
    assert r["unclean"] is False


def test_no_sync_state_set_member_alive_means_no_election_unless_unclean_is_allowed():
    s = _group(1, 2, 3)
    _elect(s, _alive(1))
    _grow(s, 1, [1, 2])
    r = _elect(s, _alive(3))
    assert not r["ok"] and r["code"] == "NOT_ELECTED" and "unclean election is off" in r["error"]
    assert s.group(G).master_broker_id == 1 and s.group(G).master_epoch == 1  # nothing changed
    r = _elect(s, _alive(3), unclean=True)
    assert r["ok"] and r["unclean"] is True and r["group"]["masterBrokerId"] == 3
    assert r["group"]["syncStateSet"] == [3]


def test_a_manual_switch_goes_only_to_an_alive_sync_state_set_member():
    s = _group(1, 2, 3)
    _elect(s, _alive(1))
    _grow(s, 1, [1, 2])
    r = _elect(s, _alive(1, 2, 3), designated=3)
    assert not r["ok"] and r["code"] == "NOT_CANDIDATE" and "not in the SyncStateSet" in r["error"]
    r = _elect(s, _alive(1, 3), designated=2)
    assert not r["ok"] and "not alive" in r["error"]
    r = _elect(s, _alive(1, 2, 3), designated=2)
    assert r["ok"] and r["group"]["masterBrokerId"] == 2 and r["group"]["masterEpoch"] == 2
    assert r["group"]["syncStateSet"] == [2]  # the stepping-down master rejoins once caught up
    r = _elect(s, _alive(1, 2, 3), designated=2)
    assert r["ok"] and r["changed"] is False and r["group"]["masterEpoch"] == 2


def test_only_the_current_master_at_the_current_epochs_changes_the_set():
    s = _group(1, 2, 3)
    _elect(s, _alive(1))
    stale = s.group(G).sync_state_set_epoch
    assert _grow(s, 1, [1, 2])["ok"]
    g = s.group(G)
    r = s.apply({"op": "alter_sync_state_set", "group": G, "masterBrokerId": 1, "masterEpoch": 1,
                 "syncStateSetEpoch": stale, "syncStateSet": [1, 2, 3]})
    assert not r["ok"] and r["code"] == "FENCED"
    r = s.apply({"op": "alter_sync_state_set", "group": G, "masterBrokerId": 2, "masterEpoch": 1,
                 "syncStateSetEpoch": g.sync_state_set_epoch, "syncStateSet": [1, 2]})
    assert not r["ok"] and r["code"] == "FENCED"
    r = _grow(s, 1, [2, 3])
    assert not r["ok"] and "must contain the master" in r["error"]
    r = _grow(s, 1, [1, 9])
    assert not r["ok"] and "never registered" in r["error"]
    assert s.group(G).sync_state_set == {1, 2}


def test_epochs_only_grow_and_bad_commands_are_refused_without_changing_state():
    s = _group(1, 2)
    epochs = []
    for alive in (_alive(1), _alive(2), _alive(1)):
        g = s.group(G)
        _grow(s, g.master_broker_id, [1, 2]) if g.master_broker_id >= 0 else None
        r = _elect(s, alive)
        epochs.append((r["group"]["masterEpoch"], r["group"]["syncStateSetEpoch"]))
    assert epochs == sorted(epochs) and len({e for e, _ in epochs}) == 3
    before = s.view()
    assert s.apply({"op": "nope"})["code"] == "INVALID"
    assert s.apply({"op": "elect"})["code"] == "INVALID"
    assert s.apply({"op": "elect", "group": "other", "alive": {}})["code"] == "NO_SUCH_GROUP"
    assert s.apply("not a dict")["code"] == "INVALID"
    assert s.view() == before


def test_a_master_that_restarted_before_being_replaced_is_elected_again_only_in_a_new_epoch():
    s = ControllerState()
    for b in (1, 2):
        s.apply({"op": "register", "group": G, "brokerId": b, "brokerAddress": f"h:{b}", "extra": {"incarnation": 100}})
    _elect(s, _alive(1))
    _grow(s, 1, [1, 2])
    again = s.apply({"op": "register", "group": G, "brokerId": 2, "brokerAddress": "h:2", "extra": {"incarnation": 100}})
    assert again["masterRestarted"] is False and again["group"]["masterBrokerId"] == 1
    r = s.apply({"op": "register", "group": G, "brokerId": 1, "brokerAddress": "h:1", "extra": {"incarnation": 200}})
    assert r["masterRestarted"] is True and r["group"]["masterBrokerId"] == -1
    # the slave kept the longer log: it leads the new epoch; the restarted broker is a candidate too
    r = _elect(s, _alive(1, 2, offsets={1: 50, 2: 80}, epoch=1))
    assert r["group"]["masterBrokerId"] == 2 and r["group"]["masterEpoch"] == 2
    assert r["group"]["syncStateSet"] == [1, 2]


def test_clean_forgets_members_or_the_whole_group():
    s = _group(1, 2, 3)
    assert _elect(s, _alive(1, 2, 3))["ok"]
    master = s.group(G).master_broker_id
    r = s.apply({"op": "clean", "group": G, "brokerIds": [master]})
    assert r["ok"] and str(master) not in r["group"]["replicas"] and r["group"]["masterBrokerId"] == -1
    assert master not in r["group"]["syncStateSet"]
    assert s.apply({"op": "clean", "group": G, "brokerIds": None}) == {"ok": True, "removed": True}
    assert s.group(G) is None
    r = s.apply({"op": "clean", "group": G, "brokerIds": None})
    assert not r["ok"] and r["code"] == "NO_SUCH_GROUP"
