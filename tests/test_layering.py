"""The dependency arrows point one way: rockafka (app) -> gateway_* -> broker (core) -> engine.

Walks every module's imports (absolute and relative) with ``ast`` and fails on a wrong arrow:
``engine`` importing the broker core, a gateway or the app; the broker core importing a gateway
or the app; one gateway importing another; or anything importing the app package. A second walk
fails when a gateway reaches past the facades into the store's parts (``store.commitlog``,
``store.dispatcher``, ``store.ha``): it asks ``broker.store_view`` / ``broker.replication``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "broker", "gateway_kafka", "gateway_native", "gateway_grpc", "rockafka")
FORBIDDEN = {
    "engine": {"broker", "gateway_kafka", "gateway_native", "gateway_grpc", "rockafka"},
    "broker": {"gateway_kafka", "gateway_native", "gateway_grpc", "rockafka"},
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
    (tmp_path / "engine" / "bad.py").write_text("from gateway_kafka import server\nimport broker.put_path\n")
    (tmp_path / "broker" / "bad.py").write_text("from gateway_grpc.server import GrpcGateway\nfrom engine import store\n")
    (tmp_path / "gateway_kafka" / "bad.py").write_text("import gateway_native.remoting\n")
    (tmp_path / "gateway_native" / "ok.py").write_text("from engine import store\nfrom broker import topics\n"
                                                      "from . import x\n")
    assert sorted(violations(tmp_path)) == [
        "broker/bad.py:1 imports gateway_grpc",
        "engine/bad.py:1 imports gateway_kafka",
        "engine/bad.py:2 imports broker",
        "gateway_kafka/bad.py:1 imports gateway_native",
    ]


# The store's parts a gateway may not touch: it asks the broker core's facades instead.
STORE_PARTS = {"commitlog", "dispatcher", "ha"}
GATEWAYS = ("gateway_kafka", "gateway_native", "gateway_grpc")


def _is_store(node: ast.AST) -> bool:
    """``store``, ``_store`` or ``<anything>.store`` / ``<anything>._store``."""
    if isinstance(node, ast.Name):
        return node.id in ("store", "_store")
    return isinstance(node, ast.Attribute) and node.attr in ("store", "_store")


def store_part_violations(root: Path = ROOT) -> list[str]:
    bad = []
    for package in GATEWAYS:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr in STORE_PARTS and _is_store(node.value):
                    bad.append(f"{path.relative_to(root)}:{node.lineno} touches store.{node.attr}")
                elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                      and len(node.args) >= 2 and _is_store(node.args[0])
                      and isinstance(node.args[1], ast.Constant) and node.args[1].value in STORE_PARTS):
                    bad.append(f"{path.relative_to(root)}:{node.lineno} touches store.{node.args[1].value}")
    return bad


def test_no_gateway_touches_the_stores_parts():
    assert store_part_violations() == []


def test_store_part_checker_catches_each_form(tmp_path):
    for p in GATEWAYS:
        (tmp_path / p).mkdir()
    (tmp_path / "gateway_kafka" / "bad.py").write_text(
        "x = gw.store.commitlog.max_offset\nha = store.ha\ny = getattr(self.store, 'dispatcher', None)\n")
    (tmp_path / "gateway_grpc" / "ok.py").write_text("self.ha.is_master\nstore.topic_config.get('t')\n")
    assert sorted(store_part_violations(tmp_path)) == [
        "gateway_kafka/bad.py:1 touches store.commitlog",
        "gateway_kafka/bad.py:2 touches store.ha",
        "gateway_kafka/bad.py:3 touches store.dispatcher",
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
