"""The ``rockafka`` source beyond one machine's JVM: a Spark standalone cluster (a master and two
workers from the installed PySpark, executors in their own JVMs with their own Python workers),
the data source shipped as a zip with ``spark-submit --py-files`` (not on the workers' path), and
one pipeline — a write, then a read with the tag pushed to the broker — against a real node.
Every process the test starts is gone at the end.
"""

from __future__ import annotations

import json

import pytest

from spark_examples.tests.helpers import unique
from spark_examples.tests.standalone import REPO, StandaloneCluster, group_alive

pytestmark = pytest.mark.timeout(300)


def test_write_and_pushdown_read_on_a_standalone_cluster(node, tmp_path):
    from spark_examples import cluster_pipeline

    pkg = cluster_pipeline.build_zip(str(tmp_path / "rockafka_spark.zip"))
    topic = unique("cluster")
    cluster = StandaloneCluster(tmp_path / "spark")
    try:
        cluster.start()
        done = cluster.submit(str(REPO / "spark_examples" / "cluster_pipeline.py"), "--namesrv", node.namesrv_addr,
                              "--topic", topic, "--count", "500", "--tag", "T3", py_files=[pkg],
                              conf={"spark.scheduler.minRegisteredResourcesRatio": "1.0",
                                    "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s"})
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT "))[7:])
        assert result["bodies"] == sorted(f"m{i}" for i in range(500) if i % 10 == 3)
        assert any("T3" in line for line in result["pushed"]), result["pushed"]
        # the work ran in both executors (one Python daemon per executor JVM), with the shipped package
        executors = result["executors"]
        assert len({daemon for _, daemon, _ in executors}) == 2, executors
        assert all("rockafka_spark.zip" in src or "userFiles" in src for _, _, src in executors), executors
        assert all(not src.startswith(str(REPO)) for _, _, src in executors), executors
        apps = cluster.status().get("completedapps", []) + cluster.status().get("activeapps", [])
        assert any(a.get("name") == "rockafka-cluster-pipeline" for a in apps)
    finally:
        cluster.stop()
    assert [p.pid for p in cluster.procs if group_alive(p.pid)] == []
