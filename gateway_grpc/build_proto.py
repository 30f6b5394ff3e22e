"""Generate ``gateway_grpc/proto/*_pb2*.py`` from the published RocketMQ 5 protocol definitions.

The output is committed and shipped in the wheel and the sdist, so installing Rockafka needs
neither protoc nor a registry (README, "Install"). This module regenerates it when the pinned
client version changes: ``make grpc`` (``python -m gateway_grpc.build_proto``); a test checks
that the committed files equal a fresh generation and that pyproject's ``grpcio`` / ``protobuf``
floors are at least the versions the generated code demands at import.

Source: the official Python client's distribution (``rocketmq-python-client``, pinned below),
read from the installed copy when its version matches (a test environment has it), else its
wheel fetched with ``pip download``. It ships rocketmq-apis' compiled definitions, each module
holding its ``FileDescriptorProto`` as one serialized bytes literal. The literal is read with
``ast`` (the client's code is never run) and handed to grpcio-tools' protoc with
``--descriptor_set_in``.
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


def _client_sources() -> dict[str, str]:
    """``{name: source of rocketmq/grpc_protocol/<name>_pb2.py}``, installed copy first."""
    from importlib import metadata

    try:
        dist = metadata.distribution(CLIENT_DIST)
    except metadata.PackageNotFoundError:
        dist = None
    if dist is not None and dist.version == CLIENT_VERSION:
        files = {f"{WHEEL_MODULE_DIR}{name}_pb2.py": name for name in PROTO_FILES}
        found = {files[str(f)]: Path(dist.locate_file(f)).read_text("utf-8")
                 for f in dist.files or () if str(f) in files}
        if len(found) == len(PROTO_FILES):
            return found
    with zipfile.ZipFile(_wheel()) as zf:
        return {name: zf.read(f"{WHEEL_MODULE_DIR}{name}_pb2.py").decode("utf-8") for name in PROTO_FILES}


def descriptor_set(sources: dict[str, str]) -> bytes:
    from google.protobuf import descriptor_pb2, duration_pb2, timestamp_pb2

    fds = descriptor_pb2.FileDescriptorSet()
    for wkt in (timestamp_pb2, duration_pb2):
        fdp = descriptor_pb2.FileDescriptorProto()
        wkt.DESCRIPTOR.CopyToProto(fdp)
        fds.file.append(fdp)
    for name in PROTO_FILES:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(serialized_descriptor(sources[name]))
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


def build(out_dir: Path = OUT_DIR) -> Path:
    data = descriptor_set(_client_sources())
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    set_path = BUILD_DIR / "rocketmq_v2.desc"
    set_path.write_bytes(data)
    out_dir.mkdir(parents=True, exist_ok=True)
    from grpc_tools import protoc

    targets = [f"{name}.proto" for name in PROTO_FILES]
    rc = protoc.main(["grpc_tools.protoc", f"--descriptor_set_in={set_path}", f"--python_out={out_dir}",
                      f"--grpc_python_out={out_dir}", *targets])
    if rc != 0:
        raise BuildError(f"protoc failed with exit code {rc}")
    for name in PROTO_FILES:
        for module in (out_dir / f"{name}_pb2.py", out_dir / f"{name}_pb2_grpc.py"):
            if module.exists():
                _package_imports(module)
    (out_dir / "__init__.py").write_text(
        f'"""Generated by gateway_grpc.build_proto from {CLIENT_DIST} {CLIENT_VERSION}; do not edit."""\n')
    return out_dir


def main() -> int:
    try:
        out = build()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"gRPC code generated in {out.relative_to(ROOT)} ({CLIENT_DIST} {CLIENT_VERSION})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
