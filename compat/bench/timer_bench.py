"""Timer messages at scale, in one process against a real store: N timers pending at once.

Prints put throughput with and without a timer property, how long the timer thread takes to
file N staged messages into the wheel and log, the process's resident memory before and after
(the point: N pending timers are N 32-byte log records, not N Python objects), the sizes of the
timer files, and how long delivering them takes once due. Usage:

    python compat/bench/timer_bench.py [N] [delay_s]      (defaults 1000000 and 30)
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from engine.config import MessageStoreConfig  # noqa: E402
from engine.message import Message  # noqa: E402
from engine.store import MessageStore  # noqa: E402
from engine.timer_message import TIMER_TOPIC  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    delay_s = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    root = tempfile.mkdtemp(prefix="timer-bench-")
    store = MessageStore(MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=256 * 1024 * 1024,
                                            message_index_enable=False, timer_max_delay_sec=3600))
    store.start()
    try:
        body = b"x" * 64
        plain = 100_000
        t0 = time.perf_counter()
        for i in range(plain):
            store.put_message(Message("plain", body, queue_id=i % 8))
        plain_rate = plain / (time.perf_counter() - t0)
        rss0 = rss_mb()
        due = int(time.time() * 1000) + delay_s * 1000
        t0 = time.perf_counter()
        for i in range(n):
            store.put_message(Message("timed", body, queue_id=i % 8, properties={"TIMER_DELIVER_MS": str(due + (i % 10) * 1000)}))
        put_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        while store.timer.pending() > 0 and time.perf_counter() - t0 < 600:
            time.sleep(0.05)
        enqueue_s = time.perf_counter() - t0
        rss1 = rss_mb()
        log_mb = store.timer.timer_log.end / 1024 / 1024
        wheel_mb = os.path.getsize(os.path.join(root, "timerwheel", "wheel")) / 1024 / 1024
        staged = store.get_max_offset_in_queue(TIMER_TOPIC, 0)
        print(f"plain put: {plain_rate:,.0f} msg/s; timer put: {n / put_s:,.0f} msg/s ({n:,} timers)")
        print(f"wheel+log filing after the last put: {enqueue_s:.1f} s; staged units {staged:,}")
        print(f"RSS before timers {rss0:.0f} MiB, with {n:,} pending {rss1:.0f} MiB "
              f"(+{(rss1 - rss0) * 1024 * 1024 / n:.0f} bytes per timer, mapped pages included)")
        print(f"timerlog {log_mb:.1f} MiB, wheel file {wheel_mb:.1f} MiB (sparse)")
        t0 = time.perf_counter()
        wait_until = due / 1000 + 10 + 600
        while time.time() < wait_until:
            delivered = sum(store.get_max_offset_in_queue("timed", q) for q in range(8))
            if delivered >= n:
                break
            time.sleep(0.2)
        last_due = due / 1000 + 9
        print(f"delivered {delivered:,}; last one {time.time() - last_due:.1f} s after the last delivery time "
              f"({delivered / max(time.time() - due / 1000, 1e-3):,.0f} msg/s from the first due time)")
    finally:
        store.shutdown()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
