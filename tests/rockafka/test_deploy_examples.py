"""The examples in deploy/ are usable as shipped: every broker.conf loads (no unknown key, no
bad value), the Prometheus scrape config passes ``promtool check config``, and every metric the
Grafana dashboard queries is one a node exposes."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest

from engine.config import load_node_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


# the NameServers' files are checked with the cluster files (tests/rockafka/test_deploy_cluster_files.py)
@pytest.mark.parametrize("conf", sorted(p for p in (DEPLOY / "config").glob("*.conf") if not p.name.startswith("namesrv")),
                         ids=lambda p: p.name)
def test_config_example_loads(conf):
    cfg = load_node_config(str(conf))
    assert cfg.broker.broker_name == "broker-a" and cfg.data_dir == "/var/lib/rockafka"


def test_prometheus_scrape_config_is_valid():
    out = subprocess.run(["promtool", "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_grafana_dashboard_queries_metrics_a_node_exposes(node):
    with urllib.request.urlopen(node.admin_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    families = set(re.findall(r"^# TYPE (\S+) (\w+)", text, re.M))
    exposed = set()
    for name, kind in families:
        exposed.add(name)
        if kind == "counter":
            exposed.add(name + "_total")
        if kind == "histogram":
            exposed.update({name + "_bucket", name + "_sum", name + "_count"})
    dash = json.loads((DEPLOY / "grafana" / "rockafka-dashboard.json").read_text())
    used = {m for p in dash["panels"] for t in p["targets"]
            for m in re.findall(r"\b((?:rockafka|process)_[a-z_]+)\b", t["expr"])}
    assert len(used) >= 15
    assert sorted(used - exposed) == []
