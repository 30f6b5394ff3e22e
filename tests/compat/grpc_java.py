"""The RocketMQ 5 Java gRPC client runner (``compat/rocketmq-grpc-java``): build, set up the
topics and groups a run needs with ``mqadmin``, run it, parse its JSON lines.

The runner names topics ``grpc-<what>-<run id>`` and groups ``G-<what>-<run id>``. ``prepare``
creates them as an operator of Apache RocketMQ 5 must (typed topics: ``message.type`` FIFO /
DELAY / TRANSACTION / NORMAL; the FIFO group orderly; the DLQ group with one retry), so one run
works against Rockafka and against Apache RocketMQ's proxy alike.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

from tests.compat import java_runner
from tests.compat.mqadmin import MQAdmin

DIR = java_runner.ROOT / "compat" / "rocketmq-grpc-java"
JAR = DIR / "target" / "grpc-runner.jar"
SCENARIOS = ["producer-normal", "producer-fifo", "producer-delay", "producer-transaction", "producer-recall",
             "simple-consumer",
             "simple-dlq", "push-tag", "push-sql"]
# the fewest checks each scenario reports when it runs to completion
MIN_CHECKS = {"producer-normal": 4, "producer-fifo": 3, "producer-delay": 4, "producer-transaction": 4, "producer-recall": 3,
              "simple-consumer": 4, "simple-dlq": 1, "push-tag": 4, "push-sql": 4}
TOPICS = {"normal": "NORMAL", "fifo": "FIFO", "delay": "DELAY", "txn": "TRANSACTION", "recall": "DELAY", "simple": "NORMAL",
          "dlq": "NORMAL", "push-tag": "NORMAL", "push-sql": "NORMAL", "bench": "NORMAL"}


def new_run_id() -> str:
    return uuid.uuid4().hex[:8]


def prepare(mqadmin: MQAdmin, run_id: str, cluster: str = "DefaultCluster", only: set[str] | None = None) -> None:
    """Create the run's typed topics and groups with mqadmin (``only``: the topics, by what, a
    run of a few scenarios needs). Each mqadmin process idles ~5 s in its client's shutdown, so
    they run side by side."""
    kinds = {what: mtype for what, mtype in TOPICS.items() if only is None or what in only}
    commands = {f"topic-{what}": ["updateTopic", "-c", cluster, "-t", f"grpc-{what}-{run_id}", "-r", "4", "-w", "4",
                                  "-a", f"+message.type={mtype}"] for what, mtype in kinds.items()}
    if only is None or "fifo" in only:
        commands["group-fifo"] = ["updateSubGroup", "-c", cluster, "-g", f"G-fifo-{run_id}", "-o", "true"]
    if only is None or "dlq" in only:
        commands["group-dlq"] = ["updateSubGroup", "-c", cluster, "-g", f"G-dlq-{run_id}", "-r", "1"]
    out = mqadmin.many(commands, workers=6)
    # mqadmin's 3 s request timeout can pass on a machine busy with three server JVMs: try again
    again = {k: commands[k] for k, v in out.items() if "success" not in v and "Timeout" in v}
    out.update(mqadmin.many(again, workers=1) if again else {})
    failed = {k: v[-800:] for k, v in out.items() if "success" not in v}
    assert not failed, f"mqadmin set-up failed: {failed}"


def dead_letter_problems(namesrv_addr: str, run_id: str, exactly_once: bool = True) -> list[str]:
    """What is wrong with the ``simple-dlq`` scenario's dead letter, read from the broker with
    the remoting admin client (the runner only sees the message stop coming): one in
    ``%DLQ%G-dlq-<run id>`` (``exactly_once=False``: copies of that one allowed, Apache
    RocketMQ's proxy may move it twice), its tag kept, and ``RETRY_TOPIC`` naming where it was
    stored when it died, the group's POP retry topic (as Apache RocketMQ 5.5 writes it)."""
    from gateway_native.client import Admin

    group, topic = f"G-dlq-{run_id}", f"grpc-dlq-{run_id}"
    with Admin(namesrv_addr) as admin:
        dead = admin.dlq_messages(group)
    if not dead or (exactly_once and len(dead) != 1) or len({d.msg_id for d in dead}) != 1:
        return [f"{len(dead)} dead letters in %DLQ%{group} ({sorted({d.msg_id for d in dead})}), expected 1"]
    d, problems = dead[0], []
    if d.tags != "TagX":
        problems.append(f"tag {d.tags!r}, expected 'TagX'")
    if d.properties.get("RETRY_TOPIC") != f"%RETRY%{group}_{topic}":
        problems.append(f"RETRY_TOPIC {d.properties.get('RETRY_TOPIC')!r}, expected %RETRY%{group}_{topic}")
    return problems


def build() -> None:
    java_runner.build(DIR)


def command(endpoint: str, run_id: str, scenarios: list[str], tls: bool, home: Path) -> list[str]:
    jar = java_runner.runnable(JAR)
    return ["java", "-Xmx256m", f"-Duser.home={home}", "-jar", str(jar), "--endpoint", endpoint, "--run-id", run_id,
            "--tls", str(tls).lower(), "--scenarios", ",".join(scenarios)]


def run(endpoint: str, run_id: str, scenarios: list[str], tls: bool, home: Path, timeout: float = 400) -> java_runner.RunResult:
    return java_runner.run(command(endpoint, run_id, scenarios, tls, home), timeout)


# The scenarios of one run in a few JVMs side by side: most of each scenario's time is waiting
# (long polls, invisible durations, check-back), so the run takes about as long as its longest
# group instead of the sum. Every scenario has its own topic and group, so they do not interfere.
SIDE_BY_SIDE = [["simple-dlq", "producer-normal", "producer-fifo"], ["push-tag", "producer-delay"], ["push-sql"],
                ["producer-recall", "simple-consumer", "producer-transaction"]]


def run_side_by_side(endpoint: str, run_id: str, tls: bool, home: Path, timeout: float = 400) -> java_runner.RunResult:
    """Every scenario, in the JVM groups of ``SIDE_BY_SIDE``, merged into one result."""
    assert sorted(s for group in SIDE_BY_SIDE for s in group) == sorted(SCENARIOS)
    commands = []
    for i, group in enumerate(SIDE_BY_SIDE):
        (home / f"jvm{i}").mkdir(parents=True, exist_ok=True)
        commands.append(command(endpoint, run_id, group, tls, home / f"jvm{i}"))
    return java_runner.run_side_by_side(commands, timeout)
