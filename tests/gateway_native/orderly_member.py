"""A group member run as its own process by the orderly tests, so it can be killed outright.

Usage: ``python -m tests.gateway_native.orderly_member NAMESRV GROUP TOPIC OUT_FILE``; every
consumed message body is appended to OUT_FILE as a line (flushed before the listener returns),
until the process is killed.
"""

from __future__ import annotations

import sys
import threading

from gateway_native.client import ConsumeOrderlyStatus, PushConsumer
from tests.gateway_native.helpers import FAST


def main() -> None:
    namesrv, group, topic, out_path = sys.argv[1:5]
    out = open(out_path, "a", buffering=1)
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            for m in msgs:
                out.write(m.body.decode() + "\n")
            out.flush()
        return ConsumeOrderlyStatus.SUCCESS

    c = PushConsumer(group, namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **dict(FAST, rebalance_interval=500))
    c.subscribe(topic, "*")
    c.register_message_listener_orderly(listener, lock_renew_interval_ms=500)
    c.start()
    threading.Event().wait(600)  # until killed (bounded: the test kills it within seconds)


if __name__ == "__main__":
    main()
