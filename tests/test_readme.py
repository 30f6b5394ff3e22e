"""Every command in README.md, run as written, from a fresh clone, against the node `make serve`
starts: the quick start, kcat, the SDK and confluent-kafka examples, `rockafka admin`, the
metrics and JSON API, retry and dead letters, query and rewind (tests/support/readme_runner.py
says how blocks are run and which are skipped and why).

The clone installs itself as `make serve` does (with the package registries reachable); the node
and every command after the installs then run inside a network namespace this test creates, so
the README's default ports (9092, 9876, 10911, 8080) are free and nothing leaves the machine.
Delay levels are shortened through the environment (`ROCKAFKA_MESSAGE_DELAY_LEVEL`), which the
README documents as a way to set any key, so the retry example reaches the dead-letter queue in
seconds instead of minutes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "tests" / "support" / "readme_runner.py"
FAST_LEVELS = " ".join(["1s"] * 18)


def _failures(report: dict) -> list[str]:
    return [f"README line {o['line']} ({o['first_line']!r}): {o['detail'] or 'exit ' + str(o['rc'])}\n{o['output']}"
            for o in report["outcomes"] if not o["ok"]]


# The run is a fresh install and every README command as a new process: 170 s alone on a
# 2-core machine, most of it CPU, so beside two other test processes it took 235-300+ s. The
# suite's 300 s hang guard is not its bound; its steps have their own (the install and phase 1
# 900 s, phase 2 1200 s) and this guard sits above what they add up to in the usual case.
@pytest.mark.timeout(900)
def test_every_readme_command_runs_from_a_fresh_clone(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from readme_runner import parse, runnable, split_phases

    clone, state = tmp_path / "rockafka", tmp_path / "state"
    state.mkdir()
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "ROCKAFKA_"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".venv" not in p)
    env["ROCKAFKA_MESSAGE_DELAY_LEVEL"] = FAST_LEVELS
    # the install half of `make serve` (its other half, the node, starts in phase 2)
    install = subprocess.run(["make", "-C", str(clone), ".venv/bin/rockafka", "rockafka/console/static/htmx.min.js"],
                             env=env, capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    (state / "env.json").write_text(json.dumps(env))

    one = subprocess.run([sys.executable, str(RUNNER), "1", str(clone), str(state)], env=env,
                         capture_output=True, text=True, timeout=900)
    assert one.returncode == 0, one.stderr[-3000:]
    report1 = json.loads((state / "report-1.json").read_text())
    assert _failures(report1) == []
    cluster = clone / "cluster"
    try:
        two = subprocess.run(["unshare", "--net", "--", sys.executable, str(RUNNER), "2", str(clone), str(state)],
                             env=env, capture_output=True, text=True, timeout=1200)
    finally:
        # `rockafka cluster up` processes outlive a failed block; pids are the machine's, so this
        # stops them from outside the namespace (a no-op when the README's `down` ran)
        if (cluster / "cluster.json").exists():
            subprocess.run([str(clone / ".venv" / "bin" / "rockafka"), "cluster", "down", "--dir", str(cluster),
                            "--timeout", "10"], env=env, capture_output=True, timeout=120)
    assert two.returncode == 0, "needs root for a network namespace (as README states): " + two.stderr[-3000:]
    report2 = json.loads((state / "report-2.json").read_text())
    assert _failures(report2) == []
    assert report2["stop_problems"] == []

    blocks = runnable(parse((clone / "README.md").read_text()))
    phase1, phase2 = split_phases(blocks)
    ran = {o["line"] for o in report1["outcomes"] + report2["outcomes"]}
    expected = {b.line for b in phase1 + phase2 if b.mode != "skip"}
    assert ran == expected  # every block ran, none was left behind after a failure
    skipped = {s["reason"] for s in report2["skipped"]}
    assert skipped == {"it is the command that runs this test", "a 10-minute benchmark with its own make target",
                       "the failover transcript; tests/rockafka/test_cluster_failover_readme.py runs it"}
    outputs = [o["output"] for o in report1["outcomes"] + report2["outcomes"]]
    # what a reader is told to expect is what they get
    assert any("orders paid ['order-1'] b'paid'" in out for out in outputs)
    assert any("order-42 shipped" in out for out in outputs)
    assert any("received" in out and "created b'hello'" in out for out in outputs)  # the gRPC example
    assert any(out.startswith("rockafka 0.1.0") for out in outputs)  # `rockafka --version` on PATH
    # the local cluster: the slave follows its master, the record went through, `down` ran
    (local,) = [out for out in outputs if "rockafka cluster status --dir" in out]
    assert "following 127.0.0.1:20102" in local and "\nhello\n" in local and "namesrv-0: stopped" in local
    assert json.loads((cluster / "cluster.json").read_text())["state"] == "down"
