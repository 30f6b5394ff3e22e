"""Fixtures for the Spark end-to-end tests.

``node``: one real ``rockafka serve`` per test module on free loopback ports (the same
``RunningNode`` the rest of the suite uses; ``tests/conftest.py`` is not visible from here).
``rockafka_spark`` is made importable here (driver and Python workers).
``spark``: one local[2] SparkSession per test module with the stock Kafka connector jars from
``spark_examples/jars`` (``bash spark_examples/build.sh`` fills it; ``make test`` runs it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The ``rockafka`` data source is its own installable package (spark_examples/rockafka_spark);
# from a checkout it is put on the path of this process and, through PYTHONPATH, of the Python
# workers Spark starts (read when the JVM starts, so before any session exists).
_SOURCE_PKG = str(Path(__file__).resolve().parents[1] / "rockafka_spark")
if _SOURCE_PKG not in sys.path:
    sys.path.insert(0, _SOURCE_PKG)
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
_repo = str(Path(__file__).resolve().parents[2])
os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([_SOURCE_PKG, _repo, *_paths]))

from spark_examples.common import spark_session
from tests.support.node import RunningNode


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with RunningNode(tmp_path_factory.mktemp("node") / "data") as n:
        yield n


@pytest.fixture(scope="module")
def spark():
    session = spark_session("rockafka-spark-tests", "local[2]",
                            conf={"spark.sql.streaming.forceDeleteTempCheckpointLocation": "true"})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
