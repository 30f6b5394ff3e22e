"""UPDATE_AND_CREATE_ACL_CONFIG (50) and DELETE_ACL_CONFIG (51): RocketMQ 4.x's ACL admin
requests (``mqadmin updateAclConfig`` / ``deleteAccessConfig``), onto the one policy model.

Header fields as RocketMQ's PlainAccessConfig: ``accessKey``, ``secretKey`` (stored as the
user's remoting secret: the signature is keyed with it), ``admin`` (true: ALL on the cluster,
every topic and every group), ``topicPerms`` / ``groupPerms`` (``name=PUB|SUB``, ``DENY``,
``ANY``, comma separated) which become LITERAL bindings for ``User:<accessKey>`` (PUB = WRITE,
SUB = READ, DENY = DENY ALL), ``defaultTopicPerm`` / ``defaultGroupPerm`` (the same, on ``*``).
``whiteRemoteAddress`` is accepted and not enforced. The gate requires ALTER on the cluster.
DELETE_ACL_CONFIG removes the secret and every binding of the user. Changes are records in the
log (engine.security); on a slave they answer NO_PERMISSION "this broker is a slave".
"""

from __future__ import annotations

from typing import Any

from engine.security import (AclBinding, AclError, AclFilter, Operation as Op, PatternType, Permission, ResourceType as RT,
                             SecretBoxError, SecurityStateError, for_store)

from ..remoting.codes import ResponseCode as R
from ..remoting.command import RemotingCommand
from ..transport import Connection
from . import BROKER_PROCESSORS

UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG = 50, 51
reg = BROKER_PROCESSORS.register


def _perm_bindings(principal: str, rtype: RT, name: str, perm: str) -> list[AclBinding]:
    perm = perm.strip().upper()
    ops: list[tuple[Op, Permission]] = []
    if perm == "DENY":
        ops = [(Op.ALL, Permission.DENY)]
    elif perm == "ANY":
        ops = [(Op.READ, Permission.ALLOW), (Op.WRITE, Permission.ALLOW)]
    else:
        for part in filter(None, perm.split("|")):
            if part == "PUB":
                ops.append((Op.WRITE, Permission.ALLOW))
            elif part == "SUB":
                ops.append((Op.READ, Permission.ALLOW))
            else:
                raise AclError(f"permission {part!r} is not PUB, SUB, PUB|SUB, ANY or DENY")
    return [AclBinding(rtype, PatternType.LITERAL, name, principal, "*", op, p) for op, p in ops]


def _perm_list(text: str | None, principal: str, rtype: RT) -> list[AclBinding]:
    out: list[AclBinding] = []
    for item in filter(None, (p.strip() for p in (text or "").split(","))):
        if "=" not in item:
            raise AclError(f"{item!r} is not name=PERM")
        name, perm = item.split("=", 1)
        out.extend(_perm_bindings(principal, rtype, name.strip(), perm))
    return out


@reg(UPDATE_AND_CREATE_ACL_CONFIG)
async def update_acl_config(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    ak, sk = cmd.get_str("accessKey") or "", cmd.get_str("secretKey") or ""
    if not ak or not sk:
        return cmd.response(R.SYSTEM_ERROR, "accessKey and secretKey are required")
    principal = f"User:{ak}"
    try:
        bindings = _perm_list(cmd.get_str("topicPerms"), principal, RT.TOPIC)
        bindings += _perm_list(cmd.get_str("groupPerms"), principal, RT.GROUP)
        for rtype, key in ((RT.TOPIC, "defaultTopicPerm"), (RT.GROUP, "defaultGroupPerm")):
            if cmd.get_str(key):
                bindings += _perm_bindings(principal, rtype, "*", cmd.get_str(key))
        if cmd.get_bool("admin"):
            bindings += [AclBinding(t, PatternType.LITERAL, n, principal, "*", Op.ALL, Permission.ALLOW)
                         for t, n in ((RT.CLUSTER, "kafka-cluster"), (RT.TOPIC, "*"), (RT.GROUP, "*"))]
        security = for_store(broker.store, broker.config)
        await broker.run_blocking(security.set_secret, ak, sk)
        if bindings:
            await broker.run_blocking(security.create_acls, bindings)
    except AclError as exc:
        return cmd.response(R.SYSTEM_ERROR, f"bad ACL config: {exc}")
    except (SecurityStateError, SecretBoxError) as exc:
        return cmd.response(R.NO_PERMISSION, str(exc))
    return cmd.response(R.SUCCESS)


@reg(DELETE_ACL_CONFIG)
async def delete_acl_config(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    ak = cmd.get_str("accessKey") or ""
    if not ak:
        return cmd.response(R.SYSTEM_ERROR, "accessKey is required")
    security = for_store(broker.store, broker.config)
    try:
        await broker.run_blocking(security.delete_secret, ak)
        await broker.run_blocking(security.delete_acls, [AclFilter(principal=f"User:{ak}")])
    except SecurityStateError as exc:
        return cmd.response(R.NO_PERMISSION, str(exc))
    return cmd.response(R.SUCCESS)
