"""ShareGroupDescribe (key 77), version 1 — share groups as ``kafka-share-groups --describe
--members`` shows them: state, epochs, the ``simple`` assignor, and per member its epoch,
subscription and assignment. A group that is not a share group answers GROUP_ID_NOT_FOUND;
one the caller may not DESCRIBE, GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis.consumer_group_describe import describe
from gateway_kafka.consumer_groups import SHARE

_MEMBER_FIELDS = ("member_id", "rack_id", "member_epoch", "client_id", "client_host", "subscribed_topic_names",
                  "assignment")


@api(key=77, min=1, max=1)
async def handle(ctx: RequestContext, body: dict) -> dict:
    groups = describe(ctx, body, SHARE)
    for entry in groups:
        entry["members"] = [{k: m[k] for k in _MEMBER_FIELDS} for m in entry["members"]]
    return {"throttle_time_ms": 0, "groups": groups}
