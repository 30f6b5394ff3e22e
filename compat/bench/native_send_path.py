"""In-process interpreter cost of the native send path, per message: decode a SEND_MESSAGE_V2
frame as the Java client sends it (1 KiB, JSON header), run the processor against a real store
(ASYNC_FLUSH), encode the answer. Thread CPU of the one thread, so it hardly depends on what else
the machine runs; no sockets, no event-loop wake-ups (``quick.py --case native`` has those).

    PYTHONPATH=$PWD python compat/bench/native_send_path.py 20000 [tottime|cumulative]

The optional second argument prints a cProfile table sorted by it. Nothing is asserted.
"""
from __future__ import annotations

import asyncio
import cProfile
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.config import load_node_config  # noqa: E402
from engine.store import MessageStore  # noqa: E402
from engine.topic_config import TopicConfig  # noqa: E402
from gateway_native.broker import Broker  # noqa: E402
from gateway_native.processors import BROKER_PROCESSORS  # noqa: E402
from gateway_native.remoting.codes import RequestCode as RC  # noqa: E402
from gateway_native.remoting.command import RemotingCommand, decode_frame, encode  # noqa: E402
from gateway_native.remoting.processor_table import _run  # noqa: E402

PROPS = "UNIQ_KEY\x01AC110001A1B2C3D4E5F6000000000001\x02WAIT\x01true\x02TAGS\x01TagA\x02"


class Conn:
    """What the processor table needs of a connection; answers are encoded and dropped."""

    remote_addr = "127.0.0.1:5555"
    closed = False

    def __init__(self) -> None:
        self.attrs: dict = {}
        self.sent_bytes = 0

    def send(self, cmd: RemotingCommand) -> None:
        self.sent_bytes += len(encode(cmd))

    async def send_and_drain(self, cmd: RemotingCommand) -> None:
        self.send(cmd)

    def backlogged(self) -> bool:
        return False

    def more_received(self) -> bool:
        return False

    async def drain_backlog(self) -> None:
        return None


def frame(i: int) -> bytes:
    """A SEND_MESSAGE_V2 frame (without its length prefix) as the Java client sends it."""
    cmd = RemotingCommand.request(RC.SEND_MESSAGE_V2, {
        "a": "bench-producer", "b": "BenchT", "c": "TBW102", "d": "4", "e": str(i % 8), "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": PROPS, "j": "0", "k": "false", "l": "16", "m": "false",
        "n": "broker-a"}, body=b"x" * 1024, language=0)
    cmd.opaque = i
    return encode(cmd)[4:]


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 20000
    sort = argv[1] if len(argv) > 1 else ""
    root = tempfile.mkdtemp(prefix="native-send-path-")
    config = load_node_config(overrides={"storePathRootDir": root, "flushDiskType": "ASYNC_FLUSH",
                                         "brokerRole": "ASYNC_MASTER"})
    store = MessageStore(config.store, config.broker)
    store.start()
    try:
        store.topic_config.create_or_update(TopicConfig("BenchT", read_queue_nums=8, write_queue_nums=8))
        broker = Broker(store, config)
        frames = [frame(i) for i in range(200)]
        proc = BROKER_PROCESSORS.get(RC.SEND_MESSAGE_V2)
        conn = Conn()

        async def sends(count: int) -> None:
            for i in range(count):
                await _run(proc, broker, conn, decode_frame(frames[i % 200]))

        loop = asyncio.new_event_loop()
        loop.run_until_complete(sends(min(n, 2000)))  # warm-up: segment mapped, caches filled
        prof = cProfile.Profile() if sort else None
        t0 = time.thread_time()
        if prof is not None:
            prof.enable()
        loop.run_until_complete(sends(n))
        if prof is not None:
            prof.disable()
        print(f"{(time.thread_time() - t0) * 1e6 / n:.1f} us thread CPU per message (N={n})")
        if prof is not None:
            pstats.Stats(prof).sort_stats(sort).print_stats(25)
        loop.close()
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
