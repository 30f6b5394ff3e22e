"""Request parameters of the admin listener, shared by the JSON API and the console: integers
in a range and times (epoch ms or ISO 8601, as ``rockafka admin`` takes them). A bad value raises
``BadRequest`` with a message a person can act on (400 in the API, shown on the page)."""

from __future__ import annotations

from typing import Any


class Forbidden(Exception):
    """The user may not read what was asked (403, or the console's error line)."""


class BadRequest(ValueError):
    """A parameter a person must fix; answered 400 (API) or shown on the page (console)."""


def int_param(query: Any, name: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = (query.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {raw!r}") from None
    if not lo <= value <= hi:
        raise BadRequest(f"{name} must be in {lo}..{hi}, got {value}")
    return value


def time_param(query: Any, name: str) -> int | None:
    """Epoch milliseconds or ISO 8601 (no zone = UTC), as ``rockafka admin`` takes them."""
    from .admin_cli import AdminCliError, parse_timestamp

    raw = (query.get(name) or "").strip()
    if not raw:
        return None
    try:
        return parse_timestamp(raw)
    except AdminCliError as exc:
        raise BadRequest(f"{name}: {exc}") from None
