"""The classic group coordinator's state machine, driven directly on an event loop.

These exercise the rules a Kafka consumer relies on (member ids, generations, rebalances,
session expiry, static membership, commit permission) with short timeouts; the real-client
group tests in test_groups_*.py cover the same through the wire.
"""

from __future__ import annotations

import asyncio

from gateway_kafka import error_codes as E
from gateway_kafka.coordinator import GroupCoordinator

PROTO = [("range", b"meta-range"), ("roundrobin", b"meta-rr")]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def coordinator(**kw) -> GroupCoordinator:
    args = dict(min_session_timeout_ms=50, max_session_timeout_ms=60_000, initial_rebalance_delay_ms=0)
    args.update(kw)
    return GroupCoordinator(**args)


async def join(c: GroupCoordinator, member_id: str = "", *, group: str = "g", instance: str | None = None,
               protocols=PROTO, session_ms: int = 10_000, rebalance_ms: int = 2_000, v4: bool = True) -> dict:
    return await c.join_group(group_id=group, member_id=member_id, group_instance_id=instance,
                              protocol_type="consumer", protocols=protocols, session_timeout_ms=session_ms,
                              rebalance_timeout_ms=rebalance_ms, client_id="client", client_host="/127.0.0.1",
                              require_known_member_id=v4)


async def join_with_id(c: GroupCoordinator, **kw) -> dict:
    first = await join(c, **kw)
    assert first["error_code"] == E.MEMBER_ID_REQUIRED and first["member_id"]
    return await join(c, first["member_id"], **kw)


async def sync(c, resp, assignments=()) -> dict:
    return await c.sync_group(group_id="g", generation_id=resp["generation_id"], member_id=resp["member_id"],
                              group_instance_id=None, protocol_type="consumer", protocol_name=resp["protocol_name"],
                              assignments=list(assignments))


def test_member_id_required_then_single_member_becomes_leader_and_stable():
    async def scenario():
        c = coordinator()
        resp = await join_with_id(c)
        assert resp["error_code"] == E.NONE
        assert resp["generation_id"] == 1 and resp["leader"] == resp["member_id"]
        assert resp["protocol_name"] == "range"
        assert resp["members"] == [{"member_id": resp["member_id"], "group_instance_id": None,
                                    "metadata": b"meta-range"}]
        s = await sync(c, resp, [(resp["member_id"], b"A")])
        assert s["error_code"] == E.NONE and s["assignment"] == b"A"
        assert c.describe("g")["group_state"] == "Stable"
        assert c.heartbeat(group_id="g", member_id=resp["member_id"], generation_id=1, group_instance_id=None) == 0
    run(scenario())


def test_second_member_triggers_rebalance_and_both_get_leader_assignment():
    async def scenario():
        c = coordinator()
        a = await join_with_id(c)
        await sync(c, a, [(a["member_id"], b"all")])
        first = await join(c)  # second member asks for an id
        b_task = asyncio.create_task(join(c, first["member_id"]))
        await asyncio.sleep(0)
        # the first member learns of the rebalance through its heartbeat and rejoins
        deadline = asyncio.get_running_loop().time() + 5
        while c.heartbeat(group_id="g", member_id=a["member_id"], generation_id=1, group_instance_id=None) \
                != E.REBALANCE_IN_PROGRESS:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        a2 = await join(c, a["member_id"])
        b = await b_task
        assert a2["generation_id"] == b["generation_id"] == 2
        leader, follower = (a2, b) if a2["leader"] == a2["member_id"] else (b, a2)
        assert {m["member_id"] for m in leader["members"]} == {a["member_id"], first["member_id"]}
        assert follower["members"] == []
        follower_sync = asyncio.create_task(sync(c, follower))
        await asyncio.sleep(0)
        leader_sync = await sync(c, leader, [(leader["member_id"], b"L"), (follower["member_id"], b"F")])
        assert leader_sync["assignment"] == b"L"
        assert (await follower_sync)["assignment"] == b"F"
    run(scenario())


def test_leave_starts_rebalance_and_stale_generation_is_refused():
    async def scenario():
        c = coordinator()
        a = await join_with_id(c)
        await sync(c, a, [(a["member_id"], b"x")])
        top, results = c.leave_group("g", [(a["member_id"], None)])
        assert top == E.NONE and results[0]["error_code"] == E.NONE
        assert c.describe("g")["group_state"] == "Empty"
        assert c.heartbeat(group_id="g", member_id=a["member_id"], generation_id=1,
                           group_instance_id=None) == E.UNKNOWN_MEMBER_ID
        _, unknown = c.leave_group("g", [("nobody", None)])
        assert unknown[0]["error_code"] == E.UNKNOWN_MEMBER_ID
        b = await join_with_id(c)
        assert b["generation_id"] == 3  # the empty phase counted as a generation, as in Kafka
        assert c.validate_offset_commit("g", b["member_id"], 1, None) == E.ILLEGAL_GENERATION
    run(scenario())


def test_session_expiry_removes_silent_member():
    async def scenario():
        c = coordinator()
        a = await join_with_id(c, session_ms=100)
        await sync(c, a, [(a["member_id"], b"x")])
        deadline = asyncio.get_running_loop().time() + 5
        while c.describe("g")["members"]:
            assert asyncio.get_running_loop().time() < deadline, "member never expired"
            await asyncio.sleep(0.02)
        assert c.describe("g")["group_state"] == "Empty"
    run(scenario())


def test_static_member_rejoin_keeps_assignment_and_fences_old_id():
    async def scenario():
        c = coordinator()
        a = await join(c, instance="inst-1")  # static members need no MEMBER_ID_REQUIRED round
        assert a["error_code"] == E.NONE
        await sync(c, a, [(a["member_id"], b"mine")])
        again = await join(c, instance="inst-1")
        assert again["error_code"] == E.NONE
        assert again["generation_id"] == a["generation_id"]  # no rebalance
        assert again["member_id"] != a["member_id"]
        s = await c.sync_group(group_id="g", generation_id=again["generation_id"], member_id=again["member_id"],
                               group_instance_id="inst-1", protocol_type=None, protocol_name=None, assignments=[])
        assert s["assignment"] == b"mine"
        assert c.heartbeat(group_id="g", member_id=a["member_id"], generation_id=a["generation_id"],
                           group_instance_id="inst-1") == E.FENCED_INSTANCE_ID
    run(scenario())


def test_bad_requests_get_kafka_errors():
    async def scenario():
        c = coordinator(min_session_timeout_ms=1000)
        assert (await join(c, session_ms=10))["error_code"] == E.INVALID_SESSION_TIMEOUT
        assert (await join(c, group=""))["error_code"] == E.INVALID_GROUP_ID
        assert (await join(c, "made-up-id"))["error_code"] == E.UNKNOWN_MEMBER_ID
        a = await join_with_id(c)
        other = await join(c, protocols=[("sticky", b"")])
        assert other["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
        s = await c.sync_group(group_id="g", generation_id=99, member_id=a["member_id"], group_instance_id=None,
                               protocol_type=None, protocol_name=None, assignments=[])
        assert s["error_code"] == E.ILLEGAL_GENERATION
    run(scenario())


def test_commit_permission_follows_kafka_rules():
    async def scenario():
        c = coordinator()
        assert c.validate_offset_commit("solo", "", -1, None) == E.NONE  # standalone consumer
        a = await join_with_id(c)
        assert c.validate_offset_commit("g", a["member_id"], a["generation_id"], None) == E.REBALANCE_IN_PROGRESS
        await sync(c, a, [(a["member_id"], b"x")])
        assert c.validate_offset_commit("g", a["member_id"], a["generation_id"], None) == E.NONE
        assert c.validate_offset_commit("g", "", -1, None) == E.UNKNOWN_MEMBER_ID
        assert c.delete_group("g") == E.NON_EMPTY_GROUP
    run(scenario())


def test_close_answers_parked_joins():
    async def scenario():
        c = coordinator(initial_rebalance_delay_ms=10_000)
        first = await join(c)
        parked = asyncio.create_task(join(c, first["member_id"], rebalance_ms=30_000))
        await asyncio.sleep(0.01)
        c.close()
        assert (await parked)["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    run(scenario())



def test_initial_delay_longer_than_rebalance_timeout_still_completes():
    """Found by fuzzing: a first join whose rebalance timeout is shorter than the initial
    rebalance delay must still complete (it used to park forever)."""
    async def scenario():
        c = coordinator(initial_rebalance_delay_ms=100)
        resp = await join(c, instance="static-1", rebalance_ms=97)
        assert resp["error_code"] == E.NONE and resp["generation_id"] == 1
        dynamic = await join_with_id(c, group="other", rebalance_ms=10)
        assert dynamic["error_code"] == E.NONE
    run(scenario())
