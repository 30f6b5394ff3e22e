"""Topic route data as the NameServer sends it (``TopicRouteData``), read by both sides.

Apache RocketMQ answers older clients in fastjson's legacy form, whose ``brokerAddrs`` map has
bare integer keys (``{0:"host:port"}``), and newer ones in standard JSON; ``decode_route_json``
reads either.
"""

from __future__ import annotations

import json
import re
from typing import Any

_BARE_INT_KEY = re.compile(r'([{,])(-?\d+):')


def decode_route_json(data: bytes) -> Any:
    """Parse route data in either form (quotes bare integer keys first)."""
    return json.loads(_BARE_INT_KEY.sub(r'\1"\2":', data.decode("utf-8")))
