"""Property test of the group coordinator: random joins, syncs, heartbeats, leaves and session
expiries never crash it, never lower a generation, never leave a parked JoinGroup/SyncGroup
unanswered after shutdown, and a Stable group's members always hold what the leader assigned.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway_kafka import error_codes as E
from gateway_kafka.coordinator import STABLE, GroupCoordinator

OPS = st.lists(st.tuples(st.sampled_from(["join", "rejoin", "sync", "heartbeat", "leave", "wait"]),
                         st.integers(0, 3)), min_size=1, max_size=30)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_random_membership_operations_keep_invariants(ops):
    async def scenario():
        c = GroupCoordinator(min_session_timeout_ms=10, max_session_timeout_ms=60_000, initial_rebalance_delay_ms=0)
        ids: dict[int, str] = {}
        gens: dict[int, int] = {}
        tasks: list[asyncio.Task] = []
        last_generation = 0

        async def join(slot: int) -> None:
            resp = await c.join_group(group_id="g", member_id=ids.get(slot, ""), group_instance_id=None,
                                      protocol_type="consumer", protocols=[("range", b"m%d" % slot)],
                                      session_timeout_ms=200, rebalance_timeout_ms=300, client_id=f"c{slot}",
                                      client_host="/127.0.0.1", require_known_member_id=True)
            if resp["error_code"] in (E.NONE, E.MEMBER_ID_REQUIRED):
                ids[slot] = resp["member_id"]
                if resp["error_code"] == E.NONE:
                    gens[slot] = resp["generation_id"]
                    if resp["leader"] == resp["member_id"]:
                        assignments = [(m["member_id"], m["member_id"].encode()) for m in resp["members"]]
                        await c.sync_group(group_id="g", generation_id=resp["generation_id"],
                                           member_id=resp["member_id"], group_instance_id=None, protocol_type=None,
                                           protocol_name=None, assignments=assignments)

        async def sync(slot: int) -> None:
            if slot in ids:
                await c.sync_group(group_id="g", generation_id=gens.get(slot, -1), member_id=ids[slot],
                                   group_instance_id=None, protocol_type=None, protocol_name=None, assignments=[])

        for op, slot in ops:
            if op in ("join", "rejoin"):
                if op == "join":
                    ids.pop(slot, None)
                tasks.append(asyncio.create_task(join(slot)))
            elif op == "sync":
                tasks.append(asyncio.create_task(sync(slot)))
            elif op == "heartbeat" and slot in ids:
                code = c.heartbeat(group_id="g", member_id=ids[slot], generation_id=gens.get(slot, -1),
                                   group_instance_id=None)
                assert code in (E.NONE, E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.REBALANCE_IN_PROGRESS)
            elif op == "leave" and slot in ids:
                c.leave_group("g", [(ids[slot], None)])
            elif op == "wait":
                await asyncio.sleep(0.02 * (slot + 1))
            await asyncio.sleep(0)
            group = c.groups.get("g")
            if group is not None:
                assert group.generation_id >= last_generation
                last_generation = group.generation_id
                if group.state == STABLE:
                    for m in group.members.values():
                        # the leader in these scenarios assigns each member its own id
                        assert m.assignment in (m.member_id.encode(), b"")
        c.close()
        done, pending = await asyncio.wait(tasks, timeout=10) if tasks else (set(), set())
        assert not pending, "a parked request was never answered"
        for t in done:
            t.result()  # no handler raised

    asyncio.run(asyncio.wait_for(scenario(), 30))
