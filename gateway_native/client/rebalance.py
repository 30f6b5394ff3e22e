"""Queue allocation strategies (RocketMQ's ``AllocateMessageQueueStrategy`` implementations).

Every strategy is a pure function of (group, this client id, all queues, all client ids); both
lists are sorted first, so every member of a group computes the same, disjoint assignment and
their union is every queue:
- ``AllocateAverage`` (AVG): contiguous blocks, the first ``len(mq) % len(cid)`` clients one more;
- ``AllocateAverageByCircle`` (AVG_BY_CIRCLE): queue i to client i mod n;
- ``AllocateConsistentHash`` (CONSISTENT_HASH): a hash ring with ``virtual_nodes`` per client
  (MD5, as RocketMQ's ``ConsistentHashRouter``), so a member joining or leaving moves few queues;
- ``AllocateMachineRoomNearby`` (MACHINE_ROOM): queues go to clients in the same machine room
  first (rooms from ``room_of_queue`` / ``room_of_client``), the rest by an inner strategy;
- ``AllocateByConfig`` (CONFIG): a fixed list of queues.
"""

from __future__ import annotations

import bisect
import hashlib
from typing import Callable, Sequence

from .message import MessageQueue


class AllocateStrategy:
    name = "?"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> list[MessageQueue]:
        raise NotImplementedError

    def __call__(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> list[MessageQueue]:
        mqs, cids = sorted(mq_all), sorted(cid_all)
        if not current_cid or not mqs or current_cid not in cids:
            return []
        return self.allocate(group, current_cid, mqs, cids)


class AllocateAverage(AllocateStrategy):
    name = "AVG"

    def allocate(self, group, current_cid, mqs, cids):
        index, n, m = cids.index(current_cid), len(cids), len(mqs)
        mod = m % n
        if m <= n:
            size = 1
        elif mod > 0 and index < mod:
            size = m // n + 1
        else:
            size = m // n
        start = index * size if mod > 0 and index < mod else index * size + mod
        rng = min(size, m - start)
        return [mqs[(start + i) % m] for i in range(max(rng, 0))]


class AllocateAverageByCircle(AllocateStrategy):
    name = "AVG_BY_CIRCLE"

    def allocate(self, group, current_cid, mqs, cids):
        index, n = cids.index(current_cid), len(cids)
        return [mq for i, mq in enumerate(mqs) if i % n == index]


def _md5_long(key: str) -> int:
    digest = hashlib.md5(key.encode()).digest()
    h = 0
    for i in range(4):
        h <<= 8
        h |= digest[i] & 0xFF
    return h


class AllocateConsistentHash(AllocateStrategy):
    name = "CONSISTENT_HASH"

    def __init__(self, virtual_nodes: int = 10):
        if virtual_nodes < 0:
            raise ValueError("virtual_nodes must be >= 0")
        self.virtual_nodes = virtual_nodes

    def allocate(self, group, current_cid, mqs, cids):
        ring: list[tuple[int, str]] = []
        for cid in cids:
            for i in range(max(self.virtual_nodes, 1)):
                ring.append((_md5_long(f"{cid}-{i}"), cid))
        ring.sort()
        keys = [k for k, _ in ring]
        out = []
        for mq in mqs:
            h = _md5_long(str(mq))
            i = bisect.bisect_left(keys, h)
            owner = ring[i % len(ring)][1]
            if owner == current_cid:
                out.append(mq)
        return out


class AllocateMachineRoomNearby(AllocateStrategy):
    name = "MACHINE_ROOM"

    def __init__(self, inner: AllocateStrategy, room_of_queue: Callable[[MessageQueue], str],
                 room_of_client: Callable[[str], str]):
        self.inner = inner
        self.room_of_queue = room_of_queue
        self.room_of_client = room_of_client

    def allocate(self, group, current_cid, mqs, cids):
        by_room: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_room.setdefault(self.room_of_queue(mq), []).append(mq)
        clients_by_room: dict[str, list[str]] = {}
        for cid in cids:
            clients_by_room.setdefault(self.room_of_client(cid), []).append(cid)
        my_room = self.room_of_client(current_cid)
        out = []
        if by_room.get(my_room) and clients_by_room.get(my_room):
            out += self.inner(group, current_cid, by_room[my_room], clients_by_room[my_room])
        for room, queues in sorted(by_room.items()):
            if room not in clients_by_room:  # nobody in that room: everyone shares it
                out += self.inner(group, current_cid, queues, cids)
        return out


class AllocateByConfig(AllocateStrategy):
    name = "CONFIG"

    def __init__(self, queues: Sequence[MessageQueue]):
        self.queues = list(queues)

    def allocate(self, group, current_cid, mqs, cids):
        return list(self.queues)

    def __call__(self, group, current_cid, mq_all, cid_all):
        return list(self.queues)


STRATEGIES = {"AVG": AllocateAverage, "AVG_BY_CIRCLE": AllocateAverageByCircle, "CONSISTENT_HASH": AllocateConsistentHash}
