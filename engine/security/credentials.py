"""Credentials: salted SCRAM keys (never passwords), remoting secret keys, and the checks.

- ``ScramCredential``: RFC 5802 ``(salt, StoredKey, ServerKey, iterations)`` per user and
  mechanism. Made from a password (``from_password``, bootstrap and tests) or from a client's
  ``SaltedPassword`` (``from_salted``: Kafka's AlterUserScramCredentials sends that, so the
  broker never sees the password).
- ``ScramSession``: one server-side SCRAM exchange over the ``scramp`` library (client-first ->
  server-first, client-final -> server-final), with a decoy credential for unknown users so
  an unknown user and a wrong password fail at the same step with the same error.
- ``verify_password``: SASL PLAIN and admin HTTP Basic against a stored SCRAM credential
  (the password is salted with the stored salt and compared in constant time).

Kafka's mechanism numbers (ScramMechanism): 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

import scramp

MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
MECHANISM_BY_ID = {mid: name for name, (_h, mid) in MECHANISMS.items()}
MIN_ITERATIONS = 4096  # Kafka refuses fewer (UNACCEPTABLE_CREDENTIAL)
MAX_ITERATIONS = 16384  # Kafka's upper bound too


class CredentialError(ValueError):
    """A credential that cannot be stored; the message says why."""


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    @property
    def hash_name(self) -> str:
        return MECHANISMS[self.mechanism][0]

    @classmethod
    def from_salted(cls, mechanism: str, iterations: int, salt: bytes, salted_password: bytes) -> "ScramCredential":
        check_mechanism(mechanism)
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise CredentialError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, got {iterations}")
        if not salt:
            raise CredentialError("salt is empty")
        hf = MECHANISMS[mechanism][0]
        client_key = hmac.new(salted_password, b"Client Key", hf).digest()
        stored_key = hashlib.new(hf, client_key).digest()
        server_key = hmac.new(salted_password, b"Server Key", hf).digest()
        return cls(mechanism, iterations, bytes(salt), stored_key, server_key)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = 8192,
                      salt: bytes | None = None) -> "ScramCredential":
        check_mechanism(mechanism)
        salt = salt or os.urandom(24)
        salted = hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], password.encode("utf-8"), salt, iterations)
        return cls.from_salted(mechanism, iterations, salt, salted)

    def matches_password(self, password: bytes) -> bool:
        salted = hashlib.pbkdf2_hmac(self.hash_name, password, self.salt, self.iterations)
        client_key = hmac.new(salted, b"Client Key", self.hash_name).digest()
        return hmac.compare_digest(hashlib.new(self.hash_name, client_key).digest(), self.stored_key)

    def to_doc(self, user: str) -> dict:
        return {"v": 1, "user": user, "mechanism": self.mechanism, "iterations": self.iterations,
                "salt": _b64(self.salt), "storedKey": _b64(self.stored_key), "serverKey": _b64(self.server_key)}

    @classmethod
    def from_doc(cls, doc: dict) -> "ScramCredential":
        return cls(str(doc["mechanism"]), int(doc["iterations"]), base64.b64decode(doc["salt"]),
                   base64.b64decode(doc["storedKey"]), base64.b64decode(doc["serverKey"]))


def check_mechanism(mechanism: str) -> None:
    if mechanism not in MECHANISMS:
        raise CredentialError(f"unknown SCRAM mechanism {mechanism!r} (SCRAM-SHA-256 or SCRAM-SHA-512)")


def _decoy(mechanism: str) -> ScramCredential:
    # a fixed credential nobody knows the password of: an unknown user runs the whole exchange
    # and fails on the proof, like a wrong password
    return ScramCredential.from_salted(mechanism, MIN_ITERATIONS, b"rockafka-decoy-salt", os.urandom(64))


def decode_saslname(name: str) -> str:
    """RFC 5802 ``saslname``: ``=2C`` is ``,`` and ``=3D`` is ``=``."""
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramSession:
    """One server-side SCRAM exchange. ``first(client_first) -> server_first`` then
    ``final(client_final) -> server_final``; ``user`` is set after ``first``; ``final``
    raises ``CredentialError`` (with the server-final error text available as ``reply``)."""

    def __init__(self, mechanism: str, lookup):
        check_mechanism(mechanism)
        self.mechanism = mechanism
        self.user: str | None = None
        self.known = False
        self.reply: str | None = None
        self._lookup = lookup
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)

    def _auth_info(self, username: str):
        self.user = decode_saslname(username)
        cred = self._lookup(self.user, self.mechanism)
        self.known = cred is not None
        if cred is None:
            cred = _decoy(self.mechanism)
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def first(self, client_first: str) -> str:
        try:
            self._server.set_client_first(client_first)
            return self._server.get_server_first()
        except scramp.ScramException as exc:
            raise CredentialError(f"bad SCRAM client-first message: {exc}") from None

    def final(self, client_final: str) -> str:
        try:
            self._server.set_client_final(client_final)
        except scramp.ScramException as exc:
            try:
                self.reply = self._server.get_server_final()
            except scramp.ScramException:
                self.reply = None
            raise CredentialError(str(exc)) from None
        if not self.known:  # cannot happen with a decoy proof, but never let it through
            raise CredentialError("unknown user")
        return self._server.get_server_final()
