"""ConsumerGroupDescribe (key 69), versions 0-1 — KIP-848 consumer groups as
``kafka-consumer-groups --describe --members`` shows them: state, group and assignment epochs,
assignor, and per member its epoch, subscription (names or regex), current assignment and
target assignment. A group that is not a consumer group (classic, share, unknown) answers
GROUP_ID_NOT_FOUND, on which Kafka's admin client asks DescribeGroups instead.
A group the caller may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED; authorized operations
(when asked) are the group operations the caller's ACLs allow.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import GROUP_OPERATIONS, NOT_ASKED
from gateway_kafka.consumer_groups import CONSUMER


@api(key=69, min=0, max=1)
async def handle(ctx: RequestContext, body: dict) -> dict:
    return {"throttle_time_ms": 0, "groups": describe(ctx, body, CONSUMER)}


def describe(ctx: RequestContext, body: dict, group_type: int) -> list[dict]:
    """Entries of ConsumerGroupDescribe / ShareGroupDescribe (``group_type``)."""
    groups = []
    for gid in body.get("group_ids") or ():
        if not authz.group(ctx, authz.Op.DESCRIBE, gid):
            groups.append({"error_code": E.GROUP_AUTHORIZATION_FAILED, "group_id": gid, "group_state": "",
                           "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
                           "authorized_operations": NOT_ASKED})
            continue
        entry = ctx.gateway.modern_groups.describe(gid, group_type)
        entry["authorized_operations"] = authz.authorized_operations(ctx, authz.RT.GROUP, gid, GROUP_OPERATIONS) \
            if body.get("include_authorized_operations") else NOT_ASKED
        groups.append(entry)
    return groups
