"""A Spark standalone cluster on loopback for tests: one master and N workers started from the
installed PySpark (``bin/spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``),
each its own JVM in its own process group, on free ports, with its logs and work directory under
``root``. Executors are JVMs the workers start, with their own Python workers.

``start()`` returns once the master's JSON status lists every worker ALIVE (bounded).
``stop()`` ends every process group it started (SIGTERM, then SIGKILL after a bounded wait), so
workers take their executors with them. ``submit()`` runs ``spark-submit`` against it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark

from tests.support.node import free_port

SPARK_HOME = Path(pyspark.__file__).resolve().parent
REPO = Path(__file__).resolve().parents[2]


def cluster_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every process: loopback only, this interpreter for Python workers, and
    the project's SDK (the repository root) on PYTHONPATH — but not the data source package,
    which jobs must ship themselves."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONPATH=str(REPO))
    env.update(extra or {})
    return env


class StandaloneCluster:
    def __init__(self, root: Path, workers: int = 2, worker_cores: int = 1, worker_memory: str = "1g"):
        self.root = Path(root)
        self.workers = workers
        self.worker_cores, self.worker_memory = worker_cores, worker_memory
        self.port, self.ui_port = free_port(), free_port()
        self.procs: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "wb")
        p = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=log, stderr=subprocess.STDOUT,
                             env=cluster_env({"SPARK_LOG_DIR": str(self.root)}), cwd=self.root,
                             start_new_session=True)
        log.close()
        self.procs.append(p)
        return p

    def status(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json", timeout=5) as r:
            return json.loads(r.read())

    def start(self, timeout: float = 90.0) -> "StandaloneCluster":
        self.root.mkdir(parents=True, exist_ok=True)
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for i in range(self.workers):
            work = self.root / f"worker{i}"
            work.mkdir(exist_ok=True)
            self._spawn(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--port", str(free_port()), "--webui-port", str(free_port()),
                        "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                        "--work-dir", str(work), self.url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a cluster process exited ({dead[0].args[1]}); logs in {self.root}")
            try:
                status = self.status()
                alive = [w for w in status.get("workers", []) if w.get("state") == "ALIVE"]
                if status.get("url") == self.url and len(alive) == self.workers:
                    return self
            except OSError:  # the master's UI is not listening yet
                pass
            except ValueError:
                # not JSON: something else answered on the UI port before the master bound it
                # (another Spark UI of a test running beside this one, given the same free port)
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.workers} workers not ALIVE within {timeout}s; logs in {self.root}")

    def submit(self, script: str, *args: str, py_files: list[str] = (), conf: dict[str, str] | None = None,
               timeout: float = 240.0) -> subprocess.CompletedProcess:
        confs = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                 "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": str(self.workers),
                 "spark.pyspark.python": sys.executable, "spark.ui.enabled": "false",
                 "spark.sql.shuffle.partitions": "4", **(conf or {})}
        cmd = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", self.url]
        for k, v in confs.items():
            cmd += ["--conf", f"{k}={v}"]
        if py_files:
            cmd += ["--py-files", ",".join(py_files)]
        cmd += [script, *args]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cluster_env(),
                             cwd=self.root, start_new_session=True)
        self.procs.append(p)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end(p)
            out, err = p.communicate()
        return subprocess.CompletedProcess(cmd, p.returncode, out.decode(errors="replace"), err.decode(errors="replace"))

    def stop(self) -> None:
        for p in reversed(self.procs):
            _end(p)

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _end(p: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM the process group of ``p`` (a worker's executors and their Python workers are in
    it), SIGKILL what is left after ``grace`` seconds."""
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        p.poll()
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        p.poll()  # reap the leader, so a zombie does not keep the group alive
        if not group_alive(p.pid):
            return
        time.sleep(0.1)
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(timeout=10)
