"""The examples run as the README says: one command each, against a running Rockafka.

generate_orders.py -> orders_stream.py --available-now -> batch_replay.py, each as its own
process (its own SparkSession and JVM): ``order_stats`` holds exactly the window stats
generate_orders.py printed as expected, and the Parquet snapshot has every one of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spark_examples.tests.helpers import consume

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(400)


def run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{args[0]} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


def test_readme_round(node, tmp_path):
    bootstrap = node.kafka_bootstrap
    generated = run("spark_examples/generate_orders.py", "--bootstrap", bootstrap,
                    "--count", "400", "--print-expected")
    expected = sorted((json.loads(line) for line in generated.stdout.splitlines()),
                      key=lambda s: (s["window_start_ms"], s["product"]))
    assert len(expected) > 50
    assert "produced 400 orders to orders" in generated.stderr

    run("spark_examples/orders_stream.py", "--bootstrap", bootstrap,
        "--checkpoint", str(tmp_path / "ckpt"), "--available-now")

    out = tmp_path / "order_stats.parquet"
    replayed = run("spark_examples/batch_replay.py", "--bootstrap", bootstrap,
                   "--topic", "order_stats", "--out", str(out))
    assert f"wrote {len(expected)} records of order_stats" in replayed.stdout

    assert len(list(out.glob("*.parquet"))) >= 1

    records = consume(bootstrap, "order_stats", until=lambda recs: len(recs) >= len(expected))
    got = sorted((json.loads(r.value()) for r in records),
                 key=lambda s: (s["window_start_ms"], s["product"]))
    assert got == expected
