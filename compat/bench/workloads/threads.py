"""CPU time per thread of a running ``rockafka serve``: how a load's work splits over the
request (event-loop) thread, the dispatcher, the flush and replication threads.

``snapshot(pid)`` reads user + system clock ticks of every thread from /proc/PID/task/*/stat;
``names(pid)`` asks ``py-spy dump --json`` once for the Python thread names of the OS thread ids
(CPython 3.11 does not name its OS threads); ``split(before, after, names, per)`` is the
difference per thread name in microseconds per ``per`` unit (a record, a message). Threads
of one name (several ``ha-read-...`` connections, send-queue workers) are summed. Measuring only:
nothing here changes the broker.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from .profile import py_spy

_CLK = os.sysconf("SC_CLK_TCK")


def snapshot(pid: int) -> dict[int, tuple[float, float]]:
    """{tid: (user, system) CPU seconds} of every thread of ``pid`` now."""
    out: dict[int, tuple[float, float]] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(task.name)] = (int(fields[11]) / _CLK, int(fields[12]) / _CLK)
    return out


def names(pid: int) -> dict[int, str]:
    """{tid: Python thread name}, from one ``py-spy dump``; {} when py-spy is missing or fails."""
    exe = py_spy()
    if exe is None:
        return {}
    try:
        res = subprocess.run([exe, "dump", "--pid", str(pid), "--json", "--nonblocking"], capture_output=True,
                             timeout=30, text=True)
        threads = json.loads(res.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return {}
    return {t["os_thread_id"]: t.get("thread_name") or f"tid-{t['os_thread_id']}"
            for t in threads if t.get("os_thread_id")}


def _group(name: str) -> str:
    """One row per kind of thread: per-connection and numbered names folded together."""
    name = re.sub(r"^(ha-read|ha-write)-.*$", r"\1", name)
    return re.sub(r"[-_ ]?\d+(?: \(.*\))?$", "", name) or name


def split(before: dict[int, tuple[float, float]], after: dict[int, tuple[float, float]],
          tid_names: dict[int, str], per: float) -> dict[str, float]:
    """Microseconds of CPU per unit of work, by thread kind, largest first: ``name`` is user +
    system, ``name/sys`` the system part of it (threads that were not Python threads at dump
    time count as ``other``)."""
    by: dict[str, float] = {}
    for tid, (user, system) in after.items():
        bu, bs = before.get(tid, (0.0, 0.0))
        du, ds = user - bu, system - bs
        if du + ds <= 0:
            continue
        key = _group(tid_names.get(tid, "other"))
        by[key] = by.get(key, 0.0) + (du + ds) * 1e6 / per
        by[key + "/sys"] = by.get(key + "/sys", 0.0) + ds * 1e6 / per
    return dict(sorted(by.items(), key=lambda kv: -kv[1]))


def render(title: str, shares: dict[str, float]) -> str:
    total = sum(v for k, v in shares.items() if not k.endswith("/sys")) or 1.0
    lines = [title, f"{'thread':<24} {'us/unit':>9} {'system':>9} {'share':>7}"]
    for name, us in shares.items():
        if not name.endswith("/sys") and us > 0:
            lines.append(f"{name:<24} {us:>9.2f} {shares.get(name + '/sys', 0.0):>9.2f} {us * 100 / total:>6.1f}%")
    lines.append(f"{'total':<24} {total:>9.2f} {sum(v for k, v in shares.items() if k.endswith('/sys')):>9.2f}")
    return "\n".join(lines)
