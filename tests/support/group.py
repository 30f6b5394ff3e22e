"""A real broker group on loopback: a standalone NameServer, a master and its slaves, each a
``rockafka serve`` child process on its own free ports and data directory.

``BrokerGroup.start()`` returns once every slave streams from the master and is in its in-sync
set (read from the master's admin API, bounded). Nodes can be stopped, killed (SIGKILL of the
process group) and started again on the same ports and data, so the seed's HA scenarios run
against the real entry point.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.node import RunningNode, StandaloneNamesrv

# fast enough for tests, RocketMQ's meaning otherwise
TEST_SETTINGS = {"registerNameServerPeriod": 1000, "haSendHeartbeatInterval": 1000,
                 "haHousekeepingInterval": 10000, "haSyncMetadataInterval": 200,
                 "cluster_view_refresh_ms": 300}


def http_json(url: str, timeout: float = 5.0, auth: tuple[str, str] | None = None) -> Any:
    """GET ``url`` as JSON (with Basic ``auth`` = (user, password) for a secured node)."""
    req = urllib.request.Request(url)
    if auth is not None:
        import base64

        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_until(cond, timeout: float = 60.0, interval: float = 0.05, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except OSError:
            last = None
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class BrokerGroup:
    def __init__(self, tmp_path: Path, *, role: str = "SYNC_MASTER", slaves: int = 1, name: str = "broker-a",
                 settings: dict[str, object] | None = None, slave_settings: dict[str, object] | None = None,
                 master_settings: dict[str, object] | None = None, admin_auth: tuple[str, str] | None = None,
                 namesrv_settings: dict[str, object] | None = None):
        self.tmp_path = Path(tmp_path)
        self.namesrv_settings = namesrv_settings
        self.admin_auth = admin_auth
        self.namesrv: StandaloneNamesrv | None = None
        common = dict(TEST_SETTINGS, brokerName=name, **(settings or {}))
        self.master = RunningNode(self.tmp_path / f"{name}-master", settings=dict(common, brokerRole=role,
                                                                                   **(master_settings or {})))
        self.slaves = [RunningNode(self.tmp_path / f"{name}-slave{i}",
                                   settings=dict(common, brokerRole="SLAVE", brokerId=i, **(slave_settings or {})))
                       for i in range(1, slaves + 1)]

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.addr

    def nodes(self) -> list[RunningNode]:
        return [self.master, *self.slaves]

    def start(self, wait_in_sync: bool = True) -> "BrokerGroup":
        self.namesrv = StandaloneNamesrv(self.tmp_path, settings=self.namesrv_settings)
        for n in self.nodes():
            n.settings["namesrvAddr"] = self.namesrv.addr
        self.master.start()
        for s in self.slaves:
            s.start()
        if wait_in_sync:
            self.wait_in_sync()
        return self

    def ha(self, node: RunningNode) -> dict[str, Any]:
        return http_json(f"{node.admin_url}/api/ha", auth=self.admin_auth)

    def wait_in_sync(self, count: int | None = None, timeout: float = 60.0) -> None:
        want = len(self.slaves) if count is None else count
        wait_until(lambda: self.ha(self.master).get("inSyncSlaves") == want, timeout,
                   what=f"{want} slave(s) in sync with the master")

    def wait_caught_up(self, slave: RunningNode, timeout: float = 60.0) -> None:
        def caught() -> bool:
            m, s = self.ha(self.master), self.ha(slave)
            return s.get("connected") and s["commitLogMaxOffset"] == m["commitLogMaxOffset"]
        wait_until(caught, timeout, what=f"{slave.data_dir.name} caught up with the master")

    def stop(self) -> None:
        for n in reversed(self.nodes()):
            try:
                n.stop()
            except Exception:
                n.kill()
        if self.namesrv is not None:
            self.namesrv.stop()

    def __enter__(self) -> "BrokerGroup":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def commitlog_bytes(data_dir: Path, offset: int, size: int, segment_size: int = 1 << 30) -> bytes:
    """Bytes of a stopped or killed node's commitlog, read from its segment files."""
    out = bytearray()
    while size > 0:
        start = offset - offset % segment_size
        path = Path(data_dir) / "commitlog" / f"{start:020d}"
        pos = offset - start
        n = min(size, segment_size - pos)
        with open(path, "rb") as f:
            f.seek(pos)
            chunk = f.read(n)
        if len(chunk) != n:
            raise AssertionError(f"{path} holds {len(chunk)} bytes at {pos}, {n} expected")
        out += chunk
        offset += n
        size -= n
    return bytes(out)
