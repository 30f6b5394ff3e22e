"""The failure limiter every listener shares (engine/security/throttle.py), driven by a fake
clock: checks a second per user and per address, the user lockout, an owner logging in from a
clean address while the user is attacked, and addresses never locked."""

from __future__ import annotations

from engine.security.throttle import AuthThrottle, source_host


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def guesses(th: AuthThrottle, clock: Clock, user: str, peer: str, seconds: float, step: float = 0.01) -> int:
    """A guesser as fast as ``step`` allows; returns how many guesses were checked."""
    checked, end = 0, clock.t + seconds
    while clock.t < end:
        if th.admit(user, peer) == 0.0:
            checked += 1
            th.failed(user, peer)
        clock.t += step
    return checked


def test_one_user_gets_at_most_rate_checks_a_second_from_any_number_of_guessers():
    clock = Clock()
    th = AuthThrottle(per_user=5, per_source=1000, lockout_threshold=0, clock=clock)
    checked = guesses(th, clock, "victim", "10.0.0.1:4000", 10.0)
    assert checked <= 5 * 10 + 5 + 1 and checked >= 5 * 10  # the burst, the first clean guess, then 5/s


def test_a_user_is_locked_for_the_window_after_the_threshold_and_a_clean_address_still_gets_in():
    clock = Clock()
    th = AuthThrottle(per_user=100, per_source=1000, lockout_threshold=10, lockout_window_ms=60_000, clock=clock)
    assert guesses(th, clock, "victim", "10.0.0.1:1", 1.0) == 10  # then locked
    assert th.admit("victim", "10.0.0.1:2") > 50  # same address, another connection: still locked
    assert th.admit("victim", "10.0.0.9:1") == 0.0  # the owner, from an address without failures
    clock.t += 61
    assert th.admit("victim", "10.0.0.1:3") == 0.0


def test_an_address_is_rate_limited_across_users_but_never_locked():
    clock = Clock()
    th = AuthThrottle(per_user=1000, per_source=20, lockout_threshold=5, clock=clock)
    checked = 0
    for n in range(400):  # a spray: a new user name each time, 100 a second for 4 s
        if th.admit(f"user{n}", "10.0.0.1:1") == 0.0:
            checked += 1
            th.failed(f"user{n}", "10.0.0.1:1")
        clock.t += 0.01
    assert checked <= 20 * 4 + 20 + 1
    clock.t += 1.0
    assert th.admit("someone", "10.0.0.1:7") == 0.0  # refilled: no lockout of the address


def test_peer_spellings_map_to_one_address():
    assert {source_host(p) for p in ("10.1.2.3:5", "ipv4:10.1.2.3:6", "10.1.2.3")} == {"10.1.2.3"}
    assert source_host("ipv6:[::1]:5") == "::1" and source_host("[::1]:7") == "::1"
