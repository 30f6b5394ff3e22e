"""The MessagingService servicer: one method per RPC (behaviour table in
docs/design/grpc-proxy.md). Each method validates its request, calls the engine through the
gateway (``server.GrpcGateway``) and answers with the rpc's Status."""

from __future__ import annotations

import asyncio
import base64
import binascii
import random
import time
from typing import Any

import grpc
import structlog

from broker.put_path import PutStatus
from broker import trace
from engine.expression_filter import ExpressionFilter
from engine.pop import AckStatus, PopError
from engine.sql92 import Sql92Error
from engine.timer_message import TimerMessageError
from engine.topic_config import PERM_READ, PERM_WRITE, topic_name_error
from engine.transaction import TransactionError

from .convert import ConvertError, duration_ms, from_v2, to_v2
from .proto import definition_pb2 as pb
from .proto import service_pb2 as sv
from .proto import service_pb2_grpc
from .security import Refused
from .constants import CUSTOMIZED_BACKOFF_S, DEFAULT_INVISIBLE_MS, LONG_POLLING_MS, TXN_GROUP_PREFIX, queue_for_group

log = structlog.get_logger("rockafka.grpc.service")

C = pb.Code
# the put path's neutral statuses as gRPC codes (the one table; anything else: INTERNAL_SERVER_ERROR)
_PUT_CODES = {
    PutStatus.OK: (C.OK, "OK"),
    PutStatus.FLUSH_DISK_TIMEOUT: (C.MASTER_PERSISTENCE_TIMEOUT, "flush disk timed out"),
    PutStatus.FLUSH_SLAVE_TIMEOUT: (C.SLAVE_PERSISTENCE_TIMEOUT, "flush to the slave timed out"),
    PutStatus.SLAVE_NOT_AVAILABLE: (C.HA_NOT_AVAILABLE, "no slave available"),
    PutStatus.SERVICE_NOT_AVAILABLE: (C.INTERNAL_SERVER_ERROR, "service not available; the store may be shutting down or out of disk"),
    PutStatus.DISK_FULL: (C.INTERNAL_SERVER_ERROR, "service not available; the store may be shutting down or out of disk"),
    PutStatus.MESSAGE_ILLEGAL: (C.BAD_REQUEST, "the message is illegal"),
    PutStatus.PROPERTIES_SIZE_EXCEEDED: (C.MESSAGE_PROPERTIES_TOO_LARGE, "the message properties are too long"),
    PutStatus.OS_PAGE_CACHE_BUSY: (C.TOO_MANY_REQUESTS, "broker busy, try later"),
    PutStatus.SEND_QUEUE_BUSY: (C.TOO_MANY_REQUESTS, "broker busy, try later"),
}
_ALL_TYPES = [pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION]
_TYPE_NAMES = {"NORMAL": pb.MessageType.NORMAL, "FIFO": pb.MessageType.FIFO, "DELAY": pb.MessageType.DELAY,
               "TRANSACTION": pb.MessageType.TRANSACTION}


def status(code: int, message: str = "") -> pb.Status:
    return pb.Status(code=code, message=message or pb.Code.Name(code))


def ok() -> pb.Status:
    return status(C.OK, "OK")


def _permission(perm: int) -> int:
    r, w = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    return pb.Permission.READ_WRITE if r and w else pb.Permission.READ if r else pb.Permission.WRITE if w else pb.Permission.NONE


# Names longer than this are refused where a request is decoded (RocketMQ's own are at most 127
# characters for a topic and 255 for a group; retry topics add a prefix, Kafka topics may have
# 249): nothing behind the gateway meets a name its fixed-width encodings cannot hold.
NAME_MAX_LENGTH = 1024


class Undecodable:
    """A request whose bytes protobuf cannot parse (``lenient``): answered BAD_REQUEST by the
    method like any other bad request, instead of grpcio logging the parse error as a crash."""

    __slots__ = ("error",)

    def __init__(self, error: str):
        self.error = error


def lenient(deserializer: Any) -> Any:
    """A request deserializer that hands an unparsable request to the method as ``Undecodable``."""
    from google.protobuf.message import DecodeError

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except (DecodeError, ValueError, UnicodeDecodeError) as exc:
            return Undecodable(str(exc))
    return deserialize


def _name_problem(request: Any) -> pb.Status | None:
    """ILLEGAL_TOPIC / ILLEGAL_CONSUMER_GROUP for an over-long topic or group name anywhere a
    request names one (top level, its message queue, or its messages)."""
    def long(res: Any) -> bool:
        return len(res.name) > NAME_MAX_LENGTH
    for field, code, what in (("topic", C.ILLEGAL_TOPIC, "topic"), ("group", C.ILLEGAL_CONSUMER_GROUP, "consumer group")):
        try:
            has = request.HasField(field)
        except ValueError:
            continue
        if has and long(getattr(request, field)):
            return status(code, f"the {what} name is longer than {NAME_MAX_LENGTH} characters")
    try:
        if request.HasField("message_queue") and long(request.message_queue.topic):
            return status(C.ILLEGAL_TOPIC, f"the topic name is longer than {NAME_MAX_LENGTH} characters")
    except ValueError:
        pass
    for m in getattr(request, "messages", ()) or ():
        if long(m.topic):
            return status(C.ILLEGAL_TOPIC, f"the topic name is longer than {NAME_MAX_LENGTH} characters")
    return None


class MessagingService(service_pb2_grpc.MessagingServiceServicer):
    def __init__(self, gw: Any):  # the server.GrpcGateway that serves this service
        self.gw = gw
        self._rr = random.randrange(1 << 16)

    async def _refused(self, context: Any, request: Any) -> pb.Status | None:
        """The gate (``security.GrpcGate``): None when the call may go on, else its Status
        (UNAUTHORIZED / FORBIDDEN with the reason)."""
        if isinstance(request, Undecodable):
            return status(C.BAD_REQUEST, f"the request cannot be parsed: {request.error}")
        problem = _name_problem(request)
        if problem is not None:
            return problem
        try:
            await self.gw.gate.check(context, request, self.gw.client_host(context))
        except Refused as exc:
            return status(exc.code, str(exc))
        return None

    # ------------------------------------------------------------------ routing
    def _endpoints(self, requested: pb.Endpoints | None) -> pb.Endpoints:
        if requested is not None and len(requested.addresses):
            return requested  # the address the client reached us at (as the proxy answers)
        return pb.Endpoints(scheme=pb.AddressScheme.IPv4,
                            addresses=[pb.Address(host=self.gw.advertised_ip, port=self.gw.port)])

    def _queues(self, topic: str, tc: Any, endpoints: pb.Endpoints, readable_only: bool = False) -> list[pb.MessageQueue]:
        broker = pb.Broker(name=self.gw.broker_name, id=0, endpoints=endpoints)
        mtype = str((tc.attributes or {}).get("message.type", "")).upper()
        accept = [_TYPE_NAMES[mtype]] if mtype in _TYPE_NAMES else list(_ALL_TYPES)
        out = []
        for q in range(max(tc.read_queue_nums, tc.write_queue_nums)):
            perm = tc.perm
            if q >= tc.read_queue_nums:
                perm &= ~PERM_READ
            if q >= tc.write_queue_nums:
                perm &= ~PERM_WRITE
            if readable_only and not perm & PERM_READ:
                continue
            out.append(pb.MessageQueue(topic=pb.Resource(name=topic), id=q, permission=_permission(perm), broker=broker,
                                       accept_message_types=accept))
        return out

    async def QueryRoute(self, request: sv.QueryRouteRequest, context: Any) -> sv.QueryRouteResponse:
        if (refused := await self._refused(context, request)) is not None:
            return sv.QueryRouteResponse(status=refused)
        self.gw.session(context)
        topic = request.topic.name
        if (why := topic_name_error(topic)) is not None:
            return sv.QueryRouteResponse(status=status(C.ILLEGAL_TOPIC, why))
        tc = await self.gw.topic_for_send(topic)
        if tc is None:
            return sv.QueryRouteResponse(status=status(C.TOPIC_NOT_FOUND, f"topic {topic} not found"))
        return sv.QueryRouteResponse(status=ok(), message_queues=self._queues(topic, tc, self._endpoints(request.endpoints)))

    async def QueryAssignment(self, request: sv.QueryAssignmentRequest, context: Any) -> sv.QueryAssignmentResponse:
        if (refused := await self._refused(context, request)) is not None:
            return sv.QueryAssignmentResponse(status=refused)
        self.gw.session(context)
        topic = request.topic.name
        tc = self.gw.topic_config(topic)
        if tc is None:
            return sv.QueryAssignmentResponse(status=status(C.TOPIC_NOT_FOUND, f"topic {topic} not found"))
        # POP needs no exclusive assignment: every consumer is given every readable queue
        queues = self._queues(topic, tc, self._endpoints(request.endpoints), readable_only=True)
        return sv.QueryAssignmentResponse(status=ok(), assignments=[pb.Assignment(message_queue=q) for q in queues])

    # ------------------------------------------------------------------ clients
    async def Heartbeat(self, request: sv.HeartbeatRequest, context: Any) -> sv.HeartbeatResponse:
        if (refused := await self._refused(context, request)) is not None:
            return sv.HeartbeatResponse(status=refused)
        s = self.gw.session(context)
        if request.HasField("group") and request.group.name:
            s.group = request.group.name
        if request.client_type:
            s.client_type = request.client_type
        return sv.HeartbeatResponse(status=ok())

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        if (refused := await self._refused(context, request)) is not None:
            return sv.NotifyClientTerminationResponse(status=refused)
        s = self.gw.session(context)
        self.gw.drop_session(s.client_id, "terminated")
        return sv.NotifyClientTerminationResponse(status=ok())

    def _server_settings(self, s: Any, settings: pb.Settings) -> pb.Settings:
        out = pb.Settings()
        out.CopyFrom(settings)
        max_body = int(self.gw.config.store.max_message_size)
        if settings.client_type == pb.ClientType.PRODUCER or settings.HasField("publishing"):
            out.backoff_policy.CopyFrom(pb.RetryPolicy(max_attempts=3, exponential_backoff=pb.ExponentialBackoff(
                initial=_dur(10), max=_dur(1000), multiplier=2.0)))
            out.publishing.max_body_size = max_body
            out.publishing.validate_message_type = False
        elif settings.HasField("subscription"):
            group = settings.subscription.group.name
            cfg = self.gw.store.subscription_groups.find_or_create(group) if group else None
            retry_max = cfg.retry_max_times if cfg is not None else 16
            out.backoff_policy.CopyFrom(pb.RetryPolicy(max_attempts=retry_max + 1, customized_backoff=pb.CustomizedBackoff(
                next=[_dur(sec * 1000) for sec in CUSTOMIZED_BACKOFF_S])))
            out.subscription.fifo = bool(cfg is not None and cfg.consume_message_orderly)
            out.subscription.long_polling_timeout.CopyFrom(_dur(LONG_POLLING_MS))
            if not settings.subscription.HasField("receive_batch_size"):
                out.subscription.receive_batch_size = 32
        return out

    async def Telemetry(self, request_iterator: Any, context: Any) -> None:
        gate = self.gw.gate
        try:  # the stream's metadata is checked once, when it opens
            principal = await gate.authenticate(context)
        except Refused as exc:
            await context.write(sv.TelemetryCommand(status=status(exc.code, str(exc))))
            return
        host = self.gw.client_host(context)
        s = self.gw.session(context)
        outbox: asyncio.Queue = asyncio.Queue()
        s.outbox = outbox
        done = object()

        async def read() -> None:
            try:
                async for cmd in request_iterator:
                    if isinstance(cmd, Undecodable):
                        outbox.put_nowait(sv.TelemetryCommand(status=status(
                            C.BAD_REQUEST, f"the telemetry command cannot be parsed: {cmd.error}")))
                        continue
                    which = cmd.WhichOneof("command")
                    if which == "settings":
                        try:  # what the settings announce: publishing topics, a group and its topics
                            gate.authorize(principal, cmd, host)
                        except Refused as exc:
                            outbox.put_nowait(sv.TelemetryCommand(status=status(exc.code, str(exc))))
                            continue
                        st = cmd.settings
                        s.settings = st
                        s.client_type = st.client_type or s.client_type
                        if st.HasField("publishing"):
                            s.topics = {t.name for t in st.publishing.topics}
                        if st.HasField("subscription"):
                            s.group = st.subscription.group.name or s.group
                            s.topics = {e.topic.name for e in st.subscription.subscriptions}
                        outbox.put_nowait(sv.TelemetryCommand(status=ok(), settings=self._server_settings(s, st)))
                    elif which in ("thread_stack_trace", "verify_message_result"):
                        log.info("grpc_telemetry_result", client_id=s.client_id, kind=which)
                    elif which is not None:
                        outbox.put_nowait(sv.TelemetryCommand(status=status(C.BAD_REQUEST, f"unexpected command {which}")))
            except (asyncio.CancelledError, grpc.aio.AioRpcError):
                pass
            finally:
                outbox.put_nowait(done)

        reader = asyncio.ensure_future(read())
        try:
            while True:
                item = await outbox.get()
                if item is done:
                    break
                await context.write(item)
        finally:
            reader.cancel()
            if s.outbox is outbox:
                s.outbox = None

    # ------------------------------------------------------------------ producing
    async def SendMessage(self, request: sv.SendMessageRequest, context: Any) -> sv.SendMessageResponse:
        if (refused := await self._refused(context, request)) is not None:
            return sv.SendMessageResponse(status=refused)
        s = self.gw.session(context)
        if not request.messages:
            return sv.SendMessageResponse(status=status(C.BAD_REQUEST, "no messages to send"))
        topic = request.messages[0].topic.name
        if any(m.topic.name != topic for m in request.messages):
            return sv.SendMessageResponse(status=status(C.BAD_REQUEST, "every message of a batch must have the same topic"))
        tc = await self.gw.topic_for_send(topic)
        if tc is None:
            return sv.SendMessageResponse(status=status(C.TOPIC_NOT_FOUND, f"topic {topic} not found"))
        if not tc.perm & PERM_WRITE or tc.write_queue_nums <= 0:
            return sv.SendMessageResponse(status=status(C.FORBIDDEN, f"topic {topic} is not writable"))
        peer = self.gw.client_addr(context)
        entries = []
        traced: list[int] | None = [] if trace.enabled(self.gw.config) else None  # brokerTraceEnable
        started = time.monotonic()
        for m in request.messages:
            entries.append(await self._send_one(s, m, tc, peer, traced))
        if traced:
            trace.writer_for(self.gw.store).pub_stored(traced, s.client_id, peer, int((time.monotonic() - started) * 1000))
        codes = {e.status.code for e in entries}
        overall = entries[0].status if len(codes) == 1 else status(C.MULTIPLE_RESULTS, "results differ per message")
        return sv.SendMessageResponse(status=overall, entries=entries)

    async def _send_one(self, s: Any, m: pb.Message, tc: Any, peer: str,
                        traced: list[int] | None = None) -> sv.SendResultEntry:
        gw = self.gw
        try:
            out = from_v2(m, int(gw.config.store.max_message_size))
        except ConvertError as exc:
            return sv.SendResultEntry(status=status(exc.code, str(exc)))
        n = tc.write_queue_nums
        if out.message_group:
            queue_id = queue_for_group(out.message_group, n)
        else:
            self._rr += 1
            queue_id = self._rr % n
        msg = gw.store_message(out, queue_id, peer)
        txn_id = ""
        if out.message_type == pb.MessageType.TRANSACTION:
            msg.properties["PGROUP"] = TXN_GROUP_PREFIX + out.topic
            s.topics.add(out.topic)
            put, result = await gw.writes.put(gw.transactions.prepare, msg)
            if put is not PutStatus.SEND_QUEUE_BUSY and result.stored:
                txn_id = gw.transaction_id(result.commitlog_offset, result.queue_offset)
        else:
            put, result = await gw.writes.put(gw.store.put_message, msg)
        code, text = _PUT_CODES.get(put, (C.INTERNAL_SERVER_ERROR, put.value))
        if put is PutStatus.SEND_QUEUE_BUSY:  # RocketMQ's fast failure: the client backs off
            return sv.SendResultEntry(status=status(code, str(result)))
        if not result.stored:
            return sv.SendResultEntry(status=status(code, result.error or text))
        if traced is not None:
            traced.append(result.commitlog_offset)
        recall = ""
        deliver = msg.properties.get("TIMER_DELIVER_MS") if msg.properties else None
        if deliver and out.message_type == pb.MessageType.DELAY:
            recall = encode_recall_handle(out.topic, gw.broker_name, int(deliver), out.message_id)
        return sv.SendResultEntry(status=status(code, text), message_id=out.message_id, transaction_id=txn_id,
                                  offset=max(result.queue_offset, 0), recall_handle=recall)

    async def EndTransaction(self, request: sv.EndTransactionRequest, context: Any) -> sv.EndTransactionResponse:
        if (refused := await self._refused(context, request)) is not None:
            return sv.EndTransactionResponse(status=refused)
        self.gw.session(context)
        try:
            commitlog_offset, queue_offset = self.gw.parse_transaction_id(request.transaction_id)
        except ValueError:
            return sv.EndTransactionResponse(status=status(C.INVALID_TRANSACTION_ID,
                                                           f"transaction id {request.transaction_id!r} is not one this proxy issued"))
        res = request.resolution
        if res not in (pb.TransactionResolution.COMMIT, pb.TransactionResolution.ROLLBACK):
            return sv.EndTransactionResponse(status=status(C.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK"))
        try:
            result = await self.gw.blocking(self.gw.transactions.end, commitlog_offset, queue_offset,
                                            TXN_GROUP_PREFIX + request.topic.name, res == pb.TransactionResolution.COMMIT)
        except TransactionError as exc:
            return sv.EndTransactionResponse(status=status(C.INVALID_TRANSACTION_ID, str(exc)))
        if result.put is not None and not result.put.stored:
            return sv.EndTransactionResponse(status=status(C.INTERNAL_SERVER_ERROR, result.put.error or result.put.status.name))
        log.info("grpc_transaction_ended", topic=request.topic.name, commit=res == pb.TransactionResolution.COMMIT,
                 source=pb.TransactionSource.Name(request.source), message_id=request.message_id)
        return sv.EndTransactionResponse(status=ok())

    async def RecallMessage(self, request: Any, context: Any) -> Any:
        """Cancel a delay message before its delivery time with the handle its send returned."""
        if (refused := await self._refused(context, request)) is not None:
            return sv.RecallMessageResponse(status=refused)
        self.gw.session(context)
        topic = request.topic.name
        if not self.gw.config.extra_bool("recall_message_enable", True):
            return sv.RecallMessageResponse(status=status(C.FORBIDDEN, "recall failed, operation is forbidden "
                                                                       "(recallMessageEnable=false)"))
        try:
            h_topic, _broker, deliver_ms, message_id = decode_recall_handle(request.recall_handle)
        except ValueError as exc:
            return sv.RecallMessageResponse(status=status(C.BAD_REQUEST, str(exc)))
        if h_topic != topic:
            return sv.RecallMessageResponse(status=status(C.BAD_REQUEST,
                                                          f"the recall handle is for topic {h_topic}, not {topic}"))
        try:
            await self.gw.blocking(self.gw.store.timer.recall, topic, message_id, deliver_ms)
        except TimerMessageError as exc:
            return sv.RecallMessageResponse(status=status(C.ILLEGAL_MESSAGE_ID, str(exc)), message_id=message_id)
        log.info("grpc_message_recalled", topic=topic, message_id=message_id, deliver_ms=deliver_ms)
        return sv.RecallMessageResponse(status=ok(), message_id=message_id)

    # ------------------------------------------------------------------ consuming
    def _filter(self, expr: pb.FilterExpression) -> ExpressionFilter:
        kind = "SQL92" if expr.type == pb.FilterType.SQL else "TAG"
        return ExpressionFilter(kind, expr.expression or "*")

    async def ReceiveMessage(self, request: sv.ReceiveMessageRequest, context: Any) -> Any:
        async for response in self._receive(request, context):
            yield response
        # the proxy ends every receive stream with the time it finished (clients measure latency with it)
        yield sv.ReceiveMessageResponse(delivery_timestamp=_now_timestamp())

    async def _receive(self, request: sv.ReceiveMessageRequest, context: Any) -> Any:
        gw = self.gw
        if (refused := await self._refused(context, request)) is not None:
            yield sv.ReceiveMessageResponse(status=refused)
            return
        s = gw.session(context)
        group = request.group.name
        topic = request.message_queue.topic.name
        if not group:
            yield sv.ReceiveMessageResponse(status=status(C.ILLEGAL_CONSUMER_GROUP, "the consumer group is blank"))
            return
        tc = gw.topic_config(topic)
        if tc is None:
            yield sv.ReceiveMessageResponse(status=status(C.TOPIC_NOT_FOUND, f"topic {topic} not found"))
            return
        try:
            flt = self._filter(request.filter_expression)
        except (Sql92Error, ValueError) as exc:
            yield sv.ReceiveMessageResponse(status=status(C.ILLEGAL_FILTER_EXPRESSION, str(exc)))
            return
        auto_renew = request.auto_renew and not request.HasField("invisible_duration")
        if request.HasField("invisible_duration"):
            invisible = duration_ms(request.invisible_duration)
        else:
            invisible = gw.renewer.invisible_ms if auto_renew else DEFAULT_INVISIBLE_MS
        if not 0 < invisible <= 12 * 3600 * 1000:
            yield sv.ReceiveMessageResponse(status=status(C.ILLEGAL_INVISIBLE_TIME,
                                                          f"invisible duration {invisible} ms is outside 1 ms..12 h"))
            return
        poll_ms = duration_ms(request.long_polling_timeout) if request.HasField("long_polling_timeout") else LONG_POLLING_MS
        poll_ms = max(0, min(poll_ms, 60_000))
        remaining = context.time_remaining()
        if remaining is not None:  # answer before the client's deadline
            poll_ms = max(0, min(poll_ms, int(remaining * 1000) - 1000))
        batch = max(1, min(request.batch_size or 32, 1024))
        cfg = gw.store.subscription_groups.find_or_create(group)
        orderly = bool(cfg is not None and cfg.consume_message_orderly)
        s.group = group
        wake_topics = [topic, f"%RETRY%{group}_{topic}"]
        deadline = time.monotonic() + poll_ms / 1000
        ev = gw.waiter(wake_topics)
        try:
            while True:
                ev.clear()
                try:
                    result = await gw.blocking(gw.pop.pop, group, topic, None, batch, invisible, message_filter=flt,
                                               orderly=orderly)
                except PopError as exc:
                    yield sv.ReceiveMessageResponse(status=status(C.INTERNAL_SERVER_ERROR, str(exc)))
                    return
                if result.found:
                    break
                left = deadline - time.monotonic()
                if left <= 0 or context.done():
                    yield sv.ReceiveMessageResponse(status=status(C.MESSAGE_NOT_FOUND, "no new message"))
                    return
                # woken by an arrival on the topic or its retry topic, or an orderly unlock
                await ev.wait(min(left, 1.0))
        finally:
            gw.drop_waiter(wake_topics, ev)
        if auto_renew:  # a PushConsumer: keep the messages hidden while its listener works
            now_ms = int(time.time() * 1000)
            for m in result.messages:
                gw.renewer.add(s.client_id, group, topic, m.handle, now_ms)
        if result.messages and trace.enabled(gw.config):  # brokerTraceEnable: SubBefore records
            now_ms = int(time.time() * 1000)
            trace.writer_for(gw.store).records(
                [trace.sub_before_record(m.message, group, trace.request_id(m.handle), now_ms) for m in result.messages],
                gw.client_addr(context))
        yield sv.ReceiveMessageResponse(status=ok())
        for m in result.messages:
            yield sv.ReceiveMessageResponse(message=to_v2(m.message, m.topic, m.handle, m.delivery_attempt,
                                                          request.message_queue.topic.resource_namespace))

    async def AckMessage(self, request: sv.AckMessageRequest, context: Any) -> sv.AckMessageResponse:
        if (refused := await self._refused(context, request)) is not None:
            return sv.AckMessageResponse(status=refused)
        gw = self.gw
        s = gw.session(context)
        group, topic = request.group.name, request.topic.name
        entries = []
        traced: list[str] | None = [] if trace.enabled(gw.config) else None  # brokerTraceEnable: SubAfter
        for e in request.entries:
            handle = await gw.renewer.current(s.client_id, group, topic, e.receipt_handle)
            st = await gw.blocking(gw.pop.ack, group, topic, handle)
            if st is AckStatus.OK:
                code = ok()
                if traced is not None:
                    traced.append(trace.sub_after_for_ack(e.message_id, handle, group))
            else:
                code = status(C.INVALID_RECEIPT_HANDLE, "the receipt handle is expired or unknown; the message "
                                                        "was acknowledged already or will be redelivered")
            entries.append(sv.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=code))
        if traced:
            trace.writer_for(gw.store).records(traced, gw.client_addr(context))
        codes = {e.status.code for e in entries}
        overall = entries[0].status if len(codes) == 1 else status(C.MULTIPLE_RESULTS, "results differ per entry")
        if not entries:
            overall = status(C.BAD_REQUEST, "no entries to acknowledge")
        return sv.AckMessageResponse(status=overall, entries=entries)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        if (refused := await self._refused(context, request)) is not None:
            return sv.ChangeInvisibleDurationResponse(status=refused)
        gw = self.gw
        s = gw.session(context)
        invisible = duration_ms(request.invisible_duration)
        current = await gw.renewer.current(s.client_id, request.group.name, request.topic.name, request.receipt_handle)
        try:
            handle = await gw.blocking(gw.pop.change_invisible, request.group.name, request.topic.name,
                                       current, invisible)
        except PopError as exc:
            code = C.ILLEGAL_INVISIBLE_TIME if exc.code == "ILLEGAL_INVISIBLE_TIME" else C.INVALID_RECEIPT_HANDLE
            return sv.ChangeInvisibleDurationResponse(status=status(code, str(exc)))
        return sv.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=handle)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        if (refused := await self._refused(context, request)) is not None:
            return sv.ForwardMessageToDeadLetterQueueResponse(status=refused)
        gw = self.gw
        s = gw.session(context)
        handle = await gw.renewer.current(s.client_id, request.group.name, request.topic.name, request.receipt_handle)
        st = await gw.blocking(gw.pop.forward_to_dlq, request.group.name, request.topic.name, handle)
        if st is not AckStatus.OK:
            return sv.ForwardMessageToDeadLetterQueueResponse(status=status(C.INVALID_RECEIPT_HANDLE,
                                                                            "the receipt handle is expired or unknown"))
        return sv.ForwardMessageToDeadLetterQueueResponse(status=ok())


def encode_recall_handle(topic: str, broker_name: str, deliver_ms: int, message_id: str) -> str:
    """RocketMQ's RecallMessageHandle.HandleV1: base64url of ``v1 topic brokerName deliverMs messageId``."""
    raw = " ".join(("v1", topic, broker_name, str(deliver_ms), message_id)).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_recall_handle(handle: str) -> tuple[str, str, int, str]:
    try:
        parts = base64.urlsafe_b64decode(handle.encode()).decode().split(" ")
        if len(parts) != 5 or parts[0] != "v1":
            raise ValueError
        return parts[1], parts[2], int(parts[3]), parts[4]
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise ValueError(f"recall handle {handle!r} is not one this proxy issued") from None


def _now_timestamp() -> Any:
    from .convert import timestamp

    return timestamp(int(time.time() * 1000))


def _dur(ms: int) -> Any:
    from google.protobuf.duration_pb2 import Duration

    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)
