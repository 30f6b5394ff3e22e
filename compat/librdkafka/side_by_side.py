"""Run librdkafka's own tests against a fresh Rockafka node and Apache Kafka 4.4 at the same time.

What this module owns:
- one fresh ``rockafka serve`` (``tests/support/node.py``'s ``RunningNode``, free loopback ports)
  and one fresh single-node Apache Kafka (``compat/bench/peers/kafka_peer.py``'s ``KafkaPeer``),
  both with ``num.partitions=4`` and topic auto-creation: librdkafka's tests create their topics
  by producing to them and several need more than one partition;
- one run directory per broker holding its ``test.conf`` (``bootstrap.servers=...``) and each
  test's output, in a fresh folder under the cache (printed at the start);
- the printed table: test -> wall seconds, exit status and pass/fail on each broker.

Invariants:
- each test runs on both brokers at the same time (same machine load for both), bounded by
  ``--timeout``; a test still running then is killed (its process group) and counted failed;
- every process started here is stopped before exit, also on SIGTERM/SIGINT and on errors;
- the exit status is 0 only when every test passed on both brokers.

It is a development tool (``make compat-librdkafka``, via ``compat/librdkafka/run.sh`` which
fetches and builds librdkafka); ``make test`` never runs it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "compat" / "bench" / "peers"))

from kafka_peer import KafkaPeer  # noqa: E402  (sibling imports of the peers folder)
from tests.support.node import RunningNode  # noqa: E402

CACHE = Path(os.environ.get("RDK_CACHE", Path.home() / ".cache" / "rockafka" / "librdkafka"))


def _terminate(*_: object) -> None:
    raise SystemExit(143)


def run_test(runner: Path, libdirs: str, rundir: Path, test: str, protocol: str) -> subprocess.Popen:
    env = dict(os.environ, TESTS=test, TEST_KAFKA_VERSION="4.0.0",
               TEST_CONSUMER_GROUP_PROTOCOL=protocol,
               LD_LIBRARY_PATH=libdirs + (":" + os.environ["LD_LIBRARY_PATH"]
                                          if os.environ.get("LD_LIBRARY_PATH") else ""))
    log = open(rundir / f"{test}.log", "wb")
    try:
        return subprocess.Popen([str(runner)], cwd=rundir, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--librdkafka", required=True, type=Path, help="built librdkafka source tree")
    ap.add_argument("--tests", default="0041 0018", help="test numbers, space-separated")
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("TEST_TIMEOUT", 900)),
                    help="seconds per test and broker before it is killed (default 900)")
    ap.add_argument("--group-protocol", default=os.environ.get("GROUP_PROTOCOL", "classic"),
                    choices=["classic", "consumer"])
    args = ap.parse_args()

    runner = args.librdkafka / "tests" / "test-runner"
    if not os.access(runner, os.X_OK):
        print(f"side_by_side: no test runner at {runner}", file=sys.stderr)
        return 2
    libdirs = f"{args.librdkafka / 'src'}:{args.librdkafka / 'src-cpp'}"
    tests = args.tests.split()
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=CACHE))
    print(f"side_by_side: logs in {work}", flush=True)

    signal.signal(signal.SIGTERM, _terminate)
    node = RunningNode(work / "rockafka-data", settings={"num_partitions": 4}, ready_timeout=120)
    peer = KafkaPeer(work / "kafka-data", overrides={"num.partitions": 4,
                                                     "auto.create.topics.enable": "true"})
    brokers: dict[str, str] = {}
    running: list[subprocess.Popen] = []
    rows: list[tuple[str, dict[str, tuple[float, int | None]]]] = []
    try:
        node.start()
        brokers["Rockafka"] = node.kafka_bootstrap
        peer.start()
        brokers["Kafka 4.4"] = peer.bootstrap
        rundirs = {}
        for name, bootstrap in brokers.items():
            d = work / ("run-" + name.split()[0].lower())
            d.mkdir()
            (d / "test.conf").write_text(f"bootstrap.servers={bootstrap}\n")
            rundirs[name] = d
        print(f"side_by_side: Rockafka {brokers['Rockafka']}, Kafka {brokers['Kafka 4.4']}, "
              f"group protocol {args.group_protocol}", flush=True)
        for test in tests:
            started = time.monotonic()
            procs = {name: run_test(runner, libdirs, rundirs[name], test, args.group_protocol)
                     for name in brokers}
            running = list(procs.values())
            result: dict[str, tuple[float, int | None]] = {}
            while len(result) < len(procs):
                for name, proc in procs.items():
                    if name in result:
                        continue
                    rc = proc.poll()
                    elapsed = time.monotonic() - started
                    if rc is not None:
                        result[name] = (elapsed, rc)
                    elif elapsed > args.timeout:
                        kill_group(proc)
                        result[name] = (elapsed, None)
                time.sleep(0.05)
            running = []
            rows.append((test, result))
            line = ", ".join(f"{n} {s:.1f} s rc={rc if rc is not None else 'timeout'}"
                             for n, (s, rc) in result.items())
            print(f"side_by_side: {test}: {line}", flush=True)
    finally:
        for proc in running:
            kill_group(proc)
        try:
            peer.stop()
        finally:
            node.stop()

    names = list(brokers)
    print()
    print("| test | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    ok = True
    for test, result in rows:
        cells = []
        for name in names:
            secs, rc = result[name]
            passed = rc == 0
            ok &= passed
            status = "timeout" if rc is None else f"exit {rc}"
            cells.append(f"{secs:.1f} s, {status}, {'pass' if passed else 'FAIL'}")
        print(f"| {test} | " + " | ".join(cells) + " |")
    print(f"\nlibrdkafka {args.librdkafka.parent.name} (group protocol {args.group_protocol}); "
          f"test logs in {work}")
    return 0 if ok and rows else 1


if __name__ == "__main__":
    sys.exit(main())
