"""ApiVersions (key 18), versions 0-4.

Answers with every API key in the registry and the versions both its handler and the codec
support, so what is advertised is exactly what is handled. KIP-511: a request of a version
newer than we speak gets UNSUPPORTED_VERSION in a v0 body (done by the server before decode,
since such a request cannot be decoded); v3+ requests carry the client's software name and
version, remembered per connection for logs. No feature flags are advertised (no KRaft
features to finalise).
"""

from __future__ import annotations

from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, advertised, api


@api(key=18, min=0, max=4)
async def handle(ctx: RequestContext, body: dict) -> dict:
    if ctx.api_version >= 3:
        ctx.conn.client_software_name = body.get("client_software_name")
        ctx.conn.client_software_version = body.get("client_software_version")
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in advertised()]
    return {"error_code": E.NONE, "api_keys": keys, "throttle_time_ms": 0}
