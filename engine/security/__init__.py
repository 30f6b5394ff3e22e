"""Security, one model for every listener: principals, credentials, policies (docs/design/security.md).

``SecurityService`` (one per store: ``for_store(store, config)``) is what every gateway asks:

- *who is this*: ``scram_session(mechanism)`` (Kafka SCRAM), ``verify_password(user, pw)``
  (SASL PLAIN, admin HTTP Basic), ``secret_of(access_key)`` (the remoting signature's key; the
  node's own inner credentials included), ``verify_hello`` (the HA port);
- *may it*: ``authorize(principal, op, resource_type, name, host)`` — Kafka's ACL decision,
  super users, deny by default once ``authorizationEnabled``, the node's internal topics to
  super users only (``reads``); with authorization off every principal may do everything
  except read the security topic itself; ``may_read(principal, topic)``, the check of every
  read path;
- *changes*: SCRAM credentials, remoting secrets and ACL bindings, recorded in the log
  (``state.SecurityState``) and refused on a slave;
- *failures*: ``throttled(user, peer)`` says whether a credential may be checked now (the
  node's ``throttle.AuthThrottle``, across connections and listeners); ``failed(listener,
  reason, ...)`` counts and logs a failed authentication, feeds the throttle and returns how
  long to hold the answer (``connection.failed.authentication.delay.ms``).

Secrets: SCRAM credentials are salted keys; remoting secrets are sealed in the log
(``secret_box.SecretBox``, a key outside the log) and open only in memory. Nothing here logs,
answers or counts a password or a secret.

Gateways map their protocol to this model and never keep users or ACLs of their own. The
engine knows no wire format: principals are strings ``User:<name>``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from typing import Any

import structlog
from prometheus_client import Counter

from .. import metrics
from .acl import (ANONYMOUS, CLUSTER_NAME, AclBinding, AclError, AclFilter, Operation, PatternType, Permission,
                  ResourceType, parse_principals)
from .credentials import MECHANISMS, CredentialError, ScramCredential, ScramSession
from . import reads
from .secret_box import SecretBox, SecretBoxError, default_key_path
from .state import SECURITY_TOPIC, SecurityLog, SecurityState, SecurityStateError
from .throttle import AuthThrottle

__all__ = ["ANONYMOUS", "CLUSTER_NAME", "AclBinding", "AclError", "AclFilter", "CredentialError", "MECHANISMS",
           "Operation", "PatternType", "hello_signature", "Permission", "ResourceType", "SECURITY_TOPIC", "ScramCredential",
           "SecurityService", "SecurityStateError", "SecretBoxError", "MASKED", "for_store", "principal_of", "user_of", "parse_pair"]

log = structlog.get_logger("rockafka.engine.security")

AUTH_FAILURES = Counter("rockafka_authentication_failures", "Failed authentications, by listener and reason "
                        "(bad_password, unknown_user, bad_signature, bad_certificate, not_authenticated, ...).",
                        ["listener", "reason"], registry=metrics.REGISTRY)
AUTH_SUCCESSES = Counter("rockafka_authentication_successes", "Successful authentications, by listener and "
                         "mechanism.", ["listener", "mechanism"], registry=metrics.REGISTRY)
# a presented credential that was checked and failed: what feeds the throttle ("not_authenticated"
# presented none, "throttled" was refused unchecked, a TLS failure names no user)
GUESS_REASONS = frozenset({"bad_password", "unknown_user", "bad_signature", "malformed_token", "authzid_differs"})

AUTHZ_DENIALS = Counter("rockafka_authorization_denials", "Requests (or resources of a request) refused by the "
                        "authorizer, by listener and operation.", ["listener", "operation"], registry=metrics.REGISTRY)

HELLO_MAX_SKEW_MS = 5 * 60 * 1000
MASKED = "******"  # what a stored password or secret reads back as

USER_SUPER, USER_NORMAL = "Super", "Normal"  # RocketMQ 5's UserType names
USER_ENABLED, USER_DISABLED = "enable", "disable"  # and UserStatus names


def _user_type(name: str | None) -> str | None:
    if not name:
        return None
    for known in (USER_SUPER, USER_NORMAL):
        if name.lower() == known.lower():
            return known
    raise CredentialError(f"user type {name!r} is not Super or Normal")


def _user_status(name: str | None) -> str | None:
    if not name:
        return None
    if name.lower() in (USER_ENABLED, USER_DISABLED):
        return name.lower()
    raise CredentialError(f"user status {name!r} is not enable or disable")


def principal_of(user: str) -> str:
    return f"User:{user}"


def user_of(principal: str) -> str:
    return principal.split(":", 1)[1] if ":" in principal else principal


def parse_pair(text: str | None, first: str, second: str) -> tuple[str, str] | None:
    """``{"first": "...", "second": "..."}`` (RocketMQ 5's JSON form) or ``first:second``."""
    if not text or not text.strip():
        return None
    text = text.strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
            return str(doc[first]), str(doc[second])
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"expected {{\"{first}\": ..., \"{second}\": ...}}, got {text[:40]!r}...") from None
    if ":" not in text:
        raise ValueError(f"expected {first}:{second} or JSON, got a value without ':'")
    a, b = text.split(":", 1)
    return a.strip(), b


class SecurityService:
    def __init__(self, store: Any, config: Any = None):
        from ..config import NodeConfig

        self.store = store
        self.config = config or NodeConfig()
        sec = self.config.security
        self.authentication_enabled: bool = sec.authentication_enabled
        self.authorization_enabled: bool = sec.authorization_enabled
        self.failure_delay_s: float = sec.connection_failed_authentication_delay_ms / 1000.0
        self.reauth_ms: int = sec.connections_max_reauth_ms
        self.init_user = parse_pair(sec.init_authentication_user, "username", "password")
        self.inner = parse_pair(sec.inner_client_authentication_credentials, "accessKey", "secretKey")
        supers = set(parse_principals(sec.super_users))
        if self.init_user:
            supers.add(principal_of(self.init_user[0]))
        if self.inner:
            supers.add(principal_of(self.inner[0]))
        self.super_users = frozenset(supers)
        # SASL PLAIN users from the config file (clear text; kept for nodes set up before SCRAM)
        self.legacy_plain: dict[str, str] = {}
        for pair in (self.config.extra_str("sasl_plain_users", "") or "").split(","):
            if ":" in pair:
                user, password = pair.split(":", 1)
                self.legacy_plain[user.strip()] = password
        retention_ms = int(self.config.store.file_reserved_time) * 3600 * 1000
        from .state import NoLog

        self.throttle = AuthThrottle(sec.authentication_failure_rate_per_user, sec.authentication_failure_rate_per_source,
                                     sec.authentication_lockout_threshold, sec.authentication_lockout_window_ms)
        # the store's own root (it may differ from the node config's in embedded use)
        root = getattr(getattr(store, "config", None), "store_path_root_dir", None) or self.config.data_dir
        key_path = sec.auth_secret_key_path or (default_key_path(root) if store is not None else None)
        self.box = SecretBox(key_path)
        self.state = SecurityState(SecurityLog(store) if store is not None else NoLog(), retention_ms, self.box)
        self._started = False
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._promoted = False  # a slave became master: bootstrap as at a master's start, once writable
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.state.start()
        if self.legacy_plain:
            log.warning("sasl_plain_users_in_clear_text", users=sorted(self.legacy_plain),
                        hint="create SCRAM credentials (kafka-configs --entity-type users) and drop sasl_plain_users")
        if self.store is not None and not self.store.is_slave:
            self._bootstrap()
        listeners = getattr(self.store, "role_listeners", None)
        if listeners is not None and self._role_changed not in listeners:
            listeners.append(self._role_changed)
        self._stop.clear()
        self._thread = threading.Thread(target=self._housekeeping, name="security-snapshot", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        listeners = getattr(self.store, "role_listeners", None)
        if listeners is not None and self._role_changed in listeners:
            listeners.remove(self._role_changed)
        self.state.stop()
        self._started = False

    def _bootstrap(self) -> None:
        if self.init_user and not self.state.users():
            user, password = self.init_user
            # salted SCRAM keys, and the password as the user's remoting/gRPC secret, sealed
            # (secret_box.py): the bootstrap user signs RocketMQ requests as it logs in over Kafka
            self.state.write([("scram", ScramCredential.from_password(m, password).to_doc(user)) for m in MECHANISMS]
                             + [("secret", self.state.sealed_secret_doc(user, password))])
            log.info("security_init_user_created", user=user, mechanisms=list(MECHANISMS), remoting_secret=True)
        if self.state.reseal_needed:
            # secrets in clear (written by an earlier version) or sealed with a retired key:
            # re-written sealed with the current key (a snapshot: replay starts there)
            users = sorted(self.state.reseal_needed)
            self.state.write_snapshot()
            if not self.state.reseal_needed:
                self.box.forget_previous()
            log.info("security_secrets_resealed", users=len(users), kid=self.box.current_kid)
        elif self.state.snapshot_due():
            self.state.write_snapshot()

    def rotate_key(self) -> str:
        """A new sealing key (``secret_box.SecretBox.rotate``) and every secret re-sealed with it
        by a snapshot appended through the one writer; then the old key leaves the key file.
        Returns the new key id. Master only."""
        if self.store is None or self.store.is_slave:
            raise SecurityStateError("this broker is a slave: rotate the key on the master")
        kid = self.box.rotate()
        self.state.write_snapshot()
        if not self.state.reseal_needed:
            self.box.forget_previous()
        log.info("security_secrets_resealed", users=len(self.state.secrets), kid=kid)
        return kid

    def _role_changed(self, role: str, _epoch: int) -> None:
        """A slave became master (failover; every broker under a controller starts as a slave):
        the security topic and ``initAuthenticationUser`` are created as at a master's start —
        from the housekeeping thread, once the store takes writes (the new master's lease)."""
        if role != "SLAVE":
            self._promoted = True
            self._wake.set()

    def _after_promotion(self) -> None:
        try:
            self.state.catch_up()  # what replication brought
            self.state.log.ensure_topic()
            self._bootstrap()
            self._promoted = False
        except SecurityStateError as exc:  # not writable yet: again in a second
            log.info("security_bootstrap_deferred", error=str(exc))

    def _housekeeping(self) -> None:
        next_snapshot = time.monotonic() + 600
        while not self._stop.is_set():
            self._wake.wait(1.0 if self._promoted else max(0.0, next_snapshot - time.monotonic()))
            self._wake.clear()
            if self._stop.is_set():
                break
            if self._promoted and self.store is not None and not self.store.is_slave:
                self._after_promotion()
            if time.monotonic() < next_snapshot:
                continue
            next_snapshot = time.monotonic() + 600
            try:
                if self.state.snapshot_due():
                    self.state.write_snapshot()
            except Exception:
                log.exception("security_snapshot_failed")

    # -- who is this -------------------------------------------------------------------------
    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return None if self._disabled(user) else self.state.scram.get((user, mechanism))

    def _disabled(self, user: str) -> bool:
        profile = self.state.profiles.get(user)
        return profile is not None and profile["status"] == USER_DISABLED

    def scram_session(self, mechanism: str) -> ScramSession:
        return ScramSession(mechanism, self.scram_credential)

    def verify_password(self, user: str, password: bytes) -> bool:
        """A password against the user's stored SCRAM credential (either mechanism), else the
        clear-text ``sasl_plain_users`` of the config file."""
        if self._disabled(user):
            return False
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            cred = self.scram_credential(user, mechanism)
            if cred is not None:
                return cred.matches_password(password)
        expected = self.legacy_plain.get(user)
        if expected is None and self.inner is not None and user == self.inner[0]:
            expected = self.inner[1]  # the nodes' own credentials (a coordinator's WriteTxnMarkers)
        return expected is not None and hmac.compare_digest(expected.encode("utf-8"), password)

    def knows_user(self, user: str) -> bool:
        return user in self.state.users() or user in self.legacy_plain or (self.inner is not None and user == self.inner[0])

    def secret_of(self, access_key: str) -> str | None:
        if self.inner is not None and access_key == self.inner[0]:
            return self.inner[1]
        return None if self._disabled(access_key) else self.state.secrets.get(access_key)

    # -- may it -------------------------------------------------------------------------------
    def is_super(self, principal: str) -> bool:
        """``superUsers`` (config) or a user whose type is Super (RocketMQ 5's ``userType``)."""
        if principal in self.super_users:
            return True
        profile = self.state.profiles.get(user_of(principal)) if principal.startswith("User:") else None
        return profile is not None and profile["type"] == USER_SUPER and profile["status"] != USER_DISABLED

    def authorize(self, principal: str, op: Operation, rtype: ResourceType, name: str, host: str = "*",
                  listener: str | None = None) -> bool:
        if self.is_super(principal):
            return True
        if rtype == ResourceType.TOPIC and name == SECURITY_TOPIC:
            allowed = False  # credentials: never served to clients, whatever the ACLs say
        elif not self.authorization_enabled:
            return True
        elif rtype == ResourceType.TOPIC and not reads.ordinary_may(op, name):
            allowed = False  # the node's internal topics (engine/security/reads.py)
        else:
            allowed = self.state.acls.allowed(principal, host, op, rtype, name)
        if not allowed and listener is not None:
            AUTHZ_DENIALS.labels(listener, op.name).inc()
        return allowed

    def may_read(self, principal: str, topic: str, host: str = "*", listener: str | None = None) -> bool:
        """The one check of every read path (``reads.READ_PATHS``): may ``principal`` read the
        messages of ``topic`` (READ on it, or on the group of a retry / DLQ topic)."""
        op, rtype, name = reads.read_resource(topic)
        return self.authorize(principal, op, rtype, name, host, listener)

    def may_on_any(self, principal: str, op: Operation, rtype: ResourceType) -> bool:
        """Whether some ALLOW binding gives ``principal`` ``op`` on a resource of ``rtype`` and no
        DENY takes it back on every name (Kafka's authorizeByResourceType: an idempotent
        producer needs WRITE on any topic, or IDEMPOTENT_WRITE on the cluster)."""
        if self.is_super(principal) or not self.authorization_enabled:
            return True
        ok = False
        for b in self.state.acls.bindings():
            if b.resource_type != rtype or b.principal not in (principal, "User:*"):
                continue
            if b.operation not in (op, Operation.ALL):
                continue
            if b.permission == Permission.DENY and b.pattern_type == PatternType.LITERAL and b.resource_name == "*":
                return False
            if b.permission == Permission.ALLOW:
                ok = True
        return ok

    def authorize_cluster(self, principal: str, op: Operation, host: str = "*", listener: str | None = None) -> bool:
        return self.authorize(principal, op, ResourceType.CLUSTER, CLUSTER_NAME, host, listener)

    # -- failures ---------------------------------------------------------------------------------
    def throttled(self, user: str | None, peer: str | None) -> float:
        """0.0 when a credential of ``user`` presented from ``peer`` may be checked now; else
        the seconds until one would be (refuse it unchecked: a guess is not evaluated)."""
        return self.throttle.admit(user, peer)

    def failed(self, listener: str, reason: str, peer: str = "?", user: str | None = None, **fields: Any) -> float:
        """Count and log a failed authentication (a guess feeds the throttle); returns the
        seconds to hold the answer."""
        AUTH_FAILURES.labels(listener, reason).inc()
        if reason in GUESS_REASONS:
            self.throttle.failed(user, peer)
        log.warning("authentication_failed", listener=listener, reason=reason, peer=peer, user=user, **fields)
        return self.failure_delay_s

    def throttled_hold(self, wait_s: float) -> float:
        """How long to hold a refusal for throttling: the failure delay, up to a second while
        checks are not due (each guessing connection waits for its answer)."""
        return max(self.failure_delay_s, min(wait_s, 1.0))

    def succeeded(self, listener: str, mechanism: str, principal: str, peer: str = "?",
                  reauthenticated: bool = False) -> None:
        AUTH_SUCCESSES.labels(listener, mechanism).inc()
        log.info("authenticated", listener=listener, mechanism=mechanism, principal=principal, peer=peer,
                 reauthenticated=reauthenticated)

    # -- changes (master only) ---------------------------------------------------------------------
    def upsert_scram(self, user: str, cred: ScramCredential) -> None:
        if not user:
            raise CredentialError("user name is empty")
        self.state.write([("scram", cred.to_doc(user))])

    def delete_scram(self, user: str, mechanism: str) -> bool:
        if (user, mechanism) not in self.state.scram:
            return False
        self.state.write([("scram-", {"v": 1, "user": user, "mechanism": mechanism})])
        return True

    def describe_scram(self, users: list[str] | None = None) -> dict[str, list[tuple[str, int]]]:
        out: dict[str, list[tuple[str, int]]] = {}
        for (user, mech), cred in sorted(self.state.scram.items()):
            if users is None or user in users:
                out.setdefault(user, []).append((mech, cred.iterations))
        return out

    def set_secret(self, user: str, secret: str) -> None:
        if not user or not secret:
            raise CredentialError("access key and secret key must not be empty")
        self.state.write([("secret", self.state.sealed_secret_doc(user, secret))])

    def delete_secret(self, user: str) -> bool:
        if user not in self.state.secrets and user not in self.state.sealed_kept:
            return False
        self.state.write([("secret-", {"v": 1, "user": user})])
        return True

    # -- users as RocketMQ 5 (ACL 2.0) sees them: one password, a type, a status --------------
    def user_info(self, user: str) -> dict[str, str] | None:
        """``{username, password, userType, userStatus}`` of a stored user, else None. The
        password is never shown: ``******`` when the user has a remoting secret, empty for a
        user that has SCRAM credentials only (RocketMQ shows it; a secret read back over the
        wire is a secret leaked)."""
        if user not in self.state.users():
            return None
        profile = self.state.profiles.get(user) or {"type": "Normal", "status": USER_ENABLED}
        return {"username": user, "password": MASKED if user in self.state.secrets or user in self.state.sealed_kept else "", "userType": profile["type"],
                "userStatus": profile["status"]}

    def list_users(self, name_filter: str | None = None) -> list[dict[str, str]]:
        """Every stored user whose name contains ``name_filter`` (RocketMQ's listUser filter)."""
        names = sorted(u for u in self.state.users() if not name_filter or name_filter in u)
        return [info for info in map(self.user_info, names) if info is not None]

    def create_user(self, user: str, password: str, user_type: str | None, status: str | None) -> None:
        """A user with one password: its remoting/gRPC secret and SCRAM-SHA-256/512 credentials
        (so the same name and password sign RocketMQ requests and log in over Kafka SASL)."""
        if not user:
            raise CredentialError("username can not be blank")
        if not password:
            raise CredentialError("password can not be blank")
        if user in self.state.users():
            raise CredentialError("The user is existed")
        self._write_user(user, password, _user_type(user_type) or "Normal", _user_status(status) or USER_ENABLED)

    def update_user(self, user: str, password: str | None, user_type: str | None, status: str | None) -> None:
        old = self.user_info(user)
        if old is None:
            raise CredentialError("The user is not exist")
        if password == MASKED:
            password = None  # a getUser answer sent back unchanged keeps the password
        self._write_user(user, password or None, _user_type(user_type) or old["userType"],
                         _user_status(status) or old["userStatus"])

    def _write_user(self, user: str, password: str | None, user_type: str, status: str) -> None:
        records: list[tuple[str, dict]] = []
        if password:
            records += [("scram", ScramCredential.from_password(m, password).to_doc(user)) for m in MECHANISMS]
            records.append(("secret", self.state.sealed_secret_doc(user, password)))
        records.append(("profile", {"v": 1, "user": user, "type": user_type, "status": status}))
        self.state.write(records)

    def delete_user(self, user: str) -> bool:
        """Removes the user's credentials and profile (its ACLs stay, as RocketMQ keeps them)."""
        if user not in self.state.users():
            return False
        records: list[tuple[str, dict]] = [("scram-", {"v": 1, "user": user, "mechanism": m})
                                           for (u, m) in self.state.scram if u == user]
        if user in self.state.secrets or user in self.state.sealed_kept:
            records.append(("secret-", {"v": 1, "user": user}))
        if user in self.state.profiles:
            records.append(("profile-", {"v": 1, "user": user}))
        self.state.write(records)
        return True

    def create_acls(self, bindings: list[AclBinding]) -> None:
        for b in bindings:
            b.validate()
        self.state.write([("acl", {"v": 1, "binding": b.to_list()}) for b in bindings])

    def delete_acls(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        matched = [self.state.acls.matching(f) for f in filters]
        gone: dict[AclBinding, None] = {}
        for group in matched:
            gone.update(dict.fromkeys(group))
        if gone:
            self.state.write([("acl-", {"v": 1, "binding": b.to_list()}) for b in gone])
        return matched

    def replace_acls(self, filters: list[AclFilter], bindings: list[AclBinding]) -> None:
        """Removes what ``filters`` match and adds ``bindings``, in one write (RocketMQ's ACL
        update: an entry replaces the subject's entry on the same resource)."""
        for b in bindings:
            b.validate()
        gone: dict[AclBinding, None] = {}
        for f in filters:
            gone.update(dict.fromkeys(self.state.acls.matching(f)))
        self.state.write([("acl-", {"v": 1, "binding": b.to_list()}) for b in gone]
                         + [("acl", {"v": 1, "binding": b.to_list()}) for b in bindings])

    def describe_acls(self, f: AclFilter) -> list[AclBinding]:
        return self.state.acls.matching(f)

    # -- node to node ----------------------------------------------------------------------------
    def verify_hello(self, identity: bytes, auth: dict[str, Any] | None) -> tuple[str | None, str]:
        """(principal, "") when ``auth`` is a valid signature of ``identity``, else (None, why)."""
        if not isinstance(auth, dict):
            return None, "the HELLO carries no credentials (set innerClientAuthenticationCredentials on the slave)"
        ak, ts, sig = str(auth.get("accessKey") or ""), auth.get("timestamp"), str(auth.get("signature") or "")
        secret = self.secret_of(ak)
        if secret is None or not isinstance(ts, int):
            return None, f"unknown access key {ak!r}"
        if abs(int(time.time() * 1000) - ts) > HELLO_MAX_SKEW_MS:
            return None, "the HELLO timestamp is more than 5 minutes from the master's clock"
        expected = hmac.new(secret.encode("utf-8"), identity + str(ts).encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, sig):
            return None, f"signature check failed for access key {ak!r}"
        return principal_of(ak), ""


def hello_signature(credentials: tuple[str, str], identity: bytes, timestamp_ms: int | None = None) -> dict[str, Any]:
    """What authenticates an HA HELLO: HMAC-SHA256(secret, identity ‖ timestamp) with the
    access key and timestamp; the master accepts it within 5 minutes of its clock."""
    ak, sk = credentials
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    sig = hmac.new(sk.encode("utf-8"), identity + str(ts).encode(), hashlib.sha256).hexdigest()
    return {"accessKey": ak, "timestamp": ts, "signature": sig}


_lock = threading.Lock()


def for_store(store: Any, config: Any = None) -> SecurityService:
    """The store's security service, created and started on first use."""
    svc = getattr(store, "_security_service", None)
    if svc is not None:
        return svc
    with _lock:
        svc = getattr(store, "_security_service", None)
        if svc is None:
            svc = SecurityService(store, config)
            svc.start()
            store._security_service = svc
    return svc
