"""Child process for the crash tests: writes under SYNC_FLUSH until killed.

Usage: ``python crash_writer.py ROOT SEED``. Each acknowledged put (status PUT_OK) is reported
on stdout as one line ``ack <kind> <queue_id> <queue_offset> <commitlog_offset> <key> <body-hex>``
written after the put returned, so every reported message was durable when reported.
Several writer threads share the group commit.
"""

from __future__ import annotations

import os
import random
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from engine.message import Message  # noqa: E402
from engine.record_batch import Record, build_batch  # noqa: E402
from engine.store import MessageStore  # noqa: E402
from engine_support import crash_config  # noqa: E402


def main() -> None:
    root, seed = sys.argv[1], int(sys.argv[2])
    store = MessageStore(crash_config(root))
    store.start()
    os.write(1, b"ready\n")
    out_lock = threading.Lock()

    def writer(n: int) -> None:
        rnd = random.Random(seed * 100 + n)
        i = 0
        while True:
            i += 1
            key = f"s{seed}-w{n}-{i}"
            qid = rnd.randrange(3)
            if rnd.random() < 0.2:
                body = build_batch([Record(j, 0, f"{key}-r{j}".encode(), rnd.randbytes(rnd.randrange(1, 50)), [])
                                    for j in range(rnd.randrange(1, 6))])
                r = store.put_record_batch("Crash", qid, body)
                kind = "batch"
            else:
                body = rnd.randbytes(rnd.randrange(0, 600))
                r = store.put_message(Message("Crash", body, keys=[key], queue_id=qid))
                kind = "msg"
            if r.ok:
                line = f"ack {kind} {qid} {r.queue_offset} {r.commitlog_offset} {key} {body.hex()}\n".encode()
                with out_lock:
                    os.write(1, line)

    threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
