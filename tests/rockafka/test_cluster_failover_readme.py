"""The README's failover transcript, run as written with real processes: ``rockafka cluster up
--controllers 3 --groups 2 --replicas 2`` (three NameServers with the controller, two groups in
controller mode), a Kafka ``acks=all`` and a native SDK producer, ``cluster kill`` of broker-a's
master, both writes acknowledged again, ``status`` naming the new master, ``restart``, ``down``.
The blocks carry ``readme-test: skip`` for tests/test_readme.py and run here, with the
README's ports moved to a free range. Around them: a second ``up`` refused with the pids and
pid files untouched, bad input refused, and after ``down`` no process of the cluster left."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rockafka.cluster_launcher import STATE_FILE, _proc_stat, plan_cluster
from tests.support.node import _ISSUED_PORTS, _bindable, _ephemeral_range

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
README_BASE = 21000
MARK = "tests/rockafka/test_cluster_failover_readme.py runs it"


def transcript() -> list[tuple[str, str]]:
    """(lang, code) of the README blocks this test runs, in order."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"<!-- readme-test: skip [^>]*" + re.escape(MARK) + r" -->\n```(\w+)\n(.*?)```", text, re.S)
    assert len(blocks) >= 4, "the README's failover transcript is gone"
    return blocks


def pick_base() -> int:
    low, _ = _ephemeral_range()
    import random
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(10000, max(10001, low - 1100))
        state = plan_cluster(Path("x"), groups=2, replicas=2, namesrvs=1, controllers=3, role="SYNC_MASTER",
                             host="127.0.0.1", base_port=base, cluster_name="c", config_file=None, settings=[],
                             command=["rockafka"])
        ports = [p for m in state["members"] for p in m["ports"].values()]
        if not _ISSUED_PORTS.intersection(ports) and all(_bindable(p) for p in ports):
            _ISSUED_PORTS.update(ports)
            return base
    raise RuntimeError("no free range of ports")


def run_block(lang: str, code: str, cwd: Path, env: dict[str, str]) -> str:
    argv = ["bash", "-e", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{lang} block failed ({out.returncode}):\n{code}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["rockafka", "cluster", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_readme_failover_transcript_runs(tmp_path):
    base = pick_base()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "rockafka"  # the checkout's CLI, as `make` installs it
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m rockafka.cli \"$@\"\n")
    shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    move = lambda code: re.sub(r"\b21(\d{3})\b", lambda m: str(base + int(m.group(1))), code)  # noqa: E731
    blocks = [(lang, move(code)) for lang, code in transcript()]
    directory = tmp_path / "failover"
    outputs: list[str] = []
    try:
        (up_lang, up_code), *rest = blocks
        outputs.append(run_block(up_lang, up_code, tmp_path, env))
        state = json.loads((directory / STATE_FILE).read_text())
        pids = {m["name"]: m["pid"] for m in state["members"]}
        assert [m["name"] for m in state["members"]] == [
            "controller-0", "controller-1", "controller-2", "broker-a-1", "broker-a-2", "broker-b-1", "broker-b-2"]
        pid_files = {p.stem: int(p.read_text()) for p in (directory / "pids").glob("*.pid")}
        assert pid_files == pids

        # a second `up` on the running cluster is refused and changes nothing
        again = cli(env, tmp_path, "up", "--dir", "./failover", "--controllers", "3", "--base-port", str(base))
        assert again.returncode == 2 and "already up" in again.stderr, again.stderr
        assert {p.stem: int(p.read_text()) for p in (directory / "pids").glob("*.pid")} == pids
        assert {m["name"]: m["pid"] for m in json.loads((directory / STATE_FILE).read_text())["members"]} == pids
        # bad input: the CLI's message and a non-zero exit
        for args, message in [(["kill", "broker-z-9"], "no member 'broker-z-9'"),
                              (["kill", "--master-of", "broker-q"], "no group 'broker-q'"),
                              (["restart", "nobody"], "no member 'nobody'")]:
            out = cli(env, tmp_path, *args, "--dir", "./failover")
            assert out.returncode == 2 and message in out.stderr, (args, out.stderr)
        for args, message in [(["--replicas", "0"], "--replicas must be 1..4, got 0"),
                              (["--controllers", "9"], "--controllers must be 0..5, got 9"),
                              (["--base-port", str(base)], "ports of the plan already in use")]:
            out = cli(env, tmp_path, "up", "--dir", "./other", "--controllers", "3", *args)
            assert out.returncode == 2 and message in out.stderr, (args, out.stderr)

        for lang, code in rest:
            outputs.append(run_block(lang, code, tmp_path, env))
    finally:
        if (directory / STATE_FILE).exists():
            subprocess.run(["rockafka", "cluster", "down", "--dir", str(directory), "--timeout", "10"], env=env,
                           capture_output=True, timeout=120)
    text = "\n".join(outputs)
    assert "SEND_OK" in outputs[1]
    first = int(re.search(r"partition 0 led by node (\d)", outputs[1]).group(1))
    killed, other = f"broker-a-{first}", f"broker-a-{3 - first}"
    assert f"{killed}: SIGKILL sent" in text  # --master-of found the elected member
    # the record to broker-a's partition was acknowledged, so the other member leads it now
    assert "kafka acks=all after the kill: [(None, 0)]" in text and "native after the kill: SEND_OK" in text
    status = next(o for o in outputs if "controller's view" in o)
    assert "status exit 3" in status  # the killed member was down
    assert re.search(rf"broker-a\s+{other}\s+{3 - first}\s+127\.0\.0\.1:\d+\s+\d+\s+\[{3 - first}\]", status), status
    assert re.search(rf"{killed}\s+NO", status), status
    assert f"{killed}: was not running; started again" in text
    for name in ("controller-0", "controller-1", "controller-2", "broker-a-1", "broker-a-2", "broker-b-1",
                 "broker-b-2"):
        assert f"{name}: stopped" in text
    # `down` left no process of the cluster and no pid file
    final = json.loads((directory / STATE_FILE).read_text())
    assert final["state"] == "down"
    for m in final["members"]:
        stat = _proc_stat(m["pid"])
        assert stat is None or stat[0] in ("Z", "X") or stat[1] != m["startTicks"], m["name"]
    assert list((directory / "pids").glob("*.pid")) == []
