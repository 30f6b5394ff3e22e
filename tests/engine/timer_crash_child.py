"""Child process for the timer crash test: stages timers, then delivers them until killed.

Usage: ``python timer_crash_child.py ROOT N``. Puts N timer messages (bodies ``t<i>``) due
1-3 s from now into topic ``tc`` (queues 0-3), prints ``put`` once all were acknowledged, then
prints ``delivered <count>`` every 50 ms while the store delivers them; the parent SIGKILLs it
part-way through delivery.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from engine.message import Message  # noqa: E402
from engine.store import MessageStore  # noqa: E402
from engine_support import small_config  # noqa: E402


def config(root):
    return small_config(root, timer_max_delay_sec=60, mapped_file_size_commit_log=1024 * 1024)


def main() -> None:
    root, n = sys.argv[1], int(sys.argv[2])
    store = MessageStore(config(root))
    store.start()
    now = int(time.time() * 1000)
    for i in range(n):
        res = store.put_message(Message("tc", b"t%d" % i, queue_id=i % 4,
                                        properties={"TIMER_DELIVER_MS": str(now + 1500 + (i % 3) * 700)}))
        if not res.ok:
            raise SystemExit(f"put {i} failed: {res.status} {res.error}")
    os.write(1, b"put\n")
    for _ in range(2000):  # bounded: 100 s
        count = sum(store.get_max_offset_in_queue("tc", q) for q in range(4))
        os.write(1, b"delivered %d\n" % count)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
