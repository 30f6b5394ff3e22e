"""ApiVersions (key 18), versions 0-4.

Answers with every API key in the registry and the versions both its handler and the codec
support, so what is advertised is exactly what is handled. KIP-511: a request of a version
newer than we speak gets UNSUPPORTED_VERSION in a v0 body (done by the server before decode,
since such a request cannot be decoded); v3+ requests carry the client's software name and
version, remembered per connection for logs. No feature flags are advertised (no KRaft
features to finalise). StreamsGroupHeartbeat/StreamsGroupDescribe are left out when the
``group_coordinator_rebalance_protocols`` setting lacks ``streams`` (it has it by default).
"""

from __future__ import annotations

from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, advertised, api

STREAMS_GROUP_KEYS = (88, 89)  # offered when group.coordinator.rebalance.protocols has "streams"


@api(key=18, min=0, max=4)
async def handle(ctx: RequestContext, body: dict) -> dict:
    if ctx.api_version >= 3:
        ctx.conn.client_software_name = body.get("client_software_name")
        ctx.conn.client_software_version = body.get("client_software_version")
    streams = "streams" in getattr(ctx.gateway.settings, "rebalance_protocols", {"streams"})
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in advertised()
            if streams or k not in STREAMS_GROUP_KEYS]
    return {"error_code": E.NONE, "api_keys": keys, "throttle_time_ms": 0}
