"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), version 0.

SCRAM-SHA-256 (mechanism 1) and SCRAM-SHA-512 (2) credentials of ``engine.security``: the
client sends the salt, iterations and ``SaltedPassword`` (it salts the password itself), the
broker derives and stores StoredKey and ServerKey only, as records in the log. So
``kafka-configs --entity-type users --entity-name alice --alter --add-config
'SCRAM-SHA-512=[password=...]'`` and ``--delete-config SCRAM-SHA-512`` work, and
``--describe`` lists mechanisms and iterations (never keys). Describe needs DESCRIBE on the
cluster, alter ALTER (CLUSTER_AUTHORIZATION_FAILED otherwise). Errors per user as Kafka
answers them: RESOURCE_NOT_FOUND (describe of an unknown user; delete of a credential that
does not exist), UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL (iterations outside
4096..16384, empty salt or user), DUPLICATE_RESOURCE (one user twice in one request),
NOT_CONTROLLER on a slave.
"""

from __future__ import annotations

from engine.security import CredentialError, ScramCredential, SecurityStateError
from engine.security.credentials import MECHANISM_BY_ID, MECHANISMS
from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


@api(key=50, min=0, max=0, name="scram_credentials")
async def describe(ctx: RequestContext, body: dict) -> dict:
    if not authz.cluster(ctx, authz.Op.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": E.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": f"{ctx.conn.principal} may not DESCRIBE user credentials", "results": []}
    wanted = body.get("users")
    names = None if wanted is None else [u.get("name") for u in wanted]
    table = ctx.gateway.security.describe_scram(names)
    results = []
    for user in (sorted(table) if names is None else names):
        infos = table.get(user)
        if infos is None:
            results.append({"user": user, "error_code": E.RESOURCE_NOT_FOUND,
                            "error_message": "Attempt to describe a user credential that does not exist",
                            "credential_infos": []})
            continue
        results.append({"user": user, "error_code": E.NONE, "error_message": None,
                        "credential_infos": [{"mechanism": MECHANISMS[m][1], "iterations": i} for m, i in infos]})
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "results": results}


@api(key=51, min=0, max=0, name="scram_credentials")
async def alter(ctx: RequestContext, body: dict) -> dict:
    deletions = body.get("deletions") or []
    upsertions = body.get("upsertions") or []
    users = [d.get("name") or "" for d in deletions] + [u.get("name") or "" for u in upsertions]
    if not authz.cluster(ctx, authz.Op.ALTER):
        msg = f"{ctx.conn.principal} may not ALTER user credentials"
        return {"throttle_time_ms": 0, "results": [{"user": u, "error_code": E.CLUSTER_AUTHORIZATION_FAILED,
                                                    "error_message": msg} for u in dict.fromkeys(users)]}
    sec = ctx.gateway.security
    seen: dict[tuple[str, str], int] = {}
    errors: dict[str, tuple[int, str]] = {}
    for entry in list(deletions) + list(upsertions):
        name = entry.get("name") or ""
        mech = MECHANISM_BY_ID.get(entry.get("mechanism"))
        key = (name, str(mech))
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            errors[name] = (E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    for d in deletions:
        name, mech = d.get("name") or "", MECHANISM_BY_ID.get(d.get("mechanism"))
        if name in errors:
            continue
        if not name:
            errors[name] = (E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            errors[name] = (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif sec.scram_credential(name, mech) is None:
            errors[name] = (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    creds = []
    for u in upsertions:
        name, mech = u.get("name") or "", MECHANISM_BY_ID.get(u.get("mechanism"))
        if name in errors:
            continue
        if not name:
            errors[name] = (E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            continue
        if mech is None:
            errors[name] = (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            continue
        try:
            creds.append((name, ScramCredential.from_salted(mech, int(u.get("iterations") or 0), bytes(u.get("salt") or b""),
                                                            bytes(u.get("salted_password") or b""))))
        except CredentialError as exc:
            errors[name] = (E.UNACCEPTABLE_CREDENTIAL, str(exc))
    try:
        for d in deletions:
            name = d.get("name") or ""
            if name not in errors:
                sec.delete_scram(name, MECHANISM_BY_ID[d.get("mechanism")])
                ctx.gateway.log.info("scram_credential_deleted", user=name, by=ctx.conn.principal)
        for name, cred in creds:
            if name not in errors:
                sec.upsert_scram(name, cred)
                ctx.gateway.log.info("scram_credential_set", user=name, mechanism=cred.mechanism,
                                     iterations=cred.iterations, by=ctx.conn.principal)
    except SecurityStateError as exc:
        code = E.NOT_CONTROLLER if "slave" in str(exc) else E.UNKNOWN_SERVER_ERROR
        for u in users:
            errors.setdefault(u, (code, str(exc)))
    results = []
    for u in dict.fromkeys(users):
        code, msg = errors.get(u, (E.NONE, None))
        results.append({"user": u, "error_code": code, "error_message": msg})
    return {"throttle_time_ms": 0, "results": results}
