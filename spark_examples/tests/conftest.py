"""Fixtures for the Spark end-to-end tests.

``node``: one real ``rockafka serve`` per test module on free loopback ports (the same
``RunningNode`` the rest of the suite uses; ``tests/conftest.py`` is not visible from here).
``spark``: one local[2] SparkSession per test module with the stock Kafka connector jars from
``spark_examples/jars`` (``bash spark_examples/build.sh`` fills it; ``make test`` runs it).
"""

from __future__ import annotations

import pytest

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
