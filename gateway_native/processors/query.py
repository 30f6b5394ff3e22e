"""QUERY_MESSAGE (12) by key and VIEW_MESSAGE_BY_ID (33) by commitlog offset.

QUERY_MESSAGE answers the stored units of ``topic#key`` (KEYS and UNIQ_KEY are indexed) within
[beginTimestamp, endTimestamp], newest first, at most maxNum; QUERY_NOT_FOUND when none.
On a tiered topic the remote tier is searched too (``broker/tiered.py``: its segments' keys
objects), for what the disk no longer holds. VIEW_MESSAGE_BY_ID takes the commitlog offset the client decoded from an offset message id and
answers that one unit, once the caller may READ the topic that unit is in (the request names
no topic a check could trust; NO_PERMISSION otherwise); a Kafka batch unit is answered as its first record. Kafka batch units
found by key are expanded and only the records carrying the key are answered.
"""

from __future__ import annotations

from typing import Any

import struct

from broker import tiered
from engine.message import INNER_BATCH_FLAG, encode_message

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand
from ..remoting.message_codec import decode_unit
from ..security import processor_check
from ..transport import Connection
from . import BROKER_PROCESSORS

_SYSFLAG = struct.Struct(">i")
_PHY, _PHY_POS = struct.Struct(">q"), 28   # PHYSICALOFFSET: the same unit read locally and remotely


@BROKER_PROCESSORS.register(RC.QUERY_MESSAGE)
async def query_message(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    topic, key = cmd.require_str("topic"), cmd.require_str("key")
    max_num = max(1, min(cmd.get_int("maxNum", 32) or 32, 64 * 1024))
    begin = cmd.get_int("beginTimestamp", 0) or 0
    end = cmd.get_int("endTimestamp") or (1 << 62)
    result = await broker.run_blocking(broker.store.query_message, topic, key, max_num, begin, end)
    found = [bytes(u) for u in (result.messages or [])]
    if tiered.tier_of(broker.store) is not None and len(found) < max_num:   # beyond the disk
        try:
            seen = {_PHY.unpack_from(u, _PHY_POS)[0] for u in found}
            found += [u for u in await tiered.query_by_key(broker.store, topic, key, max_num - len(found), begin, end)
                      if _PHY.unpack_from(u, _PHY_POS)[0] not in seen]
        except tiered.RemoteReadError as exc:
            if not found:
                return cmd.response(R.SYSTEM_ERROR, str(exc))
    units = _expand_matching(found, key)[:max_num]
    if not units:
        return cmd.response(R.QUERY_NOT_FOUND, "can not find message, maybe time range not correct")
    fields = {"indexLastUpdateTimestamp": getattr(result, "index_last_update_timestamp", 0),
              "indexLastUpdatePhyoffset": getattr(result, "index_last_update_phyoffset", 0)}
    return cmd.response(R.SUCCESS, None, fields, b"".join(units))


@BROKER_PROCESSORS.register(RC.VIEW_MESSAGE_BY_ID)
async def view_message_by_id(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    offset = cmd.require_int("offset")
    msg = await broker.run_blocking(broker.store.look_message_by_offset, offset)
    if msg is None:
        return cmd.response(R.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
    refusal = processor_check(broker, conn, cmd, msg.topic)  # READ on the message's own topic
    if refusal is not None:
        return cmd.response(R.NO_PERMISSION, refusal)
    raw = getattr(msg, "raw", None)
    if raw is None:
        from engine.message import Message

        # re-encode the decoded unit; ids, offsets and timestamps are kept
        m = Message(topic=msg.topic, body=msg.body, properties=dict(msg.properties), queue_id=msg.queue_id,
                    flag=msg.flag, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                    store_host=msg.store_host, reconsume_times=msg.reconsume_times,
                    prepared_transaction_offset=msg.prepared_transaction_offset)
        raw = encode_message(m, queue_offset=msg.queue_offset, physical_offset=msg.commitlog_offset,
                             store_timestamp=msg.store_timestamp, store_host=msg.store_host)
    raw = bytes(raw)
    if msg.sys_flag & INNER_BATCH_FLAG:
        from engine.batch_convert import expand_batch_unit

        records = expand_batch_unit(raw)
        if not records:
            return cmd.response(R.SYSTEM_ERROR, f"the unit at offset {offset} holds no records")
        raw = records[0]
    return cmd.response(R.SUCCESS, body=raw)


def _expand_matching(units: list[bytes], key: str) -> list[bytes]:
    """Kafka batch units become the records among them that carry ``key`` (KEYS or UNIQ_KEY)."""
    out: list[bytes] = []
    for unit in units:
        if not _SYSFLAG.unpack_from(unit, 36)[0] & INNER_BATCH_FLAG:
            out.append(unit)
            continue
        from engine.batch_convert import expand_batch_unit

        for rec in expand_batch_unit(unit):
            props = decode_unit(rec, decompress=False).properties
            if key in (props.get("KEYS") or "").split(" ") or props.get("UNIQ_KEY") == key:
                out.append(rec)
    return out
