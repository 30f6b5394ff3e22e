"""DeleteGroups (key 42), versions 0-2.

Deletes a group's committed offsets and its group metadata (tombstones in ``__consumer_offsets``,
stored before the answer). A group with members gets NON_EMPTY_GROUP; a group nobody knows
GROUP_ID_NOT_FOUND, as Kafka answers; COORDINATOR_NOT_AVAILABLE when the store does not take the
tombstones.
"""

from __future__ import annotations

from engine.consumer_offset import is_reserved_group
from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.coordinator import DEAD, EMPTY


@api(key=42, min=0, max=2)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    offsets = gw.store.consumer_offsets
    known = offsets.groups()
    results = []
    for gid in body.get("groups_names") or ():
        if is_reserved_group(gid):   # names of operator tables, never a client's group
            results.append({"group_id": gid, "error_code": E.INVALID_GROUP_ID})
            continue
        if gw.streams_groups.owns(gid):
            code = await _delete_streams(gw, gid) if authz.group(ctx, authz.Op.DELETE, gid) \
                else E.GROUP_AUTHORIZATION_FAILED
            results.append({"group_id": gid, "error_code": code})
            continue
        if gw.modern_groups.owns(gid):
            code = await _delete_modern(gw, gid) if authz.group(ctx, authz.Op.DELETE, gid) \
                else E.GROUP_AUTHORIZATION_FAILED
            results.append({"group_id": gid, "error_code": code})
            continue
        state = gw.coordinator.state_of(gid)
        if not authz.group(ctx, authz.Op.DELETE, gid):
            code = E.GROUP_AUTHORIZATION_FAILED
        elif state is None and gid not in known:
            code = E.GROUP_ID_NOT_FOUND
        elif state not in (None, EMPTY, DEAD):
            code = E.NON_EMPTY_GROUP
        else:
            res = await gw.put(offsets.delete_group, gid)
            if res is not None and not res.stored:
                code = E.COORDINATOR_NOT_AVAILABLE
            else:
                code = gw.coordinator.delete_group(gid)
                gw.group_configs.forget(gid)
                gw.log.info("group_deleted", group=gid)
        results.append({"group_id": gid, "error_code": code})
    return {"throttle_time_ms": 0, "results": results}


async def _delete_modern(gw, gid: str) -> int:
    """A KIP-848 consumer group or a share group (under its lock): a share group's delivery
    state goes too."""
    async with gw.modern_groups.lock(gid):
        return await _delete_empty(gw, gw.modern_groups, gid)


async def _delete_streams(gw, gid: str) -> int:
    """A streams group (its coordinator takes the group's lock when it drops it)."""
    return await _delete_empty(gw, gw.streams_groups, gid, type="streams")


async def _delete_empty(gw, registry, gid: str, **log_fields) -> int:
    """A group of ``registry`` only when it has no members: its records (group state, configs,
    offsets) get tombstones, then the registry forgets it."""
    g = registry.groups.get(gid)
    if g is None:
        return E.GROUP_ID_NOT_FOUND
    if g.members:
        return E.NON_EMPTY_GROUP
    res = await gw.put(gw.store.consumer_offsets.delete_group, gid)
    if res is not None and not res.stored:
        return E.COORDINATOR_NOT_AVAILABLE
    code = await registry.delete_group(gid)
    gw.group_configs.forget(gid)
    gw.log.info("group_deleted", group=gid, **log_fields)
    return code or E.NONE
