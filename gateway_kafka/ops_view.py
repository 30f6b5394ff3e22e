"""Read-only operator views of the Kafka gateway (broker.ops_view): its consumer groups with
members and their assigned partitions, and its open connections. Built from the coordinator's
public ``listing()``/``describe()``; nothing here changes gateway state."""

from __future__ import annotations

from typing import Any

from broker.ops_view import GroupMember, GroupView


def parse_consumer_assignment(data: bytes) -> tuple[tuple[str, int], ...]:
    """(topic, partition) pairs of a ConsumerProtocolAssignment: version int16, then an array
    (int32 count) of topic (int16-length string) + partitions (int32 count of int32). Anything
    that does not parse (another protocol type, garbage) is no assignment."""
    out: list[tuple[str, int]] = []
    try:
        pos = 2
        topics = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        pos += 4
        for _ in range(max(0, min(topics, 100_000))):
            n = int.from_bytes(data[pos:pos + 2], "big", signed=True)
            pos += 2
            topic = data[pos:pos + n].decode("utf-8")
            pos += n
            count = int.from_bytes(data[pos:pos + 4], "big", signed=True)
            pos += 4
            if count < 0 or pos + 4 * count > len(data):
                return ()
            for _i in range(count):
                out.append((topic, int.from_bytes(data[pos:pos + 4], "big", signed=True)))
                pos += 4
    except (UnicodeDecodeError, ValueError):
        return ()
    return tuple(sorted(out))


def group_views(gateway: Any) -> list[GroupView]:
    from gateway_kafka.coordinator import parse_consumer_subscription

    coordinator = gateway.coordinator
    views = []
    for group_id, protocol_type, _state in coordinator.listing():
        doc = coordinator.describe(group_id)
        if doc is None:
            continue
        members = tuple(
            GroupMember(member_id=m["member_id"], client_id=m["client_id"] or "", host=m["client_host"] or "",
                        assignment=parse_consumer_assignment(m["member_assignment"] or b""),
                        subscriptions=tuple(parse_consumer_subscription(m["member_metadata"] or b""))
                        if protocol_type == "consumer" else (),
                        detail=f"instance {m['group_instance_id']}" if m["group_instance_id"] else "")
            for m in doc["members"])
        detail = " / ".join(x for x in (protocol_type, doc["protocol_data"]) if x)
        views.append(GroupView(group_id, "kafka", doc["group_state"], members, detail))
    return views


def connection_count(gateway: Any) -> int:
    return len(gateway._connections)  # noqa: SLF001 - the gateway's own task set, read only
