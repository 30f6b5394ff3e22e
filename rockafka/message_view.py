"""Stored commitlog units as a person reads them, for the console and the JSON API.

A Kafka-produced unit holds one RecordBatch: it becomes one row per record with the record's
offset, timestamp, key, value and headers (``engine.record_batch`` decodes it, decompressing
when needed); a control batch (transaction marker) becomes no rows. A natively produced unit is
one row with RocketMQ's fields: tags, keys, user properties, delay level, reconsume count, born
and store times. Bodies, keys and header values are shown as UTF-8 text when they are, else as
base64, and cut at ``PREVIEW_BYTES`` (the full size is given).

Pure functions of the unit bytes; nothing here touches the store.
"""

from __future__ import annotations

import base64
from typing import Any

from engine import record_batch
from engine.batch_convert import HEADER_KEYS, HEADER_TAGS, HEADER_UNIQ_KEY, derive_uniq_key
from engine.message import MessageExt, decode_message

PREVIEW_BYTES = 4096
# RocketMQ system properties a person does not need to see in a property table
_HIDDEN = frozenset({"TAGS", "KEYS", "UNIQ_KEY", "WAIT", "MSG_REGION", "TRACE_ON", "CLUSTER", "INNER_NUM",
                     "INNER_BASE", "CONSUME_START_TIME"})


def text_view(raw: bytes | None, limit: int = PREVIEW_BYTES) -> dict[str, Any]:
    """``{"text": ..., "encoding": "utf-8"|"base64"|"null", "size": n, "truncated": bool}``."""
    if raw is None:
        return {"text": None, "encoding": "null", "size": 0, "truncated": False}
    raw = bytes(raw)
    cut = raw[:limit]
    try:
        text, encoding = cut.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        if exc.start >= len(cut) - 3 and len(raw) > limit:  # a character cut in two by the limit
            text, encoding = cut[:exc.start].decode("utf-8"), "utf-8"
        else:
            text, encoding = base64.b64encode(cut).decode(), "base64"
    return {"text": text, "encoding": encoding, "size": len(raw), "truncated": len(raw) > limit}


def _common(m: MessageExt) -> dict[str, Any]:
    return {"msg_id": m.msg_id, "topic": m.topic, "queue_id": m.queue_id, "commitlog_offset": m.commitlog_offset,
            "store_timestamp": m.store_timestamp, "born_host": f"{m.born_host[0]}:{m.born_host[1]}"}


def native_row(m: MessageExt) -> dict[str, Any]:
    props = dict(m.properties)
    row = _common(m)
    row.update(kind="native", offset=m.queue_offset, timestamp=m.born_timestamp, tags=m.tags, keys=m.keys,
               uniq_key=m.uniq_key, delay_level=int(props["DELAY"]) if props.get("DELAY", "").isdigit() else None,
               reconsume_times=m.reconsume_times, born_timestamp=m.born_timestamp,
               properties={k: v for k, v in sorted(props.items()) if k not in _HIDDEN},
               value=text_view(m.body), key=None, headers=[])
    row["body"] = row["value"]["text"]
    return row


def kafka_rows(m: MessageExt, first_offset: int = 0, key: bytes | None = None) -> list[dict[str, Any]]:
    """One row per record of the batch unit ``m`` at or after ``first_offset``; with ``key``,
    only records with that key."""
    header, records = record_batch.decode_batch(m.body)
    if header.is_control:
        return []
    rows = []
    for rec in records:
        offset = m.queue_offset + rec.offset_delta
        if offset < first_offset or (key is not None and rec.key != key):
            continue
        headers = [{"name": name, "value": text_view(value, 512)} for name, value in rec.headers]
        named = {h["name"]: h["value"]["text"] for h in headers}
        row = _common(m)
        row.update(kind="kafka", offset=offset, timestamp=rec.absolute_timestamp(header),
                   key=text_view(rec.key, 512), value=text_view(rec.value), headers=headers,
                   tags=named.get(HEADER_TAGS), keys=(named.get(HEADER_KEYS) or "").split(),
                   uniq_key=named.get(HEADER_UNIQ_KEY) or derive_uniq_key(m, rec.offset_delta),
                   delay_level=None, reconsume_times=0, born_timestamp=rec.absolute_timestamp(header),
                   properties={}, producer_id=header.producer_id, transactional=header.is_transactional)
        row["body"] = row["value"]["text"]
        rows.append(row)
    return rows


def unit_rows(unit: bytes, first_offset: int = 0, key: bytes | None = None) -> list[dict[str, Any]]:
    """Rows of one stored unit (see the module docstring)."""
    m = decode_message(unit)
    if m.is_inner_batch:
        return kafka_rows(m, first_offset, key)
    return [native_row(m)]


def message_rows(m: MessageExt) -> list[dict[str, Any]]:
    """Rows of an already decoded unit (a message looked up by id)."""
    return kafka_rows(m) if m.is_inner_batch else [native_row(m)]
