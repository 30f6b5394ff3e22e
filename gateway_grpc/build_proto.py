"""Generate ``gateway_grpc/proto/*_pb2*.py`` from the published RocketMQ 5 protocol definitions.

Run by ``make serve`` / ``make test-deps`` (``python -m gateway_grpc.build_proto``); the output is
gitignored and never edited by hand.

Source: the official Python client's wheel on PyPI (``rocketmq-python-client``, pinned below),
fetched with ``pip download``. It ships rocketmq-apis' compiled definitions, each module holding
its ``FileDescriptorProto`` as one serialized bytes literal. The literal is read with ``ast``
(the wheel's code is never run) and handed to grpcio-tools' protoc with ``--descriptor_set_in``.
Message, enum and service names (``apache.rocketmq.v2.*``) are kept, so the gRPC method paths
are the ones every client calls.

The file names are kept too (``definition.proto``, ``service.proto``, ``admin.proto``): protobuf
registers every generated module in one process-wide descriptor pool, which refuses the same
symbol from two differently named files but accepts a file added twice with equal contents. So
the broker and the official client (same pinned version) load side by side in one process -- a
test process, or an application that embeds a node. The generated modules' imports of each
other are rewritten to this package.

Why not the ``org.apache.rocketmq:rocketmq-proto`` jar: it carried ``.proto`` sources only up
to 2.0.3, which predates RecallMessage and lite topics.
"""

from __future__ import annotations

import ast
import hashlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

CLIENT_DIST = "rocketmq-python-client"
CLIENT_VERSION = "5.1.2"
PROTO_FILES = ("definition", "service", "admin")  # in dependency order
WHEEL_MODULE_DIR = "rocketmq/grpc_protocol/"

PACKAGE_DIR = Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parent
OUT_DIR = PACKAGE_DIR / "proto"
BUILD_DIR = ROOT / "build" / "grpc"
STAMP = OUT_DIR / ".generated"


class BuildError(RuntimeError):
    """Generation failed; the message says which step and why."""


def _wheel() -> Path:
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    pattern = f"{CLIENT_DIST.replace('-', '_')}-{CLIENT_VERSION}-*.whl"
    found = sorted(BUILD_DIR.glob(pattern))
    if found:
        return found[0]
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                           "-d", str(BUILD_DIR), f"{CLIENT_DIST}=={CLIENT_VERSION}"], capture_output=True, text=True)
    found = sorted(BUILD_DIR.glob(pattern))
    if proc.returncode != 0 or not found:
        raise BuildError(f"pip download {CLIENT_DIST}=={CLIENT_VERSION} failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
    return found[0]


def serialized_descriptor(source: str) -> bytes:
    """The bytes literal passed to ``AddSerializedFile(...)`` in a generated ``_pb2`` module."""
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "AddSerializedFile" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, bytes)):
            return node.args[0].value
    raise BuildError("no AddSerializedFile(b'...') literal found")


def descriptor_set(wheel: Path) -> bytes:
    from google.protobuf import descriptor_pb2, duration_pb2, timestamp_pb2

    fds = descriptor_pb2.FileDescriptorSet()
    for wkt in (timestamp_pb2, duration_pb2):
        fdp = descriptor_pb2.FileDescriptorProto()
        wkt.DESCRIPTOR.CopyToProto(fdp)
        fds.file.append(fdp)
    with zipfile.ZipFile(wheel) as zf:
        for name in PROTO_FILES:
            fdp = descriptor_pb2.FileDescriptorProto.FromString(
                serialized_descriptor(zf.read(f"{WHEEL_MODULE_DIR}{name}_pb2.py").decode("utf-8")))
            if fdp.package != "apache.rocketmq.v2":
                raise BuildError(f"{name}.proto declares package {fdp.package!r}, expected apache.rocketmq.v2")
            if fdp.name != f"{name}.proto":
                raise BuildError(f"{name}_pb2 describes {fdp.name!r}, expected {name}.proto")
            fds.file.append(fdp)
    return fds.SerializeToString()


_SIBLING_IMPORT = re.compile(rf"^import ({'|'.join(PROTO_FILES)})_pb2 as ", re.M)


def _package_imports(path: Path) -> None:
    """``import service_pb2 as ...`` (protoc's form for a file at the root) -> this package."""
    text = path.read_text()
    path.write_text(_SIBLING_IMPORT.sub(r"from gateway_grpc.proto import \1_pb2 as ", text))


def build(force: bool = False) -> Path:
    wheel = _wheel()
    data = descriptor_set(wheel)
    digest = hashlib.sha256(data + Path(__file__).read_bytes()).hexdigest()
    if not force and STAMP.exists() and STAMP.read_text().strip() == digest:
        return OUT_DIR
    set_path = BUILD_DIR / "rocketmq_v2.desc"
    set_path.write_bytes(data)
    OUT_DIR.mkdir(exist_ok=True)
    from grpc_tools import protoc

    targets = [f"{name}.proto" for name in PROTO_FILES]
    rc = protoc.main(["grpc_tools.protoc", f"--descriptor_set_in={set_path}", f"--python_out={OUT_DIR}",
                      f"--grpc_python_out={OUT_DIR}", *targets])
    if rc != 0:
        raise BuildError(f"protoc failed with exit code {rc}")
    for name in PROTO_FILES:
        for module in (OUT_DIR / f"{name}_pb2.py", OUT_DIR / f"{name}_pb2_grpc.py"):
            if module.exists():
                _package_imports(module)
    (OUT_DIR / "__init__.py").write_text(
        f'"""Generated by gateway_grpc.build_proto from {CLIENT_DIST} {CLIENT_VERSION}; do not edit."""\n')
    STAMP.write_text(digest + "\n")
    return OUT_DIR


def main() -> int:
    try:
        out = build(force="--force" in sys.argv[1:])
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"gRPC code generated in {out.relative_to(ROOT)} ({CLIENT_DIST} {CLIENT_VERSION})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
