"""Certificates for TLS tests, made with openssl: a CA, a server certificate for localhost /
127.0.0.1 signed by it, client certificates signed by it, and a second, unrelated CA with a
client certificate of its own (which the node must refuse)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _run(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_ca(d: Path, name: str) -> tuple[Path, Path]:
    key, crt = d / f"{name}.key", d / f"{name}.crt"
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "30", "-subj", f"/CN={name}",
         "-keyout", str(key), "-out", str(crt))
    return crt, key


def make_cert(d: Path, name: str, subject: str, ca: tuple[Path, Path], server: bool = False) -> tuple[Path, Path]:
    key, csr, crt, ext = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.crt", d / f"{name}.ext"
    _run("req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-subj", subject, "-keyout", str(key), "-out", str(csr))
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n" if server else "extendedKeyUsage=clientAuth\n")
    _run("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial", "-days", "30",
         "-sha256", "-extfile", str(ext), "-out", str(crt))
    return crt, key


@dataclass
class TestPki:
    ca: Path
    server_cert: Path
    server_key: Path
    alice_cert: Path
    alice_key: Path
    stranger_ca: Path
    stranger_cert: Path
    stranger_key: Path


def make_pki(d: Path) -> TestPki:
    d.mkdir(parents=True, exist_ok=True)
    ca = make_ca(d, "test-ca")
    server = make_cert(d, "server", "/CN=localhost", ca, server=True)
    alice = make_cert(d, "alice", "/O=acme/OU=eng/CN=alice", ca)
    other = make_ca(d, "other-ca")
    stranger = make_cert(d, "stranger", "/O=acme/OU=eng/CN=alice", other)
    return TestPki(ca[0], server[0], server[1], alice[0], alice[1], other[0], stranger[0], stranger[1])
