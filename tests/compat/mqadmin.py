"""Run Apache RocketMQ's ``mqadmin`` (rocketmq-tools from Maven Central, resolved into
``compat/rocketmq-tools/lib`` by its ``build.sh``) against a NameServer, as an operator does."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.compat.java_runner import ROOT

TOOLS_DIR = ROOT / "compat" / "rocketmq-tools"
# mqadmin's MQAdminStartup, through a launcher that ends the JVM once the command is done instead
# of waiting ~6 s for its client's remoting threads (compat/rocketmq-tools/src)
MQADMIN_MAIN = "rockafka.compat.tools.MQAdminMain"


class MQAdmin:
    """Runs ``mqadmin`` as an operator does, one process per command; independent commands can
    run side by side (``many``)."""

    def __init__(self, namesrv: str, home: Path):
        self.namesrv = namesrv
        self.home = home

    def many(self, commands: dict[str, list[str]], workers: int = 4) -> dict[str, str]:
        """Run independent commands side by side, at most one JVM per core: mqadmin's client
        gives a request 3 s including its own channel set-up, and more JVMs starting than cores
        (seven on two, beside a server) starved each other past it while the server answered a
        probe within 0.6 s."""
        workers = max(1, min(workers, os.cpu_count() or 1))
        with ThreadPoolExecutor(workers) as pool:
            futures = {name: pool.submit(self, *args) for name, args in commands.items()}
            return {name: f.result() for name, f in futures.items()}

    def __call__(self, *args: str, timeout: float = 60) -> str:
        cmd = ["java", "-Xmx192m", "-XX:TieredStopAtLevel=1", f"-Duser.home={self.home}",
               "-cp", f"{TOOLS_DIR / 'classes'}:{TOOLS_DIR / 'lib' / '*'}", MQADMIN_MAIN, *args, "-n", self.namesrv]
        # cwd: consumerStatus writes each client's running info to <timestamp>/<clientId> there
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.home)
        return proc.stdout + proc.stderr

    @classmethod
    def built(cls, namesrv: str, home: Path) -> "MQAdmin":
        """Resolve the tools (no network once ~/.m2 has them) and return a runner."""
        if subprocess.run(["bash", str(TOOLS_DIR / "build.sh")]).returncode != 0:
            pytest.fail("compat/rocketmq-tools/build.sh could not resolve rocketmq-tools (run `make test-deps`)")
        return cls(namesrv, home)
