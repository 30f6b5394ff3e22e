"""Rockafka installed as a user installs it: a built wheel and an sdist, each into a new virtual
environment, with no registry reachable (``pip --no-index``), then ``rockafka serve`` from that
environment on free ports until ``node_ready``, the gRPC front listening (its generated code is
shipped in the distribution), a message sent and read back.

Dependencies come from a local wheelhouse: each distribution of the dependency closure that the
test environment has installed, packed back into a wheel (a wheel is its installed files plus its
``.dist-info``). pip resolves the wheel's declared ``Requires-Dist`` against that directory alone,
so a dependency missing from pyproject.toml fails the install here.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.node import ROOT, RunningNode

PIP = [sys.executable, "-m", "pip"]


def _repack(dist: metadata.Distribution, out: Path) -> None:
    """Write ``dist`` (installed) back out as a wheel in ``out``."""
    wheel_meta = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:")]
    name = canonicalize_name(dist.metadata["Name"]).replace("-", "_")
    info_dir = next(str(f).split("/")[0] for f in dist.files if str(f).split("/")[0].endswith(".dist-info"))
    parts = [sorted({t.split("-")[i] for t in tags}) for i in range(3)] if tags else [["py3"], ["none"], ["any"]]
    target = out / f"{name}-{dist.version}-{'-'.join('.'.join(p) for p in parts)}.whl"
    records = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zf:
        for f in dist.files:
            path = str(f)
            if (path.startswith("..") or "__pycache__" in path or path.endswith(".pyc")
                    or path in (f"{info_dir}/RECORD", f"{info_dir}/INSTALLER", f"{info_dir}/REQUESTED",
                                f"{info_dir}/direct_url.json")):
                continue
            source = Path(dist.locate_file(f))
            if not source.is_file():
                continue
            data = source.read_bytes()
            zf.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append((path, f"sha256={digest}", str(len(data))))
        text = io.StringIO()
        csv.writer(text).writerows(records + [(f"{info_dir}/RECORD", "", "")])
        zf.writestr(f"{info_dir}/RECORD", text.getvalue())


def _closure(requirements: list[str]) -> dict[str, metadata.Distribution]:
    found: dict[str, metadata.Distribution] = {}
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = canonicalize_name(req.name)
        if key in found:
            continue
        found[key] = dist = metadata.distribution(req.name)
        todo += [Requirement(r) for r in dist.requires or ()]
    return found


def _requires_dist(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().splitlines()
    return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The wheel, the sdist (from a copy of the committed tree, as a fresh clone has it) and a
    wheelhouse of their dependencies and of the build backend."""
    base = tmp_path_factory.mktemp("package")
    clone = base / "clone"
    subprocess.run(["git", "clone", "--quiet", "--local", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    # the working tree as committed plus what is staged or changed (the code under test)
    diff = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=ROOT, capture_output=True, check=True).stdout
    untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split()
    if diff:
        subprocess.run(["git", "apply", "--binary", "-"], cwd=clone, input=diff, check=True)
    for rel in untracked:
        (clone / rel).parent.mkdir(parents=True, exist_ok=True)
        (clone / rel).write_bytes((ROOT / rel).read_bytes())
    dist = base / "dist"
    subprocess.run(PIP + ["wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist),
                          str(clone)], check=True, cwd=base)
    subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(dist)!r})"],
                   check=True, cwd=clone, capture_output=True)
    wheel = next(dist.glob("rockafka-*.whl"))
    sdist = next(dist.glob("rockafka-*.tar.gz"))
    house = base / "wheelhouse"
    house.mkdir()
    for d in _closure(_requires_dist(wheel) + ["setuptools"]).values():
        _repack(d, house)
    return {"wheel": wheel, "sdist": sdist, "wheelhouse": house, "base": base}


def test_sdist_carries_the_generated_grpc_code_and_the_console(built):
    with tarfile.open(built["sdist"]) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    for rel in ("gateway_grpc/proto/service_pb2.py", "gateway_grpc/proto/service_pb2_grpc.py",
                "gateway_grpc/proto/definition_pb2.py", "rockafka/console/templates/base.html",
                "engine/_recordwalk.c", "gateway_native/remoting/_framecodec.c", "pyproject.toml", "setup.py"):
        assert rel in names, rel


@pytest.mark.parametrize("artifact", ["wheel", "sdist"])
def test_installed_package_serves_every_protocol_without_a_registry(built, artifact, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_FIND_LINKS", "PIP_INDEX_URL")}
    env["PIP_NO_CACHE_DIR"] = "1"
    install = subprocess.run(PIP + ["--python", str(python), "install", "--quiet", "--no-index", "--find-links",
                                    str(built["wheelhouse"]), str(built[artifact])],
                             capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    where = subprocess.run([str(python), "-c", "import gateway_grpc.proto.service_pb2_grpc as m, rockafka; "
                                               "print(m.__file__); print(rockafka.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(venv)) for line in where.stdout.split()), where.stdout

    node = RunningNode(tmp_path / "data")
    node.args = lambda: ["env", "-u", "PYTHONPATH", f"--chdir={tmp_path}", str(venv / "bin" / "rockafka"), "serve",
                         "--host", "127.0.0.1", "--data-dir", str(node.data_dir),
                         "--kafka-port", str(node.kafka_port), "--namesrv-port", str(node.namesrv_port),
                         "--broker-port", str(node.broker_port), "--ha-port", str(node.ha_port),
                         "--admin-port", str(node.admin_port), "--grpc-port", str(node.grpc_port)]
    with node:
        log = node.log_tail(10**6)
        assert "grpc_listening" in log and "grpc_proxy_disabled" not in log, log[-3000:]
        admin = [str(venv / "bin" / "rockafka"), "admin", "--namesrv", node.namesrv_addr]
        sent = subprocess.run(admin + ["messages", "send", "installed", "hello from the " + artifact, "--key", "k1"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
        assert sent.returncode == 0, sent.stdout + sent.stderr
        deadline = time.monotonic() + 30
        while True:
            got = subprocess.run(admin + ["messages", "query", "installed", "--key", "k1"],
                                 capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
            if "hello from the " + artifact in got.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "hello from the " + artifact in got.stdout, got.stdout + got.stderr
        # the shipped gRPC code serves: a route for the topic over the RocketMQ 5 front
        import grpc

        from gateway_grpc.proto import definition_pb2, service_pb2, service_pb2_grpc

        with grpc.insecure_channel(node.grpc_endpoint) as channel:
            route = service_pb2_grpc.MessagingServiceStub(channel).QueryRoute(service_pb2.QueryRouteRequest(
                topic=definition_pb2.Resource(name="installed"), endpoints=definition_pb2.Endpoints(
                    addresses=[definition_pb2.Address(host="127.0.0.1", port=node.grpc_port)])), timeout=10)
        assert route.status.code == definition_pb2.Code.OK and route.message_queues
        assert node.stop() == 0
    assert not (node.data_dir / "abort").exists()
