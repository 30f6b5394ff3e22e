"""Answers deferred until another thread resolves them (a SYNC_MASTER send waits for its slave's
ACK): when one ACK answers many sends in flight, every connection gets each of its answers,
whole and in the order they were resolved, and a client that went away meanwhile costs the
others nothing. Real connections over loopback sockets, answers read back by a raw client."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

from gateway_native.remoting.codes import RequestCode, ResponseCode
from gateway_native.remoting.command import FrameDecoder, RemotingCommand
from gateway_native.remoting.processor_table import ReplyWhenDone, _when_done
from gateway_native.transport import Connection


async def _read_answers(reader: asyncio.StreamReader, count: int, timeout: float = 10.0) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(got) < count:
        data = await asyncio.wait_for(reader.read(65536), max(0.01, deadline - loop.time()))
        assert data, f"connection closed after {len(got)} of {count} answers"
        got.extend(decoder.feed(data))
    return got


def test_answers_resolved_together_reach_each_client_whole_and_in_order():
    async def scenario() -> None:
        server_conns: list[Connection] = []
        accepted = asyncio.Event()

        async def on_client(reader, writer):
            conn = Connection(reader, writer, None)
            conn.start()  # its read loop notices when the client goes away
            server_conns.append(conn)
            if len(server_conns) == 2:
                accepted.set()

        server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            kept_r, kept_w = await asyncio.open_connection("127.0.0.1", port)
            gone_r, gone_w = await asyncio.open_connection("127.0.0.1", port)
            await asyncio.wait_for(accepted.wait(), 10)
            by_peer = {c.remote_addr: c for c in server_conns}
            kept = by_peer[f"127.0.0.1:{kept_w.get_extra_info('sockname')[1]}"]
            gone = by_peer[f"127.0.0.1:{gone_w.get_extra_info('sockname')[1]}"]
            futures: list[Future] = []
            for i in range(300):  # interleaved: the two connections' sends in flight together
                conn = kept if i % 3 else gone
                cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "T"})
                cmd.opaque = i
                fut: Future = Future()
                futures.append(fut)
                _when_done(ReplyWhenDone(fut, lambda outcome, cmd=cmd: cmd.response(
                    ResponseCode.SUCCESS, None, {"queueOffset": str(outcome)})), conn, cmd, None, 0.0)
            gone_w.close()  # this client goes away before its answers exist
            for _ in range(1500):  # the server side meets the close (within 15 s)
                if gone.closed:
                    break
                await asyncio.sleep(0.01)
            assert gone.closed
            # one "ACK" answers every send at once, from another thread, as the HA reader does
            t = threading.Thread(target=lambda: [f.set_result(n) for n, f in enumerate(futures)])
            t.start()
            t.join()
            answers = await _read_answers(kept_r, 200)
            expected = [i for i in range(300) if i % 3]
            assert [a.opaque for a in answers] == expected
            assert all(a.is_response and a.code == ResponseCode.SUCCESS for a in answers)
            assert [int(a.ext_fields["queueOffset"]) for a in answers] == expected
            kept_w.close()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())
