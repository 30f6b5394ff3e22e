"""``rockafka`` for PySpark: read, stream and write Rockafka topics with Spark's Python Data
Source API, over the RocketMQ remoting protocol (the project's SDK), with tag, SQL92, key,
store-time and queue pushdown.

    import rockafka_spark
    rockafka_spark.register(spark)
    df = (spark.read.format("rockafka").option("namesrv", "127.0.0.1:9876").option("topic", "orders")
          .load().where("tags IN ('paid', 'refunded')"))

Filter pushdown needs Spark >= 4.1 with ``spark.sql.python.filterPushdown.enabled=true``
(``register`` sets it); ``explain()`` lists the accepted filters under ``PushedFilters``.
Options and columns: ``schema.py``; reads: ``reader.py``; writes: ``writer.py``; what is pushed
and why it stays exact: ``pushdown.py``.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from .schema import Options, OptionError, schema

__all__ = ["RockafkaDataSource", "register", "Options", "OptionError"]


class RockafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rockafka"

    def _options(self, need_topic: bool = True) -> Options:
        return Options.parse(dict(self.options), need_topic)

    def schema(self):
        return schema(self._options(need_topic=False).prop_fields)

    def reader(self, schema):
        from .reader import RockafkaReader
        return RockafkaReader(self._options())

    def streamReader(self, schema):  # noqa: N802 - Spark's name
        from .reader import RockafkaStreamReader
        return RockafkaStreamReader(self._options())

    def writer(self, schema, overwrite: bool):
        from .writer import RockafkaWriter
        if overwrite:
            raise OptionError("a topic is an append-only log: use mode('append')")
        return RockafkaWriter(self._options(need_topic=False))

    def streamWriter(self, schema, overwrite: bool):  # noqa: N802
        from .writer import RockafkaStreamWriter
        return RockafkaStreamWriter(self._options(need_topic=False))


def register(spark) -> None:
    """Register the ``rockafka`` format with ``spark`` and turn on Python filter pushdown."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(RockafkaDataSource)
