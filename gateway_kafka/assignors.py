"""Broker-side assignors of KIP-848 consumer groups and KIP-932 share groups.

Pure functions: members' subscriptions (topic names), the partition count of every subscribed
topic and the current target go in, the next target comes out. Nothing here knows the wire.

- ``uniform`` (Kafka's default ``group.consumer.assignors`` entry, UniformAssignor): every
  partition of a topic goes to exactly one member subscribed to it; members get as equal a
  share as their subscriptions allow; sticky — a partition stays with its current owner while
  that owner is subscribed to it and below its quota, so a join or leave moves as few
  partitions as a balanced result needs.
- ``range`` (RangeAssignor): per topic, members subscribed to it (sorted by member id) take
  consecutive ranges of partitions, the first ``count % members`` one partition more; topics
  with the same partition count are split the same way (co-partitioning), as Kafka's.
- ``simple`` (share groups, Kafka's SimpleAssignor): every partition goes to at least one
  member subscribed to it; with more members than partitions a partition is shared by several
  members (that is what share groups are for), each member getting at least one partition.

Invariants: the result only names members of the input and partitions that exist; a member
that subscribes to nothing gets nothing; the same input always gives the same output.
"""

from __future__ import annotations

from typing import Mapping

Assignment = dict[str, set[int]]          # topic -> partitions
UNIFORM, RANGE, SIMPLE = "uniform", "range", "simple"
CONSUMER_ASSIGNORS = (UNIFORM, RANGE)     # the order of group.consumer.assignors: first = default


def assign(name: str, subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int],
           current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """The target assignment of ``name`` for members -> subscribed topics."""
    if name == RANGE:
        return range_assign(subscriptions, partitions)
    if name == SIMPLE:
        return simple_assign(subscriptions, partitions)
    return uniform_assign(subscriptions, partitions, current)


def uniform_assign(subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int],
                   current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    members = sorted(subscriptions)
    out: dict[str, Assignment] = {m: {} for m in members}
    if not members:
        return out
    all_parts = [(t, p) for t in sorted(partitions) for p in range(partitions[t])
                 if any(t in subscriptions[m] for m in members)]
    eligible = {tp: [m for m in members if tp[0] in subscriptions[m]] for tp in all_parts}
    # quota: an even share of what each member can take (an upper bound for stickiness)
    counts = {m: 0 for m in members}
    total = len(all_parts)
    can_take = {m: sum(1 for tp in all_parts if tp[0] in subscriptions[m]) for m in members}
    active = [m for m in members if can_take[m]]
    quota = {m: (-(-total // len(active)) if active else 0) for m in members}
    owner_of: dict[tuple[str, int], str] = {}
    for m in members:  # keep current owners while they are eligible and within quota
        for t, ps in sorted((current.get(m) or {}).items()):
            for p in sorted(ps):
                tp = (t, p)
                if tp in eligible and m in eligible[tp] and tp not in owner_of and counts[m] < quota[m]:
                    owner_of[tp] = m
                    counts[m] += 1
    # the rest go to the eligible member with the fewest partitions (ties: member id order);
    # partitions with the fewest candidates first, so constrained ones are placed well
    for tp in sorted((tp for tp in all_parts if tp not in owner_of), key=lambda tp: (len(eligible[tp]), tp)):
        m = min(eligible[tp], key=lambda x: (counts[x], x))
        owner_of[tp] = m
        counts[m] += 1
    # rebalance: move partitions from members above the lowest count + 1 to eligible ones below
    moved = True
    while moved:
        moved = False
        for tp, m in sorted(owner_of.items()):
            better = [x for x in eligible[tp] if counts[x] + 1 < counts[m]]
            if better:
                x = min(better, key=lambda x: (counts[x], x))
                owner_of[tp] = x
                counts[m] -= 1
                counts[x] += 1
                moved = True
    for (t, p), m in owner_of.items():
        out[m].setdefault(t, set()).add(p)
    return out


def range_assign(subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    for t in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if t in topics)
        if not members:
            continue
        n = partitions[t]
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            size = per + (1 if i < extra else 0)
            if size:
                out[m].setdefault(t, set()).update(range(start, start + size))
            start += size
    return out


def simple_assign(subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    for t in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if t in topics)
        n = partitions[t]
        if not members or not n:
            continue
        if len(members) <= n:  # each partition to one member, round robin
            for p in range(n):
                out[members[p % len(members)]].setdefault(t, set()).add(p)
        else:  # more members than partitions: every member gets one, partitions are shared
            for i, m in enumerate(members):
                out[m].setdefault(t, set()).add(i % n)
    return out
