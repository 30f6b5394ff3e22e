"""The controller's evidence of death (engine/controller/probe.py) against real sockets: a port
nobody listens on refuses -> gone; a listener whose process is stopped (SIGSTOP) still completes
the handshake in the kernel -> not gone, so the lease wait stands."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time

from engine.controller.probe import ACCEPTED, REFUSED, ports_refused


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_ports_nobody_listens_on_count_as_gone_after_two_refused_rounds():
    addrs = [f"127.0.0.1:{_closed_port()}", f"127.0.0.1:{_closed_port()}"]
    gone, rounds = asyncio.run(ports_refused(addrs, time.monotonic() + 5, lambda: True))
    assert gone and len(rounds) == 2 and all(set(r.values()) == {REFUSED} for r in rounds), rounds


def test_a_stopped_process_still_listening_is_not_gone_and_one_open_port_is_enough():
    code = ("import socket,sys,time\ns=socket.socket();s.bind(('127.0.0.1',0));s.listen(64)\n"
            "print(s.getsockname()[1],flush=True)\ntime.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        port = int(proc.stdout.readline())
        os.kill(proc.pid, signal.SIGSTOP)
        addrs = [f"127.0.0.1:{port}", f"127.0.0.1:{_closed_port()}"]  # HA port open, broker port closed
        gone, rounds = asyncio.run(ports_refused(addrs, time.monotonic() + 0.6, lambda: True))
        assert not gone and rounds and rounds[-1][addrs[0]] == ACCEPTED, rounds
    finally:
        proc.kill()
        proc.wait(10)


def test_probing_stops_when_it_is_no_longer_wanted():
    addrs = [f"127.0.0.1:{_closed_port()}"]
    gone, rounds = asyncio.run(ports_refused(addrs, time.monotonic() + 5, lambda: False))
    assert not gone and rounds == []
