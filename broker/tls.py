"""TLS material for every listener of a node, and client certificates mapped to principals.

One server ``ssl.SSLContext`` per node (``server_context``), from PEM files:
``tlsServerCertPath`` / ``tlsServerKeyPath`` (a self-signed pair is generated into
``<data dir>/tls/`` when unset — the same pair the gRPC port uses), ``tlsServerTrustCertPath``
(CAs whose client certificates are accepted) and ``tlsServerNeedClientAuth`` none | optional |
require (Kafka's ``ssl.client.auth`` none / requested / required). A client context
(``client_context``) for the node's own outgoing connections (broker -> NameServer, slave ->
master) trusts ``tlsClientTrustCertPath`` (default: the server trust file, else no
verification, as RocketMQ's ``tls.client.authServer=false``) and presents the server's pair
so a peer requiring client certificates accepts it.

``principal_from_cert`` applies Kafka's ``ssl.principal.mapping.rules`` to the subject DN
(RFC 2253 form, as Java prints it: ``CN=alice,OU=eng,O=acme``): ``RULE:regex/replacement/``
with an optional ``L``/``U`` case suffix, tried in order, ``DEFAULT`` = the whole DN.

Sniffing: ``TLS_HANDSHAKE`` (0x16) is the first byte of every TLS connection; permissive
listeners look at it to pick TLS or plaintext on one port (RocketMQ's remoting does the same).
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger("rockafka.engine.security")

TLS_HANDSHAKE = 0x16
MODES = ("disabled", "permissive", "enforcing")
CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED,
               # Kafka's ssl.client.auth spellings
               "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsError(ValueError):
    """TLS configuration a person must fix (a file that cannot be read, an unknown mode)."""


def tls_mode(config: Any) -> str:
    mode = (config.extra_str("tls_server_mode") or config.extra_str("tls_mode") or "permissive").strip().lower()
    if mode not in MODES:
        raise TlsError(f"tlsServerMode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def cert_paths(config: Any) -> tuple[str | None, str | None]:
    cert = config.extra_str("tls_server_cert_path") or config.extra_str("tls_cert_path")
    key = config.extra_str("tls_server_key_path") or config.extra_str("tls_key_path")
    if bool(cert) != bool(key):
        raise TlsError("tlsServerCertPath and tlsServerKeyPath go together: set both or neither")
    return cert, key


def pem_pair(config: Any, host: str = "localhost") -> tuple[str, str]:
    """Paths of the node's certificate chain and key: configured, else generated once."""
    cert, key = cert_paths(config)
    if cert and key:
        for p in (cert, key):
            if not os.access(p, os.R_OK):
                raise TlsError(f"cannot read TLS file {p}")
        return cert, key
    d = Path(config.data_dir) / "tls"
    cert_file, key_file = d / "server.crt", d / "server.key"
    if not (cert_file.exists() and key_file.exists()):
        generate_self_signed(cert_file, key_file, host)
    return str(cert_file), str(key_file)


def generate_self_signed(cert_file: Path, key_file: Path, host: str, days: int = 3650) -> None:
    """A self-signed RSA pair for ``host`` (and localhost / 127.0.0.1) with openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise TlsError("openssl not found: install it, or set tlsServerCertPath/tlsServerKeyPath, "
                       "or run with tlsServerMode=disabled")
    cert_file.parent.mkdir(parents=True, exist_ok=True)
    names = ["DNS:localhost", "IP:127.0.0.1"]
    if host and host not in ("0.0.0.0", "::", "localhost", "127.0.0.1"):
        names.append(("IP:" if host.replace(".", "").isdigit() or ":" in host else "DNS:") + host)
    tmp_key, tmp_cert = key_file.with_suffix(".key.tmp"), cert_file.with_suffix(".crt.tmp")
    proc = subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", str(days),
                           "-subj", "/CN=rockafka", "-addext", "subjectAltName=" + ",".join(names),
                           "-keyout", str(tmp_key), "-out", str(tmp_cert)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise TlsError(f"openssl could not generate a self-signed certificate: {proc.stderr.strip()[-500:]}")
    os.chmod(tmp_key, 0o600)
    os.replace(tmp_key, key_file)
    os.replace(tmp_cert, cert_file)
    log.info("tls_self_signed_generated", cert=str(cert_file), names=names)


def server_context(config: Any, host: str = "localhost", client_auth: str | None = None) -> ssl.SSLContext:
    """``client_auth`` overrides ``tlsServerNeedClientAuth`` (Kafka's SASL_SSL listeners ask for
    no certificate: the SASL login names the principal)."""
    cert, key = pem_pair(config, host)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"cannot load TLS certificate {cert} / key {key}: {exc}") from None
    need = (client_auth or config.extra_str("tls_server_need_client_auth") or config.extra_str("ssl_client_auth")
            or "none").lower()
    if need not in CLIENT_AUTH:
        raise TlsError(f"tlsServerNeedClientAuth must be none, optional or require, got {need!r}")
    trust = config.extra_str("tls_server_trust_cert_path") or config.extra_str("ssl_truststore_location")
    if trust:
        try:
            ctx.load_verify_locations(cafile=trust)
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(f"cannot load trusted CA certificates from {trust}: {exc}") from None
    elif CLIENT_AUTH[need] != ssl.CERT_NONE:
        raise TlsError("tlsServerNeedClientAuth needs tlsServerTrustCertPath (the CAs that sign client certificates)")
    ctx.verify_mode = CLIENT_AUTH[need]
    return ctx


def client_context(config: Any) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    trust = config.extra_str("tls_client_trust_cert_path") or config.extra_str("tls_server_trust_cert_path")
    if trust:
        ctx.load_verify_locations(cafile=trust)
        ctx.check_hostname = False  # peers are addressed by IP; the CA is what is checked
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    try:
        cert, key = pem_pair(config)
        ctx.load_cert_chain(cert, key)  # presented when the peer asks for a client certificate
    except (TlsError, OSError, ssl.SSLError):
        pass
    return ctx


# -- client certificates -> principals ---------------------------------------------------------
_ATTR_NAMES = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "localityName": "L",
               "stateOrProvinceName": "ST", "countryName": "C", "streetAddress": "STREET",
               "domainComponent": "DC", "userId": "UID", "emailAddress": "EMAILADDRESS"}


def subject_dn(peercert: dict) -> str:
    """RFC 2253 DN of ``SSLSocket.getpeercert()``'s subject, most specific first (Java's order)."""
    parts = []
    for rdn in reversed(peercert.get("subject", ())):
        parts.append("+".join(f"{_ATTR_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(parts)


def _escape(v: str) -> str:
    return re.sub(r'([,+"\\<>;=])', r"\\\1", v)


class PrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules``: rules separated by commas (a rule's pattern
    may contain commas; ``/`` inside one is written ``\\/``)."""

    _RULES = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")

    def __init__(self, rules: str | None):
        self.rules: list[tuple[re.Pattern[str], str, str] | None] = []
        text = (rules or "DEFAULT").strip()
        pos = 0
        while pos < len(text):
            m = self._RULES.match(text, pos)
            if m is None or m.end() == pos:
                raise TlsError(f"ssl.principal.mapping.rules: cannot parse {text[pos:]!r} "
                               "(DEFAULT or RULE:pattern/replacement/[LU], comma separated)")
            pos = m.end()
            if m.group(1):
                self.rules.append(None)
                continue
            try:
                pattern = re.compile(m.group(2).replace("\\/", "/"))
            except re.error as exc:
                raise TlsError(f"ssl.principal.mapping.rules: bad pattern {m.group(2)!r}: {exc}") from None
            replacement = re.sub(r"\$(\d+)", r"\\\1", m.group(3).replace("\\/", "/"))
            self.rules.append((pattern, replacement, m.group(4) or ""))

    def map(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                out = pattern.sub(replacement, dn, count=1)
                return out.lower() if case == "L" else out.upper() if case == "U" else out
        return dn


def peer_principal(ssl_object: Any, mapper: PrincipalMapper) -> str | None:
    """``User:<mapped DN>`` of a verified client certificate, or None when there is none."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    return "User:" + mapper.map(subject_dn(cert))
