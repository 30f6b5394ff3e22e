"""GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29),
GET_EARLIEST_MSG_STORETIME (32): a queue's logical offset bounds and time lookups.

Answers come from the store: max = the next offset to be written, min = the first still
readable, search = the first offset stored at or after the timestamp (max when none); on a
tiered topic min and search include the remote tier (``broker/tiered.py``).
"""

from __future__ import annotations

from typing import Any

from broker import tiered

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand
from ..transport import Connection
from . import BROKER_PROCESSORS

reg = BROKER_PROCESSORS.register


@reg(RC.GET_MAX_OFFSET)
async def get_max_offset(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    off = broker.store.get_max_offset_in_queue(cmd.require_str("topic"), cmd.require_int("queueId"))
    return cmd.response(R.SUCCESS, None, {"offset": off})


@reg(RC.GET_MIN_OFFSET)
async def get_min_offset(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    off = tiered.log_start_offset(broker.store, cmd.require_str("topic"), cmd.require_int("queueId"))
    return cmd.response(R.SUCCESS, None, {"offset": off})


@reg(RC.SEARCH_OFFSET_BY_TIMESTAMP)
async def search_offset(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        off = await tiered.offset_by_time(broker.store, cmd.require_str("topic"), cmd.require_int("queueId"),
                                          cmd.require_int("timestamp"))
    except tiered.RemoteReadError as exc:
        return cmd.response(R.SYSTEM_ERROR, str(exc))
    return cmd.response(R.SUCCESS, None, {"offset": off})


@reg(RC.GET_EARLIEST_MSG_STORETIME)
async def earliest_time(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    ts = broker.store.get_earliest_message_time(cmd.require_str("topic"), cmd.require_int("queueId"))
    return cmd.response(R.SUCCESS, None, {"timestamp": ts})
