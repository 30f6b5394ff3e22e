"""A streaming query whose driver is SIGKILLed in the middle of a micro-batch, restarted by a new
process from the same checkpoint, writes every matching message to its file sink exactly once.

The job runs in a child process (``stream_job.py``) in its own process group, so SIGKILL takes
the Python driver, its JVM and the Python workers at once, as a crashed or OOM-killed driver
would go. The kill comes while a task of a batch is running (the task announces it through a
marker file), so that batch has its offsets logged and no commit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_examples.tests.helpers import unique

pytestmark = pytest.mark.timeout(400)

REPO = Path(__file__).resolve().parents[2]


def run_job(node, topic, group, tmp_path, *extra):
    return subprocess.Popen(
        [sys.executable, "-m", "spark_examples.tests.stream_job", node.namesrv_addr, topic, group,
         str(tmp_path / "out"), str(tmp_path / "ckpt"), *extra],
        cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_driver_killed_mid_batch_restarts_without_loss_or_duplicates(spark, node, tmp_path):
    from gateway_native.client import Admin, Message, Producer

    import rockafka_spark

    rockafka_spark.register(spark)
    name, group = unique("kill"), unique("kg")
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(name, 2)
    p = Producer(unique("pg"), node.namesrv_addr).start()
    try:
        for i in range(60):
            p.send(Message(name, f"s{i}".encode(), tags="keep" if i % 2 == 0 else "drop"))

        marker = tmp_path / "in-batch"
        job = run_job(node, name, group, tmp_path, "s40", str(marker))
        try:
            deadline = time.monotonic() + 180
            while not marker.exists() and job.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert marker.exists(), f"the job never reached s40: {job.stderr.read().decode()[-2000:] if job.poll() is not None else 'timeout'}"
        finally:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
            job.stderr.close()
        assert job.returncode == -signal.SIGKILL

        # killed mid-batch: the last planned batch is in the offsets log with no commit
        planned = {int(f) for f in os.listdir(tmp_path / "ckpt" / "offsets") if f.isdigit()}
        committed = {int(f) for f in os.listdir(tmp_path / "ckpt" / "commits") if f.isdigit()}
        assert max(planned) not in committed

        for i in range(60, 80):
            p.send(Message(name, f"s{i}".encode(), tags="keep" if i % 2 == 0 else "drop"))
    finally:
        p.shutdown()

    job = run_job(node, name, group, tmp_path)
    try:
        _, err = job.communicate(timeout=240)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
    assert job.returncode == 0, err.decode()[-3000:]

    rows = spark.read.parquet(str(tmp_path / "out"))  # the sink's log says which files count
    counts = {r.body: r["count"] for r in rows.groupBy("body").count().collect()}
    assert sorted(counts) == sorted(f"s{i}" for i in range(0, 80, 2))   # nothing lost
    assert set(counts.values()) == {1}                                   # nothing twice
