"""Certain evidence that a broker process is gone: its listening ports refuse connections
(``docs/design/failover.md``, "Detection from lost connections").

A TCP connect to a port nobody listens on is answered by the peer's kernel with a reset
(ECONNREFUSED). A killed broker's ports refuse once the kernel has torn the process down; a
stalled (SIGSTOP) or busy broker's listener still completes the handshake in the kernel, and a
partitioned one does not answer at all. So only *refused, on every advertised port, in two
rounds in a row* counts as death; an accepted or unanswered connect proves nothing and the
caller falls back to the lease. Owns no state; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

REFUSED = "refused"
ACCEPTED = "accepted"
NO_ANSWER = "no answer"


def _split(address: str) -> tuple[str, int] | None:
    host, sep, port = (address or "").rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


async def connect_outcome(address: str, timeout_s: float = 0.3) -> str:
    """``refused`` (nothing listens), ``accepted`` or ``no answer`` (timeout, unreachable...)."""
    target = _split(address)
    if target is None:
        return NO_ANSWER
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(*target), timeout_s)
    except ConnectionRefusedError:
        return REFUSED
    except (OSError, asyncio.TimeoutError):
        return NO_ANSWER
    writer.close()
    return ACCEPTED


async def ports_refused(addresses: list[str], until: float, still_wanted: Callable[[], bool],
                        interval_s: float = 0.075, clock: Callable[[], float] = time.monotonic
                        ) -> tuple[bool, list[dict[str, str]]]:
    """Probe ``addresses`` every ``interval_s`` until two rounds in a row found every one of them
    refusing (True), or ``until`` (monotonic) passed, or ``still_wanted()`` turned false (False).
    Returns the verdict and the rounds' outcomes (the evidence, for the log). A round that is not
    all-refused (the dying process's listener may still accept for an instant) resets the count."""
    targets = [a for a in dict.fromkeys(addresses) if _split(a) is not None]
    rounds: list[dict[str, str]] = []
    if not targets:
        return False, rounds
    streak = 0
    while still_wanted() and clock() < until:
        outcomes = await asyncio.gather(*(connect_outcome(a) for a in targets))
        rounds.append(dict(zip(targets, outcomes)))
        streak = streak + 1 if all(o == REFUSED for o in outcomes) else 0
        if streak >= 2:
            return True, rounds[-2:]
        await asyncio.sleep(interval_s)
    return False, rounds[-2:]
