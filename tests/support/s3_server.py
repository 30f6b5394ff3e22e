"""A real S3-compatible server for tests: s3proxy (filesystem backend) on a loopback port.

The jar is installed by deploy/dev/install-object-store.sh (called from
deploy/dev/install-test-deps.sh) into $ROCKAFKA_TOOLS/lib. ``S3Server`` starts it as a child
process with its own data directory, waits (bounded) until it answers HTTP, can be stopped and
started again on the same port and data (the "store down for a while" faults), and always
ends the process it started. Buckets are directories under the data directory.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import time

from tests.support.node import free_port

S3PROXY_VERSION = os.environ.get("S3PROXY_VERSION", "2.6.0")
ACCESS_KEY = "rockafka"
SECRET_KEY = "rockafka-test-secret"


def s3proxy_jar() -> pathlib.Path:
    tools = pathlib.Path(os.environ.get("ROCKAFKA_TOOLS", pathlib.Path.home() / ".cache/rockafka"))
    return tools / "lib" / f"s3proxy-{S3PROXY_VERSION}.jar"


class S3Server:
    def __init__(self, root: pathlib.Path, *, port: int | None = None):
        self.root = pathlib.Path(root)
        self.data = self.root / "data"
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def make_bucket(self, name: str) -> str:
        (self.data / name).mkdir(parents=True, exist_ok=True)
        return name

    def start(self, *, timeout_s: float = 60.0) -> "S3Server":
        jar = s3proxy_jar()
        if not jar.is_file():
            raise RuntimeError(f"{jar} is missing: run deploy/dev/install-object-store.sh")
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java is missing: run deploy/dev/install-test-deps.sh")
        self.data.mkdir(parents=True, exist_ok=True)
        conf = self.root / "s3proxy.conf"
        conf.write_text(
            f"s3proxy.endpoint={self.endpoint}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={ACCESS_KEY}\n"
            f"s3proxy.credential={SECRET_KEY}\n"
            # obstore's multi-object delete sends checksum headers s3proxy does not model
            "s3proxy.ignore-unknown-headers=true\n"
            "jclouds.provider=filesystem\n"
            f"jclouds.filesystem.basedir={self.data}\n")
        log = open(self.root / "s3proxy.log", "ab")
        self.proc = subprocess.Popen(
            [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-jar", str(jar),
             "--properties", str(conf)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"s3proxy exited {self.proc.returncode}: "
                                   f"{(self.root / 's3proxy.log').read_text()[-2000:]}")
            if self._answers():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"s3proxy did not answer on {self.endpoint} within {timeout_s}s")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                return sock.recv(12).startswith(b"HTTP/1.")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.proc = None

    def __enter__(self) -> "S3Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
