"""The dependency arrows point one way: gateways -> engine, rockafka (app) -> everything.

Walks every module's imports (absolute and relative) with ``ast`` and fails on a wrong arrow:
``engine`` importing a gateway or the app, one gateway importing the other, or anything
importing the app package.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "gateway_kafka", "gateway_native", "gateway_grpc", "rockafka")
FORBIDDEN = {
    "engine": {"gateway_kafka", "gateway_native", "gateway_grpc", "rockafka"},
    "gateway_kafka": {"gateway_native", "gateway_grpc", "rockafka"},
    "gateway_native": {"gateway_kafka", "gateway_grpc", "rockafka"},
    "gateway_grpc": {"gateway_kafka", "gateway_native", "rockafka"},
    "rockafka": set(),
}


def imported_top_levels(path: Path, package: str) -> set[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[tuple[str, int]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add((alias.name.split(".")[0], node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import stays inside its own package
                found.add((package, node.lineno))
            elif node.module:
                found.add((node.module.split(".")[0], node.lineno))
    return found


def violations(root: Path = ROOT) -> list[str]:
    bad = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for top, lineno in imported_top_levels(path, package):
                if top in FORBIDDEN[package]:
                    bad.append(f"{path.relative_to(root)}:{lineno} imports {top}")
    return bad


def test_no_wrong_arrows():
    assert violations() == []


def test_checker_catches_a_wrong_arrow(tmp_path):
    (tmp_path / "engine").mkdir()
    for p in PACKAGES[1:]:
        (tmp_path / p).mkdir()
    (tmp_path / "engine" / "bad.py").write_text("from gateway_kafka import server\n")
    (tmp_path / "gateway_kafka" / "bad.py").write_text("import gateway_native.remoting\n")
    (tmp_path / "gateway_native" / "ok.py").write_text("from engine import store\nfrom . import x\n")
    assert sorted(violations(tmp_path)) == [
        "engine/bad.py:1 imports gateway_kafka",
        "gateway_kafka/bad.py:1 imports gateway_native",
    ]


# The SDK (gateway_native/client/) is a client: it may use the wire layer (remoting/ and the
# connection, transport.py), its own modules and the engine's neutral helpers, never the
# server side (namesrv, broker, dispatch, processors, subscription's filter).
SDK_DIR = ("gateway_native", "client")
SDK_ALLOWED = {"remoting", "transport", "client"}


def sdk_violations(root: Path = ROOT) -> list[str]:
    bad = []
    for path in sorted(root.joinpath(*SDK_DIR).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 2:  # from ..x import y
                target = (node.module or "").split(".")[0]
                names = [target] if target else [a.name for a in node.names]
                for name in names:
                    if name not in SDK_ALLOWED:
                        bad.append(f"{path.relative_to(root)}:{node.lineno} imports gateway_native.{name}")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("gateway_native."):
                part = node.module.split(".")[1]
                if part not in SDK_ALLOWED:
                    bad.append(f"{path.relative_to(root)}:{node.lineno} imports {node.module}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == "gateway_native" and len(parts) > 1 and parts[1] not in SDK_ALLOWED:
                        bad.append(f"{path.relative_to(root)}:{node.lineno} imports {alias.name}")
    return bad


def test_sdk_depends_on_the_wire_layer_only():
    assert sdk_violations() == []


def test_sdk_checker_catches_a_server_import(tmp_path):
    sdk = tmp_path / "gateway_native" / "client"
    sdk.mkdir(parents=True)
    (sdk / "bad.py").write_text("from ..namesrv import decode_route_json\nfrom ..remoting.route import x\n"
                                "from gateway_native.dispatch import ProcessorTable\nfrom .runtime import y\n")
    assert sdk_violations(tmp_path) == [
        "gateway_native/client/bad.py:1 imports gateway_native.namesrv",
        "gateway_native/client/bad.py:3 imports gateway_native.dispatch",
    ]
