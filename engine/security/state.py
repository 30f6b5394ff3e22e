"""Credentials and policies as records in the log (``docs/design/security.md``, "Where ...").

``SecurityLog`` is the storage interface: ``append(kind, doc)``, ``read_from(offset)``,
``follow(callback)``, ``needed_commitlog_offset(position)``. It sits on the engine's state-log
mechanism (``engine/state_log.py``, the one coordinator state uses): one partition of the
internal topic ``rmq_sys_SECURITY``, Kafka RecordBatch units appended through the store's put
path, so master/slave replication carries them byte for byte.

``SecurityState`` is what the records build: SCRAM credentials per (user, mechanism), remoting
secret keys per user, the ACL table. Records apply in queue order; a ``snapshot`` record
replaces everything before it and is the checkpoint: it carries the whole state and its log
position is where replay starts. A retention guard (``MessageStore.add_retention_guard``) keeps
the last snapshot and every record after it, and the writer appends a new snapshot when the
oldest record the state depends on is older than half of ``fileReservedTime`` (and at a
master's start when none exists yet), so the guard moves on and retention can delete old
segments; a slave that joins late copies the master's log from its oldest segment, which holds
the snapshot.

Invariants: one writer at a time (``_write_lock``); records are applied exactly once, in
order (``applied`` is the next queue offset to apply); readers never see a half-applied record
(each record is applied under ``_lock``).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

import structlog

from .acl import AclBinding, AclTable
from .credentials import ScramCredential
from .secret_box import SecretBox, SecretBoxError

log = structlog.get_logger("rockafka.engine.security")

SECURITY_TOPIC = "rmq_sys_SECURITY"
QUEUE_ID = 0
READER_GROUP = "CID_RMQ_SYS_SECURITY"
FORMAT_VERSION = 2  # 2: remoting secrets sealed (secret_box.py); 1 kept them in clear


def _profile(doc: dict) -> dict[str, str]:
    return {"type": str(doc.get("type") or "Normal"), "status": str(doc.get("status") or "enable")}


class SecurityStateError(RuntimeError):
    """A change that could not be recorded (e.g. on a slave); the message says why."""


class SecurityLog:
    """The security records in the log: one partition of the internal topic ``rmq_sys_SECURITY``
    through the engine's state-log mechanism (``engine/state_log.py``: Kafka RecordBatch units,
    topic created read-only and internal). Record key = the record's kind (``scram``, ``acl-``,
    ``snapshot`` ...), value = its JSON document."""

    def __init__(self, store: Any, topic: str = SECURITY_TOPIC):
        from ..state_log import StateLog

        self.store = store
        self.topic = topic
        self.log = StateLog(store, topic, 1)

    @property
    def read_only(self) -> bool:
        return self.store.is_slave

    def ensure_topic(self) -> None:
        if not self.store.is_slave:
            self.log.ensure_topic()

    def append(self, kind: str, doc: dict) -> int:
        body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")
        result = self.log.append(QUEUE_ID, [(kind.encode("utf-8"), body)])
        if not result.stored:
            raise SecurityStateError(f"security change not recorded: {result.status.name} {result.error or ''}".strip())
        return result.queue_offset

    def end(self) -> int:
        return self.log.end_offset(QUEUE_ID)

    def read_from(self, offset: int):
        """Yield (queue offset, kind, doc, store timestamp) from ``offset`` to the end."""
        for rec in self.log.read(QUEUE_ID, offset):
            if rec.key is None or rec.value is None:
                continue
            try:
                doc = json.loads(rec.value)
            except ValueError:
                log.warning("security_record_unreadable", offset=rec.offset)
                continue
            yield rec.offset, rec.key.decode("utf-8", "replace"), doc, rec.timestamp

    def needed_commitlog_offset(self, position: int) -> int | None:
        """What retention must keep: the records from ``position`` (the last snapshot) on."""
        return self.log.needed_commitlog_offset({QUEUE_ID: position})

    def follow(self, callback: Callable[[], None]) -> Callable[[str, int, int], None]:
        """Call ``callback`` (from the store's dispatch thread) when records arrive, e.g. on a
        slave receiving them by replication. Returns the listener (for ``unfollow``)."""
        topic = self.topic

        def on_arrival(t: str, queue_id: int, max_offset: int, *_: Any) -> None:
            if t == topic:
                callback()

        self.store.add_arrival_listener(on_arrival, lazy=True)  # off the putting thread: callback may take locks
        return on_arrival

    def unfollow(self, listener: Callable) -> None:
        try:
            self.store.remove_arrival_listener(listener)
        except Exception:
            pass


class NoLog:
    """No log at all (a standalone NameServer): no users or ACLs of its own, changes refused."""

    read_only = True

    def ensure_topic(self) -> None:
        pass

    def append(self, kind: str, doc: dict) -> int:
        raise SecurityStateError("this process keeps no users or ACLs (change them on a broker)")

    def read_from(self, offset: int):
        return iter(())

    def needed_commitlog_offset(self, position: int) -> None:
        return None

    def follow(self, callback: Callable[[], None]) -> None:
        return None

    def unfollow(self, listener: Callable) -> None:
        pass


class SecurityState:
    """The state the records build, and the one writer that appends them."""

    def __init__(self, log_: SecurityLog, retention_ms: int, box: SecretBox | None = None):
        self.log = log_
        self.retention_ms = retention_ms
        self.box = box if box is not None else SecretBox(None, env={})
        self.scram: dict[tuple[str, str], ScramCredential] = {}
        self.secrets: dict[str, str] = {}  # opened, in memory only; the log holds them sealed
        # users whose live secret came from a record in clear (an earlier version) or sealed with
        # a key that is not the current one: the master re-seals them (a snapshot) at start
        self.reseal_needed: set[str] = set()
        # user -> why their last sealed secret did not open (no such key here); reported once
        # replay is done, as a record before the last snapshot may be replaced by it
        self.unopenable: dict[str, str] = {}
        # and their sealed form, carried into snapshots unchanged: a node without the key (a
        # slave promoted before its key file was copied) must not drop secrets it cannot read
        self.sealed_kept: dict[str, dict] = {}
        self.profiles: dict[str, dict[str, str]] = {}  # user -> {"type": Super|Normal, "status": enable|disable}
        self.acls = AclTable()
        self.applied = 0
        self.snapshot_position = 0  # queue offset of the last snapshot record (replay starts there)
        self.version = 0  # grows with every applied record
        self.oldest_dependency_ms = 0  # store time of the oldest record the state depends on
        self._lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._listener: Callable | None = None
        self._applying = 0

    # -- reading -------------------------------------------------------------------------
    def catch_up(self) -> int:
        """Apply every record not applied yet; returns how many were."""
        n = 0
        with self._lock:
            for offset, kind, doc, ts in self.log.read_from(self.applied):
                if offset < self.applied:
                    continue
                self._applying = offset
                self._apply(kind, doc, ts)
                self.applied = offset + 1
                n += 1
            if n:
                self.version += 1
            for user, why in sorted(self.unopenable.items()) if n else ():
                log.warning("security_secret_unopenable", user=user, error=why)
        return n

    def _apply(self, kind: str, doc: dict, ts: int) -> None:
        try:
            if kind == "snapshot":
                self.snapshot_position = self._applying
                self.scram = {(d["user"], d["mechanism"]): ScramCredential.from_doc(d) for d in doc.get("scram", ())}
                self.secrets, self.reseal_needed, self.unopenable, self.sealed_kept = {}, set(), {}, {}
                for user, value in (doc.get("secrets") or {}).items():
                    self._apply_secret(str(user), value)
                self.profiles = {str(k): _profile(v) for k, v in (doc.get("profiles") or {}).items()}
                self.acls.replace(AclBinding.from_list(b) for b in doc.get("acls", ()))
                self.oldest_dependency_ms = ts
                return
            if not self.oldest_dependency_ms:
                self.oldest_dependency_ms = ts
            if kind == "scram":
                self.scram[(doc["user"], doc["mechanism"])] = ScramCredential.from_doc(doc)
            elif kind == "scram-":
                self.scram.pop((doc["user"], doc["mechanism"]), None)
            elif kind == "secret":
                self._apply_secret(str(doc["user"]), doc["sealed"] if "sealed" in doc else doc["secret"])
            elif kind == "secret-":
                self.secrets.pop(str(doc["user"]), None)
                self.reseal_needed.discard(str(doc["user"]))
                self.unopenable.pop(str(doc["user"]), None)
                self.sealed_kept.pop(str(doc["user"]), None)
            elif kind == "profile":
                self.profiles[str(doc["user"])] = _profile(doc)
            elif kind == "profile-":
                self.profiles.pop(str(doc["user"]), None)
            elif kind == "acl":
                self.acls.add(AclBinding.from_list(doc["binding"]))
            elif kind == "acl-":
                self.acls.remove(AclBinding.from_list(doc["binding"]))
            else:
                log.warning("security_record_unknown", kind=kind)
        except (KeyError, ValueError, TypeError) as exc:
            log.warning("security_record_rejected", kind=kind, error=str(exc))

    def _apply_secret(self, user: str, value: Any) -> None:
        """A sealed secret (``{"kid","nonce","ct"}``) or, from format 1, the secret in clear."""
        if isinstance(value, dict):
            try:
                self.secrets[user] = self.box.open(user, value)
            except SecretBoxError as exc:
                self.secrets.pop(user, None)
                self.unopenable[user] = str(exc)
                self.sealed_kept[user] = dict(value)
                return
            self.unopenable.pop(user, None)
            self.sealed_kept.pop(user, None)
            if self.box.is_current(value):
                self.reseal_needed.discard(user)
            else:
                self.reseal_needed.add(user)
        else:
            self.secrets[user] = str(value)
            self.reseal_needed.add(user)
            self.unopenable.pop(user, None)
            self.sealed_kept.pop(user, None)

    def sealed_secret_doc(self, user: str, secret: str) -> dict:
        """The ``secret`` record of ``user``: the secret sealed with the current key."""
        return {"v": 2, "user": user, "sealed": self.box.seal(user, secret)}

    def start(self) -> None:
        self.log.ensure_topic()
        n = self.catch_up()
        self._listener = self.log.follow(self.catch_up)
        store = getattr(self.log, "store", None)
        if store is not None:  # retention keeps the last snapshot and everything after it
            self._guard = lambda: self.log.needed_commitlog_offset(self.snapshot_position)
            store.add_retention_guard(self._guard)
        log.info("security_state_replayed", records=n, users=len(self.users()), acls=len(self.acls),
                 next_offset=self.applied)

    def stop(self) -> None:
        if self._listener is not None:
            self.log.unfollow(self._listener)
            self._listener = None
        guard = getattr(self, "_guard", None)
        if guard is not None:
            self.log.store.remove_retention_guard(guard)
            self._guard = None

    def users(self) -> set[str]:
        return {u for u, _m in self.scram} | set(self.secrets) | set(self.sealed_kept) | set(self.profiles)

    def is_empty(self) -> bool:
        return not self.scram and not self.secrets and not self.profiles and not len(self.acls)

    # -- writing -------------------------------------------------------------------------
    def write(self, records: list[tuple[str, dict]]) -> None:
        """Append ``records`` in order (one writer at a time) and apply them."""
        with self._write_lock:
            if self.log.read_only:
                if isinstance(self.log, NoLog):
                    self.log.append("", {})
                raise SecurityStateError("this broker is a slave: change users and ACLs on the master")
            for kind, doc in records:
                self.log.append(kind, doc)
            self.catch_up()

    def snapshot_doc(self) -> dict:
        with self._lock:
            return {"v": FORMAT_VERSION,
                    "scram": [c.to_doc(u) for (u, _m), c in sorted(self.scram.items())],
                    "secrets": {**self.sealed_kept, **{u: self.box.seal(u, s) for u, s in sorted(self.secrets.items())}},
                    "profiles": dict(sorted(self.profiles.items())),
                    "acls": [b.to_list() for b in self.acls.bindings()]}

    def snapshot_due(self, now_ms: int | None = None) -> bool:
        if self.is_empty() or self.log.read_only:
            return False
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return now_ms - self.oldest_dependency_ms > self.retention_ms // 2

    def write_snapshot(self) -> None:
        self.write([("snapshot", self.snapshot_doc())])
        log.info("security_snapshot_written", offset=self.applied - 1, users=len(self.users()), acls=len(self.acls))
