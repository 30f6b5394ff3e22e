"""TransactionProducer: half message, local transaction, then commit / rollback / unknown
(``TransactionMQProducer``), and answers to the broker's check-backs.

``send_message_in_transaction(msg, arg)``:
1. sends ``msg`` as a prepared message (sysflag TRANSACTION_PREPARED, properties TRAN_MSG=true
   and PGROUP=<group>); the broker keeps it in RMQ_SYS_TRANS_HALF_TOPIC, invisible to consumers;
2. runs ``listener.execute_local_transaction(msg, arg)`` (an exception counts as UNKNOW);
3. sends END_TRANSACTION (commitOrRollback 8 / 12 / 0) with the half message's queue offset
   (``tranStateTableOffset``) and commitlog offset (from the offset message id). Unlike the
   Java client, which sends it oneway, this waits for the broker's answer, so a committed
   message is in its topic when the call returns.

Check-back: at start the producer heartbeats to every broker serving TBW102 (as the Java
client does), so it is a check-back target before its first send. The broker sends CHECK_TRANSACTION_STATE (body = the message as stored, its real
topic restored) to one live connection of the producer group; ``listener.check_local_transaction``
runs on a worker thread (``check_thread_pool_size``) and its answer goes back as a oneway
END_TRANSACTION with ``fromTransactionCheck=true``, as the Java client does. UNKNOW leaves the
message to the next check; after the broker's ``transactionCheckMax`` checks it is rolled back.
"""

from __future__ import annotations

import asyncio
import enum
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from engine.message import (
    PROPERTY_PRODUCER_GROUP, PROPERTY_TRANSACTION_ID, PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand
from ..remoting.message_codec import (
    SYSFLAG_TRANSACTION_PREPARED, MessageDecodeError, MessageClientExt, decode_offset_msg_id, decode_unit,
)
from ..transport import Connection, ConnectionClosedError, RemotingTimeoutError
from .message import Message, MQBrokerError, MQClientError, SendResult, SendStatus
from .producer import Producer
from .runtime import CLIENT_PROCESSORS, ClientRuntime

log = structlog.get_logger("rockafka.client.transaction")



class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = 0x8
    ROLLBACK_MESSAGE = 0xC
    UNKNOW = 0x0


class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState: ...

    def check_local_transaction(self, msg: MessageClientExt) -> LocalTransactionState: ...


@dataclass
class TransactionSendResult(SendResult):
    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


class TransactionProducer(Producer):
    def __init__(self, group: str, namesrv_addr: str | list[str], listener: TransactionListener | None = None, *,
                 check_thread_pool_size: int = 1, **kwargs: Any):
        super().__init__(group, namesrv_addr, **kwargs)
        self.listener = listener
        self._check_pool = ThreadPoolExecutor(max_workers=max(1, check_thread_pool_size),
                                              thread_name_prefix=f"txn-check-{group}")

    def set_transaction_listener(self, listener: TransactionListener) -> None:
        self.listener = listener

    def start(self) -> "TransactionProducer":
        super().start()

        async def register() -> None:
            # as the Java producer does with its createTopicKey: learn the brokers serving TBW102
            # and heartbeat to them at once, so a producer that only answers check-backs (say,
            # restarted after a crash) is a check-back target before it sends anything
            try:
                await self.runtime.update_route("TBW102")
            except MQClientError as exc:
                log.warning("transaction_producer_route_failed", group=self.group, error=str(exc))
            await self.runtime.send_heartbeat_to_all()
        self.runtime.call(register(), timeout=self.send_msg_timeout / 1000 + 5)
        return self

    def shutdown(self) -> None:
        super().shutdown()
        self._check_pool.shutdown(wait=False)

    def _encode(self, msg: Any) -> tuple[str, dict[str, Any], bytes, str]:
        topic, fields, body, uniq = super()._encode(msg)
        if isinstance(msg, Message) and msg.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
            fields["f"] = int(fields["f"]) | SYSFLAG_TRANSACTION_PREPARED
        return topic, fields, body, uniq

    def send_message_in_transaction(self, msg: Message, arg: Any = None,
                                    timeout: int | None = None) -> TransactionSendResult:
        if self.listener is None:
            raise MQClientError("set a transaction listener before sending transactional messages")
        if msg.delay_level > 0:
            raise MQClientError("transactional messages cannot be delayed (delay level must be 0)")
        props = dict(msg.properties)
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        props[PROPERTY_PRODUCER_GROUP] = self.group
        half = Message(msg.topic, msg.body, tags=msg.tags, keys=msg.keys, properties=props, flag=msg.flag)
        sent = self.send(half, timeout=timeout)
        if sent.status != SendStatus.SEND_OK:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        else:
            half.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sent.msg_id
            if sent.transaction_id:
                half.properties[PROPERTY_TRANSACTION_ID] = sent.transaction_id
            try:
                state = self.listener.execute_local_transaction(half, arg)
                if not isinstance(state, LocalTransactionState):
                    state = LocalTransactionState.UNKNOW
            except Exception:
                log.exception("local_transaction_failed", group=self.group, msg_id=sent.msg_id)
                state = LocalTransactionState.UNKNOW
        try:
            self.runtime.call(self._end(sent, state), timeout=(timeout or self.send_msg_timeout) / 1000 + 5)
        except MQClientError as exc:
            # the broker's check-back resolves the transaction later
            log.warning("end_transaction_failed", group=self.group, msg_id=sent.msg_id, state=state.name, error=str(exc))
        return TransactionSendResult(sent.status, sent.msg_id, sent.offset_msg_id, sent.message_queue, sent.queue_offset,
                                     sent.region_id, sent.transaction_id or sent.msg_id, state)

    def send_half(self, msg: Message, timeout: int | None = None) -> SendResult:
        """Send ``msg`` as a half message and return without ending it: for a two-phase commit
        driven from outside (a job that commits or rolls back many half messages at once, later,
        possibly from another process of the same producer group, with ``end_transaction``)."""
        if msg.delay_level > 0 or msg.deliver_time_ms > 0:
            raise MQClientError("transactional messages cannot be delayed (no delay level or delivery time)")
        props = dict(msg.properties)
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        props[PROPERTY_PRODUCER_GROUP] = self.group
        return self.send(Message(msg.topic, msg.body, tags=msg.tags, keys=msg.keys, properties=props, flag=msg.flag),
                         timeout=timeout)

    def end_transaction(self, sent: SendResult, commit: bool, timeout: int | None = None) -> None:
        """Commit (or roll back) a half message ``send_half`` returned; waits for the broker."""
        state = LocalTransactionState.COMMIT_MESSAGE if commit else LocalTransactionState.ROLLBACK_MESSAGE
        self.runtime.call(self._end(sent, state), timeout=(timeout or self.send_msg_timeout) / 1000 + 5)

    async def _end(self, sent: SendResult, state: LocalTransactionState) -> None:
        addr = self.runtime.master_addr(sent.message_queue.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{sent.message_queue.broker_name}] not exist")
        try:
            _ip, _port, commit_log_offset = decode_offset_msg_id(sent.offset_msg_id)
        except MessageDecodeError as exc:
            raise MQClientError(f"cannot end the transaction: {exc}") from None
        fields = {"producerGroup": self.group, "tranStateTableOffset": sent.queue_offset,
                  "commitLogOffset": commit_log_offset, "commitOrRollback": state.value, "fromTransactionCheck": False,
                  "msgId": sent.msg_id, "transactionId": sent.transaction_id or sent.msg_id}
        try:
            resp = await self.runtime.invoke(addr, self.runtime.request(RC.END_TRANSACTION, fields))
        except (ConnectionClosedError, RemotingTimeoutError, OSError) as exc:
            raise MQClientError(f"END_TRANSACTION to {addr} failed: {exc}") from None
        if resp.code != R.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)

    def _check(self, msg: MessageClientExt) -> LocalTransactionState:
        listener = self.listener
        if listener is None:
            return LocalTransactionState.UNKNOW
        try:
            state = listener.check_local_transaction(msg)
            return state if isinstance(state, LocalTransactionState) else LocalTransactionState.UNKNOW
        except Exception:
            log.exception("check_local_transaction_failed", group=self.group, msg_id=msg.msg_id)
            return LocalTransactionState.UNKNOW


@CLIENT_PROCESSORS.register(RC.CHECK_TRANSACTION_STATE, suspends=True)
async def _check_transaction_state(rt: ClientRuntime, conn: Connection, cmd: RemotingCommand) -> None:
    try:
        msg = decode_unit(bytes(cmd.body))
    except (MessageDecodeError, ValueError) as exc:
        log.warning("check_transaction_bad_body", error=str(exc))
        return None
    group = msg.properties.get(PROPERTY_PRODUCER_GROUP, "")
    producer = rt.producers.get(group)
    if not isinstance(producer, TransactionProducer):
        log.warning("check_transaction_no_producer", group=group)
        return None
    transaction_id = cmd.get_str("transactionId") or msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if transaction_id:
        msg.properties.setdefault(PROPERTY_TRANSACTION_ID, transaction_id)
    state = await asyncio.get_running_loop().run_in_executor(producer._check_pool, producer._check, msg)
    fields = {"producerGroup": group, "tranStateTableOffset": cmd.get_int("tranStateTableOffset"),
              "commitLogOffset": cmd.get_int("commitLogOffset"), "commitOrRollback": state.value,
              "fromTransactionCheck": True, "msgId": msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id,
              "transactionId": transaction_id}
    try:
        conn.send(RemotingCommand.request(RC.END_TRANSACTION, fields, oneway=True,
                                          serialize_type=rt.serialize_type))
    except ConnectionClosedError:
        log.info("check_transaction_answer_lost", group=group)
    return None
