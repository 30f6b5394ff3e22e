"""RocketMQ's ACL signature (the Java client's ``AclClientRPCHook``), both sides.

The client adds ``AccessKey`` to the request's ext fields (the header as sent), then signs:
every ext field except ``Signature``, sorted by name, values concatenated (UTF-8), then the body
bytes; ``Signature`` = Base64(HMAC-SHA1(secretKey, that)). The broker recomputes it over the
request exactly as received (``verify``). Sans-IO: no sockets, no engine.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from .command import RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


def signed_content(cmd: RemotingCommand) -> bytes:
    fields = cmd.ext_fields
    text = "".join(str(fields[k]) for k in sorted(fields) if k != SIGNATURE)
    return text.encode("utf-8") + bytes(cmd.body or b"")


def signature(content: bytes, secret_key: str) -> str:
    return base64.b64encode(hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()).decode("ascii")


def sign(cmd: RemotingCommand, access_key: str, secret_key: str) -> RemotingCommand:
    """Add AccessKey and Signature to ``cmd`` (in place, as the Java hook does)."""
    cmd.ext_fields.pop(SIGNATURE, None)
    cmd.ext_fields[ACCESS_KEY] = access_key
    cmd.ext_fields[SIGNATURE] = signature(signed_content(cmd), secret_key)
    return cmd


def verify(cmd: RemotingCommand, secret_key: str) -> bool:
    given = cmd.ext_fields.get(SIGNATURE)
    if not given:
        return False
    return hmac.compare_digest(signature(signed_content(cmd), secret_key), str(given))


def signer(access_key: str, secret_key: str):
    """A callable for ``Connection(signer=...)``: signs every request the connection sends."""
    def apply(cmd: RemotingCommand) -> None:
        sign(cmd, access_key, secret_key)
    return apply
