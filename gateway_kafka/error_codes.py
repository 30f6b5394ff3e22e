"""Kafka error codes as plain module constants (``E.UNKNOWN_MEMBER_ID``) for the handlers.

The single source of the numbers is the codec's table, ``gateway_kafka.protocol.errors``
(``ErrorCode``); this module re-exports every member by name as an ``int`` so handlers and the
coordinator can write ``E.NAME`` without enum conversions, and adds ``NAMES`` (code -> name)
for logs.
"""

from __future__ import annotations

from gateway_kafka.protocol.errors import ErrorCode

globals().update({code.name: int(code) for code in ErrorCode})
NAMES = {int(code): code.name for code in ErrorCode}
