"""JoinGroup (key 11), versions 0-9 — classic group protocol, see ``gateway_kafka.coordinator``.

KIP-394: from v4 a member without an id gets MEMBER_ID_REQUIRED and an id to rejoin with.
Static membership (KIP-345, ``group_instance_id``) from v5. The request parks until the join
phase completes (all known members rejoined, or the rebalance timeout), so it can take up to
the rebalance timeout; other connections are unaffected. ``skip_assignment`` (v9) is always
false: the leader always computes the assignment. A JoinGroup for a KIP-848 consumer group is a
classic member of it (``ModernGroupCoordinator.classic_join``): answered at once, with the
broker's assignment coming in SyncGroup.
"""

from __future__ import annotations

from gateway_kafka.apis import RequestContext, api


@api(key=11, min=0, max=9)
async def handle(ctx: RequestContext, body: dict) -> dict:
    protocols = [(p.get("name", ""), bytes(p.get("metadata") or b"")) for p in body.get("protocols") or ()]
    args = dict(
        group_id=body.get("group_id", ""), member_id=body.get("member_id", ""),
        group_instance_id=body.get("group_instance_id"), protocol_type=body.get("protocol_type", ""),
        protocols=protocols, session_timeout_ms=body.get("session_timeout_ms", 0),
        rebalance_timeout_ms=body.get("rebalance_timeout_ms", -1), client_id=ctx.client_id or "",
        client_host="/" + ctx.conn.peer_host, require_known_member_id=ctx.api_version >= 4)
    resp = None
    if ctx.gateway.modern_groups.owns(args["group_id"]):
        resp = await ctx.gateway.modern_groups.classic_join(**args)
    if resp is None:
        resp = await ctx.gateway.coordinator.join_group(**args)
    resp = dict(resp)
    resp["throttle_time_ms"] = 0
    if resp.get("protocol_name") is None and ctx.api_version < 7:
        resp["protocol_name"] = ""
    return resp
