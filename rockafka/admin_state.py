"""What the admin listener shows, read off the store and the gateways' read-only views.

``NodeViews`` is the small read-only interface the node wiring (rockafka/app.py) hands the admin
component: functions that return the gateways' consumer groups (broker.ops_view.GroupView),
their open connection counts and the node's identity. The admin component never imports a
gateway's internals to get them, and nothing here writes: the two writes the console offers
(resend a dead letter, reset a group's offsets) go through the node's own NameServer and broker
with the Python SDK, exactly as ``rockafka admin`` does.

``AdminState`` methods are synchronous store reads; the HTTP handlers run them in the default
executor so that listing thousands of queues never blocks the event loop. Group membership is
read on the event loop (``NodeViews.groups``) and passed in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from broker import tiered
from broker.ops_view import GroupView
from engine.store import MessageStore

from .message_view import message_rows, unit_rows

DLQ_PREFIX = "%DLQ%"
RETRY_PREFIX = "%RETRY%"
ADMIN_GROUP = "rockafka-admin"


@dataclass
class NodeViews:
    group_views: list[Callable[[], list[GroupView]]] = field(default_factory=list)
    connections: dict[str, Callable[[], int]] = field(default_factory=dict)  # listener -> open connections
    node_info: Callable[[], dict[str, Any]] = dict
    namesrv_addr: Callable[[], str] | None = None  # the node's own NameServer, for the SDK writes

    def groups(self) -> dict[str, list[GroupView]]:
        """group -> its views (one per protocol it is live in). Call on the event loop."""
        out: dict[str, list[GroupView]] = {}
        for source in self.group_views:
            for view in source():
                out.setdefault(view.group, []).append(view)
        return out


def _is_system_topic(topic: str) -> bool:
    return topic.startswith((RETRY_PREFIX, DLQ_PREFIX, "rmq_sys_", "RMQ_SYS_")) or topic in (
        "SCHEDULE_TOPIC_XXXX", "TBW102")


class AdminState:
    def __init__(self, store: MessageStore):
        self.store = store

    # -- topics ------------------------------------------------------------------------------
    def queue_ids(self, topic: str) -> list[int]:
        cfg = self.store.topic_config.get(topic)
        known = set(self.store.queue_ids(topic))
        if cfg is not None:
            known.update(range(max(cfg.read_queue_nums, cfg.write_queue_nums)))
        return sorted(known)

    def topic_names(self) -> list[str]:
        names = set(self.store.topic_config.all())
        names.update(t for (t, _q) in self.store.consume_queues())
        return sorted(names)

    def queues(self, topic: str) -> list[dict[str, int]]:
        out = []
        for qid in self.queue_ids(topic):
            lo = self.store.get_min_offset_in_queue(topic, qid)
            hi = self.store.get_max_offset_in_queue(topic, qid)
            out.append({"queue_id": qid, "min_offset": lo, "max_offset": hi, "messages": max(0, hi - lo)})
        return out

    def topic(self, topic: str, broker: str = "") -> dict[str, Any] | None:
        cfg = self.store.topic_config.get(topic)
        queues = self.queues(topic)
        if cfg is None and not queues:
            return None
        for q in queues:  # one node: it leads every queue and is its only replica
            q["leader"] = broker
            q["replicas"] = [broker] if broker else []
        doc: dict[str, Any] = {"topic": topic, "queues": queues, "messages": sum(q["messages"] for q in queues),
                               "system": _is_system_topic(topic)}
        if cfg is not None:
            doc.update(read_queue_nums=cfg.read_queue_nums, write_queue_nums=cfg.write_queue_nums,
                       perm=cfg.perm, order=cfg.order, attributes=dict(cfg.attributes))
        remote = tiered.topic_summary(self.store, topic)
        if remote is not None:  # a tiered topic: its remote tier, and where each queue's log starts
            doc["remote_tier"] = remote
            for q in queues:
                q["log_start_offset"] = tiered.log_start_offset(self.store, topic, q["queue_id"])
        return doc

    def topics(self, broker: str = "") -> list[dict[str, Any]]:
        return [t for t in (self.topic(name, broker) for name in self.topic_names()) if t is not None]

    # -- groups ------------------------------------------------------------------------------
    def group(self, group: str) -> dict[str, Any] | None:
        offsets = self.store.consumer_offsets.offsets_of(group)
        if not offsets:
            return None
        rows = []
        for (topic, qid), committed in sorted(offsets.items()):
            hi = self.store.get_max_offset_in_queue(topic, qid)
            rows.append({"topic": topic, "queue_id": qid, "committed_offset": committed,
                         "max_offset": hi, "lag": max(0, hi - max(committed, 0))})
        return {"group": group, "queues": rows, "lag": sum(r["lag"] for r in rows)}

    def group_lags(self) -> dict[str, int]:
        out = {}
        for name in self.store.consumer_offsets.groups():
            doc = self.group(name)
            if doc is not None:
                out[name] = doc["lag"]
        return out

    def groups(self, live: dict[str, list[GroupView]] | None = None) -> list[dict[str, Any]]:
        """Every group with committed offsets or live members, with both protocols' membership."""
        live = live or {}
        names = set(self.store.consumer_offsets.groups()) | set(live)
        out = []
        for name in sorted(names):
            doc = self.group(name) or {"group": name, "queues": [], "lag": 0}
            out.append(with_members(doc, live.get(name, [])))
        return out

    # -- messages ----------------------------------------------------------------------------
    def browse(self, topic: str, queue_id: int | None, offset: int | None, since_ms: int | None,
               max_rows: int) -> list[dict[str, Any]]:
        """Rows from ``offset`` (or the first stored at/after ``since_ms``, else the newest
        ``max_rows``) of one queue, or of every queue of the topic merged by time."""
        qids = [queue_id] if queue_id is not None else self.queue_ids(topic)
        rows: list[dict[str, Any]] = []
        per_queue = max_rows if queue_id is not None else max(1, -(-max_rows // max(len(qids), 1)))
        for qid in qids:
            lo = self.store.get_min_offset_in_queue(topic, qid)
            hi = self.store.get_max_offset_in_queue(topic, qid)
            if offset is not None:
                start = max(offset, lo)
            elif since_ms is not None:
                start = self.store.get_offset_in_queue_by_time(topic, qid, since_ms)
            else:
                start = max(lo, hi - per_queue)
            rows.extend(self._read(topic, qid, start, per_queue))
        rows.sort(key=lambda r: (r["store_timestamp"], r["queue_id"], r["offset"]))
        return rows[:max_rows] if since_ms is not None or offset is not None else rows[-max_rows:]

    def _read(self, topic: str, qid: int, start: int, max_rows: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        offset = start
        while len(out) < max_rows:
            res = self.store.get_message(ADMIN_GROUP, topic, qid, offset, max_rows - len(out))
            if not res.messages:
                break
            for unit in res.messages:
                out.extend(unit_rows(bytes(unit), first_offset=start))
            if res.next_begin_offset <= offset:
                break
            offset = res.next_begin_offset
        return out[:max_rows]

    def query_by_key(self, topic: str, key: str, max_num: int) -> list[dict[str, Any]]:
        result = self.store.query_message(topic, key, max_num, 0, int(time.time() * 1000) + 60_000)
        rows: list[dict[str, Any]] = []
        for unit in result.messages:
            found = unit_rows(bytes(unit), key=key.encode())
            if not found:  # matched by KEYS / UNIQ_KEY rather than the record key
                found = [r for r in unit_rows(bytes(unit)) if key in r["keys"] or r["uniq_key"] == key]
            rows.extend(found)
        return rows[:max_num]

    def message_by_id(self, msg_id: str, topic: str | None = None) -> list[dict[str, Any]] | None:
        """Rows of the message with id ``msg_id``, whichever id it is (ValueError when it is not
        a message id at all):

        - the offset message id (store host + commitlog offset): the unit there (a Kafka batch
          gives all its records);
        - the client message id (UNIQ_KEY, ``7F00...``: what the SDK, the Java client and
          ``query key`` print), through the ``topic#UNIQ_KEY`` index of ``topic`` or, without
          one, of every topic;
        - a Kafka record's id as native consumers see it (store ip + commitlog offset of its
          batch + offset delta): that record."""
        if len(msg_id) not in (32, 56) or any(c not in "0123456789abcdefABCDEF" for c in msg_id):
            raise ValueError(f"{msg_id!r} is not a message id (32 hex digits: the client id UNIQ_KEY, "
                             "or the offset id: store host + commitlog offset)")
        wanted = msg_id.upper()
        m = self.store.look_message_by_id(msg_id)
        # a client id decodes to an arbitrary offset: only a unit that starts there is the answer
        if m is not None and m.msg_id[-16:].upper() == wanted[-16:]:
            return message_rows(m)
        for t in [topic] if topic else self.topic_names():
            rows = [r for r in self.query_by_key(t, msg_id, 4) if str(r.get("uniq_key") or "").upper() == wanted]
            if rows:
                return rows
        if len(msg_id) == 32:
            raw = bytes.fromhex(msg_id)
            unit = self.store.look_message_by_offset(int.from_bytes(raw[4:12], "big"))
            if unit is not None and unit.is_inner_batch:
                rows = [r for r in message_rows(unit) if str(r.get("uniq_key") or "").upper() == wanted]
                if rows:
                    return rows
        return None

    def dlq(self, group: str, offset: int | None, max_msgs: int) -> dict[str, Any]:
        topic = DLQ_PREFIX + group
        queues = self.queues(topic)
        messages: list[dict[str, Any]] = []
        for q in queues:
            start = q["min_offset"] if offset is None else max(offset, q["min_offset"])
            messages.extend(self._read(topic, q["queue_id"], start, max_msgs - len(messages)))
            if len(messages) >= max_msgs:
                break
        return {"group": group, "topic": topic, "queues": queues, "messages": messages}

    def dlq_groups(self) -> list[dict[str, Any]]:
        out = []
        for topic in self.topic_names():
            if topic.startswith(DLQ_PREFIX):
                queues = self.queues(topic)
                out.append({"group": topic[len(DLQ_PREFIX):], "topic": topic,
                            "messages": sum(q["messages"] for q in queues)})
        return out


def with_members(doc: dict[str, Any], views: list[GroupView]) -> dict[str, Any]:
    """``doc`` plus the group's protocols, state and members from the gateways' views."""
    doc = dict(doc)
    doc["protocols"] = sorted({v.protocol for v in views})
    doc["state"] = ", ".join(f"{v.state} ({v.protocol})" for v in views) or "no members"
    doc["members"] = [{"protocol": v.protocol, "member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                       "assignment": [f"{t}-{q}" for t, q in m.assignment], "subscriptions": list(m.subscriptions),
                       "detail": m.detail} for v in views for m in v.members]
    doc["detail"] = "; ".join(v.detail for v in views if v.detail)
    doc["owners"] = {f"{t}-{q}": m.client_id for v in views for m in v.members for t, q in m.assignment}
    return doc
