"""What every example shares: the connector jars and a SparkSession that uses them.

Invariants:
- the Kafka connector comes only from ``spark_examples/jars/`` (filled by ``build.sh`` from
  Maven Central, same version as the installed PySpark) and is handed to Spark with
  ``spark.jars``: a job never downloads anything (no ``spark.jars.packages``);
- a missing or mismatched jar set is reported with the command that fixes it, before any JVM
  is started, to a job that needs the Kafka connector; a job that only uses the ``rockafka``
  source runs without it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

JARS_DIR = Path(__file__).resolve().parent / "jars"
SOURCE_PKG = Path(__file__).resolve().parent / "rockafka_spark"  # the ``rockafka`` data source package


class ConnectorJarsMissing(RuntimeError):
    pass


def connector_jars() -> list[str]:
    """Absolute paths of the connector jars for the installed PySpark version."""
    import pyspark

    version = pyspark.__version__
    if not (JARS_DIR / f".complete-{version}").exists():
        raise ConnectorJarsMissing(
            f"Spark Kafka connector jars for PySpark {version} not found in {JARS_DIR}; "
            f"run: bash spark_examples/build.sh")
    return sorted(str(p) for p in JARS_DIR.glob("*.jar"))


def spark_session(app_name: str, master: str | None = None, conf: dict[str, str] | None = None,
                  kafka: bool = True):
    """A SparkSession with the Kafka connector on its class path (``kafka=False``: only when its
    jars are there; the ``rockafka`` source needs no jar)."""
    from pyspark.sql import SparkSession

    # Python workers (Python data sources, UDFs) run the driver's interpreter, not whatever
    # ``python3`` is first on PATH: the one that has pyspark, pyarrow and rockafka installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    _source_importable()
    try:
        jars = connector_jars()
    except ConnectorJarsMissing:
        if kafka:
            raise
        jars = []
    builder = SparkSession.builder.appName(app_name)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    builder = (builder
               # Small jobs on a small machine: Spark's default of 200 shuffle partitions turns
               # every stateful micro-batch into 200 tasks.
               .config("spark.sql.shuffle.partitions", os.environ.get("SPARK_SHUFFLE_PARTITIONS", "4"))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    master = master or os.environ.get("SPARK_MASTER", "local[2]")
    builder = builder.master(master)
    if master.startswith("local"):
        # Everything runs in this process: keep Spark's own RPC and block manager on loopback
        # instead of the first non-loopback interface it would otherwise pick.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # read when the JVM starts
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _source_importable() -> None:
    """From a checkout (``rockafka-spark`` not pip-installed), put the data source package on
    this process's path and on PYTHONPATH, which Spark's Python workers inherit when the JVM
    starts. An installed package wins."""
    try:
        import rockafka_spark
        installed = getattr(rockafka_spark, "__file__", None) is not None
    except ImportError:
        installed = False
    if not installed:
        # absent, or a script run as ``python spark_examples/x.py`` found the project directory
        # ``spark_examples/rockafka_spark`` (no __init__) as a namespace package: the package is inside
        sys.modules.pop("rockafka_spark", None)
        sys.path.insert(0, str(SOURCE_PKG))
        import rockafka_spark
    if not Path(rockafka_spark.__file__).resolve().is_relative_to(SOURCE_PKG):
        return  # installed: the workers import it the same way
    repo = str(SOURCE_PKG.parents[1])
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(SOURCE_PKG), repo, *paths]))


def rockafka_session(app_name: str, master: str | None = None, conf: dict[str, str] | None = None):
    """``spark_session`` with the ``rockafka`` format registered (and filter pushdown on); the
    Kafka connector jars are added when ``build.sh`` fetched them, and not needed otherwise."""
    spark = spark_session(app_name, master, conf, kafka=False)
    import rockafka_spark

    rockafka_spark.register(spark)
    return spark
