"""Remoting/gRPC secret keys encrypted at rest, with a key that never enters the log.

The broker must recompute RocketMQ's HMAC signatures, so it needs each user's secret itself
(SCRAM credentials are salted keys instead, ``credentials.py``). Those secrets are stored in
``rmq_sys_SECURITY`` sealed with AES-256-GCM (the ``cryptography`` package):
``{"kid": <key id>, "nonce": b64(12), "ct": b64(ciphertext ‖ 16-byte tag)}``, the user name as
associated data (a sealed secret copied onto another user does not open).

Where the key lives (never in the data directory's log):

- the environment variable ``ROCKAFKA_AUTH_SECRET_KEY`` (base64 of 32 bytes; a second one,
  ``ROCKAFKA_AUTH_SECRET_KEY_PREVIOUS``, opens records sealed before a rotation); or
- the key file ``authSecretKeyPath`` (default: ``rockafka-auth.key`` beside the data directory,
  i.e. in its parent), created with mode 0600 the first time a secret is sealed. One key per
  line, ``<kid> <base64 key>``; the first line is the current key, the next ones (at most one:
  the previous key) still open older records.

Invariants: a key file is replaced atomically (write, fsync, rename) and never loosened
from 0600; the key id is the first 8 hex digits of SHA-256(key), so two nodes holding the same
key agree on it; ``seal`` always uses the current key; ``open`` picks the key by id.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from pathlib import Path

import structlog

log = structlog.get_logger("rockafka.engine.security")

ENV_KEY = "ROCKAFKA_AUTH_SECRET_KEY"
ENV_PREVIOUS = "ROCKAFKA_AUTH_SECRET_KEY_PREVIOUS"
KEY_FILE_NAME = "rockafka-auth.key"
KEY_BYTES = 32
NONCE_BYTES = 12


class SecretBoxError(RuntimeError):
    """A sealed secret that cannot be opened (no such key, or it was tampered with)."""


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:8]


def default_key_path(data_dir: str) -> str:
    """``<parent of the data directory>/rockafka-auth.key``: outside the directory that holds the
    log, so a copy of the data directory does not carry the key that opens its secrets."""
    return str(Path(os.path.abspath(data_dir)).parent / KEY_FILE_NAME)


def _decode_key(text: str, where: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except ValueError:
        raise SecretBoxError(f"{where}: not base64") from None
    if len(key) != KEY_BYTES:
        raise SecretBoxError(f"{where}: expected {KEY_BYTES} bytes (base64), got {len(key)}")
    return key


class SecretBox:
    """Seals and opens secrets with the current key; older keys only open."""

    def __init__(self, path: str | None, env: dict[str, str] | None = None):
        self.path = path
        self._env = os.environ if env is None else env
        self._lock = threading.Lock()
        self._keys: list[bytes] = []  # current first
        self.source = "none"
        self._load()

    # -- keys -----------------------------------------------------------------------------------
    def _load(self) -> None:
        env_key = self._env.get(ENV_KEY)
        if env_key:
            keys = [_decode_key(env_key, ENV_KEY)]
            if self._env.get(ENV_PREVIOUS):
                keys.append(_decode_key(self._env[ENV_PREVIOUS], ENV_PREVIOUS))
            self._keys, self.source = keys, "env"
            return
        if self.path and os.path.exists(self.path):
            self._keys, self.source = self._read_file(self.path), "file"

    @staticmethod
    def _read_file(path: str) -> list[bytes]:
        keys = []
        for n, line in enumerate(Path(path).read_text().splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            _kid, _sep, b64 = line.rpartition(" ")
            keys.append(_decode_key(b64, f"{path} line {n}"))
        if not keys:
            raise SecretBoxError(f"{path}: no key in the file")
        mode = os.stat(path).st_mode & 0o777
        if mode & 0o077:
            log.warning("auth_secret_key_file_readable_by_others", path=path, mode=oct(mode),
                        hint=f"chmod 600 {path}")
        return keys

    def _write_file(self, keys: list[bytes]) -> None:
        assert self.path
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        tmp = f"{self.path}.tmp{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            text = "# rockafka: keys that seal the remoting secrets in rmq_sys_SECURITY (first = current)\n"
            text += "".join(f"{key_id(k)} {base64.b64encode(k).decode()}\n" for k in keys)
            os.write(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        try:
            dfd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass

    def _ensure_key(self) -> bytes:
        if self._keys:
            return self._keys[0]
        if not self.path:
            raise SecretBoxError(f"no key to seal secrets with: set {ENV_KEY} or authSecretKeyPath")
        # first secret ever: create the file exclusively; another process may have won the race
        key = os.urandom(KEY_BYTES)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            self._keys, self.source = self._read_file(self.path), "file"
            return self._keys[0]
        try:
            os.write(fd, (f"# rockafka: keys that seal the remoting secrets in rmq_sys_SECURITY (first = current)\n"
                          f"{key_id(key)} {base64.b64encode(key).decode()}\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        self._keys, self.source = [key], "file"
        log.info("auth_secret_key_created", path=self.path, kid=key_id(key))
        return key

    @property
    def current_kid(self) -> str | None:
        return key_id(self._keys[0]) if self._keys else None

    def rotate(self) -> str:
        """A new current key in the key file (the old one kept as previous, so records sealed
        with it still open until they are re-sealed); returns the new key id. A key from the
        environment is rotated by the operator (new ``ROCKAFKA_AUTH_SECRET_KEY``, old one in
        ``ROCKAFKA_AUTH_SECRET_KEY_PREVIOUS``) and a restart."""
        with self._lock:
            if self.source == "env":
                raise SecretBoxError(f"the key comes from {ENV_KEY}: set a new one there (the old one in "
                                     f"{ENV_PREVIOUS}) and restart the node")
            if not self.path:
                raise SecretBoxError("no key file configured (authSecretKeyPath)")
            old = self._keys[:1]
            new = os.urandom(KEY_BYTES)
            self._write_file([new] + old)
            self._keys, self.source = [new] + old, "file"
            log.info("auth_secret_key_rotated", path=self.path, kid=key_id(new),
                     previous=key_id(old[0]) if old else None)
            return key_id(new)

    def forget_previous(self) -> None:
        """Drop every key but the current one from the file (after everything was re-sealed)."""
        with self._lock:
            if self.source == "file" and len(self._keys) > 1:
                self._write_file(self._keys[:1])
                self._keys = self._keys[:1]

    # -- seal / open ------------------------------------------------------------------------------
    def seal(self, user: str, secret: str) -> dict[str, str]:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        with self._lock:
            key = self._ensure_key()
        nonce = os.urandom(NONCE_BYTES)
        ct = AESGCM(key).encrypt(nonce, secret.encode("utf-8"), user.encode("utf-8"))
        return {"kid": key_id(key), "nonce": base64.b64encode(nonce).decode(), "ct": base64.b64encode(ct).decode()}

    def open(self, user: str, sealed: dict) -> str:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        kid = str(sealed.get("kid") or "")
        key = next((k for k in self._keys if key_id(k) == kid), None)
        if key is None:
            raise SecretBoxError(f"no key {kid!r} to open the secret of {user!r} (the key file or "
                                 f"{ENV_KEY} of the node that sealed it is needed here too)")
        try:
            plain = AESGCM(key).decrypt(base64.b64decode(sealed["nonce"]), base64.b64decode(sealed["ct"]),
                                        user.encode("utf-8"))
        except (InvalidTag, KeyError, ValueError):
            raise SecretBoxError(f"the sealed secret of {user!r} does not open with key {kid!r}") from None
        return plain.decode("utf-8")

    def is_current(self, sealed: dict) -> bool:
        return bool(self._keys) and sealed.get("kid") == key_id(self._keys[0])
