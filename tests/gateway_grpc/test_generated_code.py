"""The gRPC code shipped in ``gateway_grpc/proto`` is what ``make grpc`` generates from the pinned
RocketMQ client, and pyproject.toml demands at least the grpcio and protobuf versions that code
checks at import (an install with older ones would fail at ``rockafka serve``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from gateway_grpc import build_proto

ROOT = Path(__file__).resolve().parents[2]


def test_committed_code_equals_a_fresh_generation(tmp_path):
    out = build_proto.build(tmp_path / "proto")
    fresh = {p.name: p.read_text() for p in out.glob("*.py")}
    shipped = {p.name: p.read_text() for p in build_proto.OUT_DIR.glob("*.py")}
    assert sorted(fresh) == sorted(shipped)
    for name, text in fresh.items():
        assert shipped[name] == text, f"gateway_grpc/proto/{name} differs from a fresh `make grpc`"


def test_dependency_floors_cover_what_the_generated_code_checks():
    deps = {Requirement(d).name: Requirement(d) for d in
            tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    proto_dir = build_proto.OUT_DIR
    grpc_needed = re.search(r"GRPC_GENERATED_VERSION = '([\d.]+)'", (proto_dir / "service_pb2_grpc.py").read_text())
    pb_needed = re.search(r"# Protobuf Python Version: ([\d.]+)", (proto_dir / "service_pb2.py").read_text())
    assert grpc_needed and pb_needed
    for dist, needed in (("grpcio", grpc_needed[1]), ("protobuf", pb_needed[1])):
        floors = [Version(s.version) for s in deps[dist].specifier if s.operator == ">="]
        assert floors and floors[0] >= Version(needed), (dist, needed, str(deps[dist].specifier))
