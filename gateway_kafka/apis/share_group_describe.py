"""ShareGroupDescribe (key 77), version 1 — share groups as ``kafka-share-groups --describe
--members`` shows them: state, epochs, the ``simple`` assignor, and per member its epoch,
subscription and assignment. A group that is not a share group answers GROUP_ID_NOT_FOUND;
one the caller may not DESCRIBE, GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import GROUP_OPERATIONS, NOT_ASKED
from gateway_kafka.consumer_groups import SHARE

_MEMBER_FIELDS = ("member_id", "rack_id", "member_epoch", "client_id", "client_host", "subscribed_topic_names",
                  "assignment")


@api(key=77, min=1, max=1)
async def handle(ctx: RequestContext, body: dict) -> dict:
    groups = []
    for gid in body.get("group_ids") or ():
        if not authz.group(ctx, authz.Op.DESCRIBE, gid):
            groups.append({"error_code": E.GROUP_AUTHORIZATION_FAILED, "group_id": gid, "group_state": "",
                           "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
                           "authorized_operations": NOT_ASKED})
            continue
        entry = ctx.gateway.modern_groups.describe(gid, SHARE)
        entry["members"] = [{k: m[k] for k in _MEMBER_FIELDS} for m in entry["members"]]
        entry["authorized_operations"] = authz.authorized_operations(ctx, authz.RT.GROUP, gid, GROUP_OPERATIONS) \
            if body.get("include_authorized_operations") else NOT_ASKED
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}
