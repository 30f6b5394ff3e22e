"""RocketMQ 5's ACL 2.0 admin requests (``mqadmin createUser ... listAcl``, AUTH_CREATE_USER 3001
to AUTH_LIST_ACL 3010) onto the one policy model (docs/design/security.md, "ACL 2.0").

Users: ``UserInfo`` JSON ``{username, password, userType: Super|Normal, userStatus:
enable|disable}``. The password becomes the user's remoting/gRPC secret and its SCRAM-SHA-256/512
credentials (one user, every protocol); type and status are the user's profile record. A Super
user may do everything (as ``superUsers``); a disabled user fails authentication everywhere.

ACLs: ``AclInfo`` JSON ``{subject: "User:<name>", policies: [{policyType, entries: [{resource,
actions, sourceIps, decision}]}]}``. Each entry becomes Kafka bindings of the subject:

- resource ``Topic:<name>`` / ``Group:<name>`` / ``Cluster:<name>`` (``<prefix>*`` PREFIXED,
  ``*`` every name), ``*`` = every topic, every group and the cluster;
- actions Pub = WRITE, Sub = READ, Create = CREATE, Update = ALTER, Delete = DELETE, Get and
  List = DESCRIBE, All = ALL (read back: DESCRIBE shows as ``Get, List``);
- each source IP is a binding's host (none = ``*``); a CIDR range is refused: Kafka's hosts
  are single addresses;
- decision Allow / Deny = the binding's permission.

As RocketMQ's ``AuthorizationMetadataManagerImpl``: create and update merge into the subject's
ACL (an entry replaces the subject's entry on the same resource), the subject must be a stored
user, delete without a resource removes all of the subject's bindings. Refusals are
NO_PERMISSION with RocketMQ's remark ("The user is existed", "The subject of User:x is not
exist.", ...); a Super user can only be created or changed by a super user when the request is
signed; changes on a slave answer NO_PERMISSION "this broker is a slave".
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from typing import Any

from engine.security import (CLUSTER_NAME, AclBinding, AclError, AclFilter, CredentialError, Operation as Op,
                             PatternType as PT, Permission, ResourceType as RT, SecretBoxError, SecurityStateError, for_store,
                             principal_of)

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand
from ..transport import Connection
from . import BROKER_PROCESSORS

reg = BROKER_PROCESSORS.register

_ACTIONS = {"all": Op.ALL, "pub": Op.WRITE, "sub": Op.READ, "create": Op.CREATE, "update": Op.ALTER,
            "delete": Op.DELETE, "get": Op.DESCRIBE, "list": Op.DESCRIBE}
_ACTION_NAMES = {Op.ALL: ["All"], Op.WRITE: ["Pub"], Op.READ: ["Sub"], Op.CREATE: ["Create"], Op.ALTER: ["Update"],
                 Op.DELETE: ["Delete"], Op.DESCRIBE: ["Get", "List"]}
_TYPES = {"topic": RT.TOPIC, "group": RT.GROUP, "cluster": RT.CLUSTER}
_TYPE_NAMES = {RT.TOPIC: "Topic", RT.GROUP: "Group", RT.CLUSTER: "Cluster"}


class AuthRequestError(ValueError):
    """A request RocketMQ refuses with NO_PERMISSION and this remark."""


def _security(broker: Any) -> Any:
    return for_store(broker.store, broker.config)


def _body(cmd: RemotingCommand) -> dict:
    try:
        doc = json.loads(bytes(cmd.body or b"{}"))
    except ValueError as exc:
        raise AuthRequestError(f"the request body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise AuthRequestError("the request body must be a JSON object")
    return doc


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _signed_by_non_super(broker: Any, cmd: RemotingCommand) -> bool:
    """RocketMQ's ``isNotSuperUserLogin``: unsigned requests (authentication off) pass."""
    ak = cmd.ext_fields.get("AccessKey")
    return bool(ak) and not _security(broker).is_super(principal_of(ak))


async def _run(broker: Any, cmd: RemotingCommand, fn: Any, *args: Any) -> RemotingCommand | None:
    """Run a change on the security state off the loop; a refusal becomes its response."""
    try:
        await broker.run_blocking(fn, *args)
    except (CredentialError, AclError, AuthRequestError) as exc:
        return cmd.response(R.NO_PERMISSION, str(exc))
    except (SecurityStateError, SecretBoxError) as exc:
        return cmd.response(R.NO_PERMISSION, str(exc))
    return None


# -- users ---------------------------------------------------------------------------------------

async def _put_user(broker: Any, cmd: RemotingCommand, create: bool) -> RemotingCommand:
    user = (cmd.get_str("username") or "").strip()
    if not user:
        return cmd.response(R.INVALID_PARAMETER, "The username is blank")
    try:
        info = _body(cmd)
    except AuthRequestError as exc:
        return cmd.response(R.INVALID_PARAMETER, str(exc))
    security = _security(broker)
    user_type = info.get("userType")
    verb = "create" if create else "update"
    if _signed_by_non_super(broker, cmd):
        old = security.user_info(user)
        if str(user_type or "").lower() == "super" or (old is not None and old["userType"] == "Super" and not create):
            return cmd.response(R.SYSTEM_ERROR, f"The super user can only be {verb} by super user")
    fn = security.create_user if create else security.update_user
    refused = await _run(broker, cmd, fn, user, info.get("password"), user_type, info.get("userStatus"))
    return refused or cmd.response(R.SUCCESS)


@reg(RC.AUTH_CREATE_USER)
async def create_user(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return await _put_user(broker, cmd, create=True)


@reg(RC.AUTH_UPDATE_USER)
async def update_user(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return await _put_user(broker, cmd, create=False)


@reg(RC.AUTH_DELETE_USER)
async def delete_user(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    user = (cmd.get_str("username") or "").strip()
    security = _security(broker)
    old = security.user_info(user)
    if old is None:
        return cmd.response(R.SUCCESS)  # RocketMQ: deleting an unknown user succeeds
    if old["userType"] == "Super" and _signed_by_non_super(broker, cmd):
        return cmd.response(R.NO_PERMISSION, "The super user can only be update by super user")
    return await _run(broker, cmd, security.delete_user, user) or cmd.response(R.SUCCESS)


@reg(RC.AUTH_GET_USER)
async def get_user(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    user = (cmd.get_str("username") or "").strip()
    if not user:
        return cmd.response(R.INVALID_PARAMETER, "The username is blank")
    info = _security(broker).user_info(user)
    return cmd.response(R.SUCCESS, body=_json(info) if info is not None else b"")


@reg(RC.AUTH_LIST_USER)
async def list_user(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    users = _security(broker).list_users((cmd.get_str("filter") or "").strip() or None)
    return cmd.response(R.SUCCESS, body=_json(users) if users else b"")


# -- ACLs ----------------------------------------------------------------------------------------

def _subject(text: str | None) -> str:
    subject = (text or "").strip()
    if not subject.startswith("User:") or len(subject) <= len("User:"):
        raise AuthRequestError(f"The subject {subject!r} is not User:<name>")
    return subject


def _resources(key: str | None) -> list[tuple[RT, PT, str]]:
    """RocketMQ's ``Resource.of``: ``*``, ``Type:*``, ``Type:prefix*``, ``Type:name``."""
    key = (key or "").strip()
    if not key:
        raise AclError("The resource is null.")
    if key == "*":
        return [(RT.TOPIC, PT.LITERAL, "*"), (RT.GROUP, PT.LITERAL, "*"), (RT.CLUSTER, PT.LITERAL, CLUSTER_NAME)]
    kind, _, name = key.partition(":")
    rtype = _TYPES.get(kind.lower())
    if rtype is None:
        raise AclError(f"The resource type of {key!r} is not Topic, Group or Cluster.")
    if rtype == RT.CLUSTER:
        return [(RT.CLUSTER, PT.LITERAL, CLUSTER_NAME)]  # one cluster: the node's
    if not name or name == "*":
        return [(rtype, PT.LITERAL, "*")]
    if name.endswith("*"):
        return [(rtype, PT.PREFIXED, name[:-1])]
    return [(rtype, PT.LITERAL, name)]


def _hosts(ips: Any) -> list[str]:
    if not ips:
        return ["*"]
    out = []
    for ip in ips:
        ip = str(ip).strip()
        if not ip:
            raise AclError("The source ip is empty.")
        try:
            out.append(str(ipaddress.ip_address(ip)))
        except ValueError:
            try:
                ipaddress.ip_network(ip, strict=False)
            except ValueError:
                raise AclError("The source ip is invalid.") from None
            raise AclError(f"source ip {ip} is a range: list single addresses (ACL hosts are exact)") from None
    return out


def _entry_bindings(principal: str, entry: dict) -> tuple[list[tuple[RT, PT, str]], list[AclBinding]]:
    """One policy entry -> (the resources it names, its bindings)."""
    resources = _resources(entry.get("resource"))
    names = [str(a).strip() for a in entry.get("actions") or ()]
    if not names:
        raise AclError("The actions is empty.")
    ops: list[Op] = []
    for name in names:
        if name.lower() == "any":
            raise AclError("The actions can not be Any.")
        op = _ACTIONS.get(name.lower())
        if op is None:
            raise AclError(f"The action {name!r} is not one of All, Pub, Sub, Create, Update, Delete, Get, List.")
        if op not in ops:
            ops.append(op)
    decision = str(entry.get("decision") or "").strip().lower()
    if decision not in ("allow", "deny"):
        raise AclError("The decision is null or illegal.")
    perm = Permission.ALLOW if decision == "allow" else Permission.DENY
    bindings = [AclBinding(t, p, n, principal, host, op, perm)
                for t, p, n in resources for host in _hosts(entry.get("sourceIps")) for op in ops]
    return resources, bindings


def _merge_acl(security: Any, subject: str, info: dict) -> None:
    """createAcl / updateAcl: each entry replaces the subject's bindings on its resources."""
    if not security.user_info(subject[len("User:"):]):
        raise AuthRequestError(f"The subject of {subject} is not exist.")
    policies = info.get("policies") or []
    if not policies:
        raise AclError("The policies is empty.")
    replaced: list[AclFilter] = []
    added: list[AclBinding] = []
    for policy in policies:
        entries = (policy or {}).get("entries") or []
        if not entries:
            raise AclError("The policy entries is empty.")
        for entry in entries:
            resources, bindings = _entry_bindings(subject, entry or {})
            replaced += [AclFilter(resource_type=t, pattern_type=p, resource_name=n, principal=subject)
                         for t, p, n in resources]
            added += bindings
    security.replace_acls(replaced, added)


async def _put_acl(broker: Any, cmd: RemotingCommand) -> RemotingCommand:
    try:
        info = _body(cmd)
        subject = _subject(info.get("subject") or cmd.get_str("subject"))
    except AuthRequestError as exc:
        return cmd.response(R.NO_PERMISSION, str(exc))
    return await _run(broker, cmd, _merge_acl, _security(broker), subject, info) or cmd.response(R.SUCCESS)


@reg(RC.AUTH_CREATE_ACL)
async def create_acl(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return await _put_acl(broker, cmd)


@reg(RC.AUTH_UPDATE_ACL)
async def update_acl(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return await _put_acl(broker, cmd)


def _delete_acl(security: Any, subject: str, resource: str | None) -> None:
    if not security.user_info(subject[len("User:"):]):
        raise AuthRequestError("The subject is not exist.")
    if not security.describe_acls(AclFilter(principal=subject)):
        raise AuthRequestError("The acl is not exist.")
    if resource:
        security.delete_acls([AclFilter(resource_type=t, pattern_type=p, resource_name=n, principal=subject)
                              for t, p, n in _resources(resource)])
    else:
        security.delete_acls([AclFilter(principal=subject)])


@reg(RC.AUTH_DELETE_ACL)
async def delete_acl(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        subject = _subject(cmd.get_str("subject"))
    except AuthRequestError as exc:
        return cmd.response(R.NO_PERMISSION, str(exc))
    resource = (cmd.get_str("resource") or "").strip() or None
    return await _run(broker, cmd, _delete_acl, _security(broker), subject, resource) or cmd.response(R.SUCCESS)


def _resource_key(b: AclBinding, cluster: str) -> str:
    kind = _TYPE_NAMES.get(b.resource_type, b.resource_type.name.title())
    if b.resource_type == RT.CLUSTER:
        return f"Cluster:{cluster}"
    if b.pattern_type == PT.PREFIXED:
        return f"{kind}:{b.resource_name}*"
    return f"{kind}:{b.resource_name}"


def acl_infos(bindings: list[AclBinding], cluster: str) -> list[dict]:
    """Bindings -> RocketMQ ``AclInfo`` documents, one per subject, one Custom policy each;
    bindings that differ only in operation (or only in host) share an entry."""
    grouped: dict[str, dict[tuple, dict]] = {}
    for b in sorted(bindings, key=lambda b: (b.principal, int(b.resource_type), b.resource_name, b.host)):
        key = (_resource_key(b, cluster), b.permission)
        entry = grouped.setdefault(b.principal, {}).setdefault(
            key, {"resource": key[0], "actions": [], "hosts": set(),
                  "decision": "Allow" if b.permission == Permission.ALLOW else "Deny"})
        for name in _ACTION_NAMES.get(b.operation, [b.operation.name]):
            if name not in entry["actions"]:
                entry["actions"].append(name)
        entry["hosts"].add(b.host)
    out = []
    for subject, entries in grouped.items():
        infos = []
        for e in entries.values():
            hosts = sorted(h for h in e.pop("hosts") if h != "*")
            if hosts:
                e["sourceIps"] = hosts
            infos.append(e)
        out.append({"subject": subject, "policies": [{"policyType": "Custom", "entries": infos}]})
    return out


@reg(RC.AUTH_GET_ACL)
async def get_acl(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    try:
        subject = _subject(cmd.get_str("subject"))
    except AuthRequestError as exc:
        return cmd.response(R.NO_PERMISSION, str(exc))
    security = _security(broker)
    if not security.user_info(subject[len("User:"):]):
        return cmd.response(R.NO_PERMISSION, "The subject is not exist.")
    infos = acl_infos(security.describe_acls(AclFilter(principal=subject)), broker.broker_config.broker_cluster_name)
    return cmd.response(R.SUCCESS, body=_json(infos[0]) if infos else b"")


@reg(RC.AUTH_LIST_ACL)
async def list_acl(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    subject_filter = (cmd.get_str("subjectFilter") or "").strip()
    resource_filter = (cmd.get_str("resourceFilter") or "").strip()
    bindings = [b for b in _security(broker).describe_acls(AclFilter())
                if b.principal.startswith("User:") and subject_filter in b.principal]
    infos = acl_infos(bindings, broker.broker_config.broker_cluster_name)
    if resource_filter:
        for info in infos:
            for policy in info["policies"]:
                policy["entries"] = [e for e in policy["entries"] if resource_filter in e["resource"]]
        infos = [i for i in infos if i["policies"][0]["entries"]]
    return cmd.response(R.SUCCESS, body=_json(infos) if infos else b"")


# -- a NameServer's question (namesrv.BrokerAuthDelegate) ----------------------------------------

@reg(RC.AUTH_CHECK_FOR_NAMESRV)
async def check_for_namesrv(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    """Whether a client's request to a NameServer is signed by a user of this broker and allowed:
    ``accessKey``, ``signature``, ``host`` (the client's), ``checks`` (JSON ``[[operation,
    resourceType, name], ...]``, Kafka's enum numbers), body = the signed content. The gate let
    only principals with CLUSTER_ACTION (the NameServer's inner credentials) in. SUCCESS or
    NO_PERMISSION with the reason the NameServer passes on to its client."""
    from ..remoting import acl

    security = _security(broker)
    ak, given, host = cmd.get_str("accessKey") or "", cmd.get_str("signature") or "", cmd.get_str("host") or "*"
    try:
        checks = [(Op(int(o)), RT(int(t)), str(n)) for o, t, n in json.loads(cmd.get_str("checks") or "[]")]
    except (ValueError, TypeError):
        return cmd.response(R.INVALID_PARAMETER, "checks must be [[operation, resourceType, name], ...]")
    wait = security.throttled(ak, host)
    if wait:
        security.failed("namesrv", "throttled", host, ak)
        return cmd.response(R.NO_PERMISSION, f"too many failed authentications for AccessKey {ak} or this address; "
                                             f"retry after {max(1, int(wait * 1000))} ms")
    secret = security.secret_of(ak)
    if secret is None:
        security.failed("namesrv", "unknown_user", host, ak)
        return cmd.response(R.NO_PERMISSION, f"signature check failed: unknown AccessKey {ak}")
    if not given or not hmac.compare_digest(acl.signature(bytes(cmd.body or b""), secret), given):
        security.failed("namesrv", "bad_signature", host, ak)
        return cmd.response(R.NO_PERMISSION, f"signature check failed for AccessKey {ak}: the Signature does not "
                                             "match the request (wrong secret key?)")
    principal = principal_of(ak)
    for op, rtype, name in checks:
        if not security.authorize(principal, op, rtype, name, host, "namesrv"):
            return cmd.response(R.NO_PERMISSION, f"{principal} may not {op.name} {rtype.name} {name}; grant it "
                                                 "with an ACL")
    return cmd.response(R.SUCCESS)
