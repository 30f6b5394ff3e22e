"""Replication metrics, a Prometheus collector over ``MessageStore.ha.runtime_info()``.

Names (docs/design/replication.md): ``rockafka_ha_role{role}``, ``rockafka_ha_master_epoch``,
``rockafka_ha_truncated_bytes_total``; on a master ``rockafka_ha_in_sync_slaves`` and per slave
(labels ``slave`` = its address, ``broker_id``) ``rockafka_ha_slave_lag_bytes``,
``rockafka_ha_slave_lag_seconds``, ``rockafka_ha_slave_in_sync``; on a slave
``rockafka_ha_connected`` and ``rockafka_ha_slave_behind_bytes``.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class HACollector:
    """Read at scrape time; ``runtime_info`` only copies counters under the HA service's lock."""

    def __init__(self, store: Any):
        self.store = store

    def collect(self):
        info = self.store.ha.runtime_info()
        role = info["brokerRole"]
        g = GaugeMetricFamily("rockafka_ha_role", "This broker's role (1 for the role it has).", labels=["role"])
        g.add_metric([role], 1)
        yield g
        yield GaugeMetricFamily("rockafka_ha_master_epoch", "The newest master epoch in this store's epoch file.",
                                value=info["masterEpoch"])
        yield CounterMetricFamily("rockafka_ha_truncated_bytes", "Commitlog bytes a slave dropped to match its master.",
                                  value=info.get("truncatedBytes", 0))
        if role != "SLAVE":
            slaves = info.get("slaves") or []
            yield GaugeMetricFamily("rockafka_ha_in_sync_slaves", "Slaves in sync with this master.",
                                    value=info.get("inSyncSlaves", 0))
            labels = ["slave", "broker_id"]
            lag_b = GaugeMetricFamily("rockafka_ha_slave_lag_bytes", "Commitlog bytes a slave has not acknowledged.",
                                      labels=labels)
            lag_s = GaugeMetricFamily("rockafka_ha_slave_lag_seconds",
                                      "Time since a slave last had everything this master had.", labels=labels)
            in_sync = GaugeMetricFamily("rockafka_ha_slave_in_sync", "1 when the slave is in the in-sync set.",
                                        labels=labels)
            for sl in slaves:
                key = [sl["address"], str(sl["brokerId"])]
                lag_b.add_metric(key, sl["lagBytes"])
                lag_s.add_metric(key, sl["lagMs"] / 1000)
                in_sync.add_metric(key, 1 if sl["inSync"] else 0)
            yield from (lag_b, lag_s, in_sync)
        else:
            behind = info.get("behindBytes")
            yield GaugeMetricFamily("rockafka_ha_connected", "1 while this slave streams from its master.",
                                    value=1 if info.get("connected") else 0)
            yield GaugeMetricFamily("rockafka_ha_slave_behind_bytes",
                                    "Bytes the master has that this slave has not received yet (-1: unknown).",
                                    value=behind if behind is not None else -1)
