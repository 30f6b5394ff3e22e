"""Replication metrics in the Prometheus text format, from ``MessageStore.ha.runtime_info()``.

Names (docs/design/replication.md): ``rockafka_ha_role{role}``, ``rockafka_ha_master_epoch``,
``rockafka_ha_truncated_bytes_total``; on a master ``rockafka_ha_in_sync_slaves`` and per slave
(labels ``slave`` = its address, ``broker_id``) ``rockafka_ha_slave_lag_bytes``,
``rockafka_ha_slave_lag_seconds``, ``rockafka_ha_slave_in_sync``; on a slave
``rockafka_ha_connected`` and ``rockafka_ha_slave_behind_bytes``.
"""

from __future__ import annotations

from typing import Any


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def ha_metric_lines(info: dict[str, Any]) -> list[str]:
    """Replication metrics from ``MessageStore.ha.runtime_info()`` (docs/design/replication.md)."""
    role = info["brokerRole"]
    out = ["# HELP rockafka_ha_role This broker's role (1 for the role it has).",
           "# TYPE rockafka_ha_role gauge",
           f'rockafka_ha_role{{role="{role}"}} 1',
           "# HELP rockafka_ha_master_epoch The newest master epoch in this store's epoch file.",
           "# TYPE rockafka_ha_master_epoch gauge",
           f"rockafka_ha_master_epoch {info['masterEpoch']}",
           "# HELP rockafka_ha_truncated_bytes_total Commitlog bytes a slave dropped to match its master.",
           "# TYPE rockafka_ha_truncated_bytes_total counter",
           f"rockafka_ha_truncated_bytes_total {info.get('truncatedBytes', 0)}"]
    if role != "SLAVE":
        slaves = info.get("slaves") or []
        out += ["# HELP rockafka_ha_in_sync_slaves Slaves in sync with this master.",
                "# TYPE rockafka_ha_in_sync_slaves gauge",
                f"rockafka_ha_in_sync_slaves {info.get('inSyncSlaves', 0)}",
                "# HELP rockafka_ha_slave_lag_bytes Commitlog bytes a slave has not acknowledged.",
                "# TYPE rockafka_ha_slave_lag_bytes gauge"]
        out += [f'rockafka_ha_slave_lag_bytes{{slave="{_esc(sl["address"])}",broker_id="{sl["brokerId"]}"}} {sl["lagBytes"]}'
                for sl in slaves]
        out += ["# HELP rockafka_ha_slave_lag_seconds Time since a slave last had everything this master had.",
                "# TYPE rockafka_ha_slave_lag_seconds gauge"]
        out += [f'rockafka_ha_slave_lag_seconds{{slave="{_esc(sl["address"])}",broker_id="{sl["brokerId"]}"}} '
                f'{sl["lagMs"] / 1000:.3f}' for sl in slaves]
        out += ["# HELP rockafka_ha_slave_in_sync 1 when the slave is in the in-sync set.",
                "# TYPE rockafka_ha_slave_in_sync gauge"]
        out += [f'rockafka_ha_slave_in_sync{{slave="{_esc(sl["address"])}",broker_id="{sl["brokerId"]}"}} '
                f'{1 if sl["inSync"] else 0}' for sl in slaves]
    else:
        behind = info.get("behindBytes")
        out += ["# HELP rockafka_ha_connected 1 while this slave streams from its master.",
                "# TYPE rockafka_ha_connected gauge",
                f"rockafka_ha_connected {1 if info.get('connected') else 0}",
                "# HELP rockafka_ha_slave_behind_bytes Bytes the master has that this slave has not received yet.",
                "# TYPE rockafka_ha_slave_behind_bytes gauge",
                f"rockafka_ha_slave_behind_bytes {behind if behind is not None else -1}"]
    return out
