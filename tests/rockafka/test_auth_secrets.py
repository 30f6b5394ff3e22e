"""No secret at rest in the clear, and guessing throttled across connections
(docs/design/security.md, "Credentials", "Where credentials and policies are stored",
"Throttled guessing").

A secured node gets users on every path that makes one — the bootstrap ``initAuthenticationUser``,
Kafka's AlterUserScramCredentials, RocketMQ 5's createUser / updateUser (remoting codes 3001 /
3002), RocketMQ's updateAclConfig (code 50, ``rockafka admin acl set-user``) — the users sign in
with what they were given, and then neither the data directory nor the node's log holds any of
those passwords or secrets. Sixteen connections guessing one user's password get at most five
checks a second (counted from the answers), while another user still logs in.
"""

from __future__ import annotations

import asyncio
import json
import mmap
import os
import subprocess
import time

import pytest

from tests.support.node import RunningNode, free_port, rockafka_command

pytestmark = pytest.mark.timeout(180)

ADMIN_PW = "Bootstrap-Pw-7f3a91"
SECRETS = {
    "kafkauser": "Kafka-Scram-Pw-52c8e0",
    "rmquser": "Rmq-CreateUser-Pw-1d44b2",
    "rmquser-updated": "Rmq-UpdateUser-Pw-9e07aa",
    "akuser": "AclConfig-Secret-3b61fd",
}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    base = tmp_path_factory.mktemp("secrets")
    n = RunningNode(base / "data", settings={
        "authenticationEnabled": "true", "authorizationEnabled": "true",
        "initAuthenticationUser": f"admin:{ADMIN_PW}", "innerClientAuthenticationCredentials": "node:Inner-Secret-0c1f",
        "connection.failed.authentication.delay.ms": "10"})
    n.sasl_port = free_port()
    n.settings.update({"listeners": f"PLAINTEXT://127.0.0.1:{n.kafka_port},SASL_PLAINTEXT://127.0.0.1:{n.sasl_port}",
                       "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512"})
    with n:
        yield n


def admin_client(node, user="admin", password=ADMIN_PW):
    from gateway_native.client import Admin

    return Admin(node.namesrv_addr, credentials=(user, password)).start()


async def kafka_login(node, user: str, password: str, mechanism: str = "PLAIN") -> str:
    """'ok', or the broker's error message (aiokafka raises it as the exception text)."""
    from aiokafka.conn import create_conn

    try:
        conn = await create_conn("127.0.0.1", node.sasl_port, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
                                 request_timeout_ms=10000)
    except Exception as exc:  # the refusal: SaslAuthenticationFailed with the broker's message
        return str(exc) or type(exc).__name__
    conn.close()
    return "ok"


def test_users_made_on_every_path_sign_in_and_no_password_or_secret_is_stored_or_logged(node):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from gateway_native.remoting.codes import RequestCode as RC

    # Kafka AlterUserScramCredentials (the client salts the password; the broker never sees it)
    kadmin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin", "sasl.password": ADMIN_PW})
    up = UserScramCredentialUpsertion("kafkauser", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                      SECRETS["kafkauser"].encode())
    for f in kadmin.alter_user_scram_credentials([up]).values():
        f.result(20)
    # the bootstrap user signs remoting requests with its password (its remoting secret)
    adm = admin_client(node)
    try:
        broker = node.broker_addr
        # RocketMQ 5 ACL 2.0: createUser (3001), then updateUser (3002) with a new password
        adm._call(adm._ok(broker, RC.AUTH_CREATE_USER, {"username": "rmquser"},
                          json.dumps({"username": "rmquser", "password": SECRETS["rmquser"]}).encode()))
        adm._call(adm._ok(broker, RC.AUTH_UPDATE_USER, {"username": "rmquser"},
                          json.dumps({"username": "rmquser", "password": SECRETS["rmquser-updated"]}).encode()))
        got = adm._call(adm._ok(broker, RC.AUTH_GET_USER, {"username": "rmquser"}))  # getUser never shows it
        assert json.loads(got.body)["password"] == "******"
    finally:
        adm.shutdown()
    # RocketMQ updateAclConfig (code 50) through the CLI, signed by the bootstrap user
    out = subprocess.run(rockafka_command() + ["admin", "--namesrv", node.namesrv_addr,
                          "--access-key", "admin", "--secret-key", ADMIN_PW, "acl", "set-user", "akuser",
                          SECRETS["akuser"], "--topic-perms", "orders=PUB"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # every user signs in with what it was given: Kafka SASL, and remoting signatures
    assert asyncio.run(kafka_login(node, "admin", ADMIN_PW)) == "ok"
    assert asyncio.run(kafka_login(node, "kafkauser", SECRETS["kafkauser"], "SCRAM-SHA-512")) == "ok"
    assert asyncio.run(kafka_login(node, "rmquser", SECRETS["rmquser-updated"])) == "ok"
    for user, secret in (("rmquser", SECRETS["rmquser-updated"]), ("akuser", SECRETS["akuser"])):
        a = admin_client(node, user, secret)
        try:
            a.cluster_info()  # signed; refused (NO_PERMISSION) only for lack of a grant, not a bad signature
        except Exception as exc:
            assert "signature" not in str(exc) and "AccessKey" not in str(exc), exc
        finally:
            a.shutdown()
    # a wrong password fails (the throttle lets a first guess be checked)
    assert "invalid credentials" in asyncio.run(kafka_login(node, "rmquser", "not-it"))

    key_file = node.data_dir.parent / "rockafka-auth.key"  # outside the data directory, 0600
    assert key_file.exists() and key_file.stat().st_mode & 0o777 == 0o600

    # every file of the data directory, and the node's log (mapped: the preallocated commitlog
    # and queue files are sparse, their holes read as the shared zero page)
    needles = [ADMIN_PW.encode(), *(v.encode() for v in SECRETS.values())]
    found = []
    for path in [*node.data_dir.rglob("*"), node.log_path]:
        if path.is_file() and path.stat().st_size:
            with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
                found += [f"{path}: {n.decode()}" for n in needles if m.find(n) != -1]
    assert not found, found


def test_sixteen_connections_guessing_one_password_get_at_most_five_checks_a_second(node):
    """The answers tell a checked guess ('invalid credentials') from a refused one ('too many
    failed authentications'); only checked ones are guesses. Another user logs in meanwhile."""
    from engine.config import SecurityConfig

    rate = SecurityConfig().authentication_failure_rate_per_user
    assert rate == 5.0
    counts = {"checked": 0, "throttled": 0, "other": 0}
    first_throttled: list[float] = []
    nonlocal_checked = [0]  # checked guesses answered after the first refused one (the bucket was empty)
    other_logins: list[str] = []

    async def attack(stop_at: float, worker: int) -> None:
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            answer = await kafka_login(node, "kafkauser", f"guess-{worker}-{n}")
            if "invalid credentials" in answer:
                counts["checked"] += 1
                if first_throttled:
                    nonlocal_checked[0] += 1
            elif "too many failed authentications" in answer:
                counts["throttled"] += 1
                if not first_throttled:
                    first_throttled.append(time.monotonic())
            else:
                counts["other"] += 1

    async def owner_of_another_account(stop_at: float) -> None:
        while time.monotonic() < stop_at - 0.5:
            other_logins.append(await kafka_login(node, "admin", ADMIN_PW))
            await asyncio.sleep(0.2)

    async def run() -> tuple[float, float]:
        start = time.monotonic()
        stop_at = start + 3.0
        await asyncio.gather(*(attack(stop_at, w) for w in range(16)), owner_of_another_account(stop_at))
        end = time.monotonic()
        return end - start, end - (first_throttled[0] if first_throttled else end)

    elapsed, steady = asyncio.run(run())
    # in all: at most `rate` checks a second, plus the bucket's first `rate` and the source's first guess
    assert counts["checked"] <= rate * elapsed + rate + 1, (counts, elapsed)
    # once the bucket is empty: `rate` a second (+ one partly refilled token, + one in flight)
    assert nonlocal_checked[0] <= rate * steady + 2, (nonlocal_checked, steady)
    assert counts["throttled"] > counts["checked"], counts  # the connections did hammer: refused unchecked
    assert counts["other"] == 0, counts
    assert other_logins and set(other_logins) == {"ok"}, other_logins
    print(f"guessing: {counts} in {elapsed:.2f}s = {counts['checked'] / elapsed:.1f} checked guesses/s "
          f"({nonlocal_checked[0] / max(steady, 1e-9):.1f}/s once throttled), "
          f"{(counts['checked'] + counts['throttled']) / elapsed:.0f} answers/s")


def test_remoting_signatures_and_admin_logins_are_throttled_by_the_same_limiter(node):
    """Wrong secrets over remoting (the SDK, 8 clients) and wrong passwords over admin HTTP (8
    threads): past the per-user rate the answers say so (NO_PERMISSION / 429) and nothing is
    checked; the checked ones stay within the rate."""
    import base64
    import threading
    import urllib.error
    import urllib.request

    from gateway_native.client import Admin

    rate = 5.0
    counts = {"remoting_checked": 0, "remoting_throttled": 0, "http_checked": 0, "http_throttled": 0, "other": []}
    lock = threading.Lock()
    stop_at = time.monotonic() + 2.0

    def remoting() -> None:
        a = Admin(node.namesrv_addr, credentials=("remoting-victim", "a-guess"), timeout_ms=5000).start()
        try:
            while time.monotonic() < stop_at:
                try:
                    a.cluster_info()
                    what = "ok"
                except Exception as exc:
                    what = str(exc)
                key = ("remoting_throttled" if "too many failed authentications" in what
                       else "remoting_checked" if "signature check failed" in what else None)
                with lock:
                    if key:
                        counts[key] += 1
                    else:
                        counts["other"].append(what)
        finally:
            a.shutdown()

    def http() -> None:
        token = base64.b64encode(b"http-victim:a-guess").decode()
        while time.monotonic() < stop_at:
            req = urllib.request.Request(node.admin_url + "/api/topics", headers={"Authorization": f"Basic {token}"})
            try:
                urllib.request.urlopen(req, timeout=10)
                code = 200
            except urllib.error.HTTPError as exc:
                code = exc.code
            with lock:
                if code == 429:
                    counts["http_throttled"] += 1
                elif code == 401:
                    counts["http_checked"] += 1
                else:
                    counts["other"].append(code)

    start = time.monotonic()
    threads = [threading.Thread(target=f) for f in [remoting] * 8 + [http] * 8]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    elapsed = time.monotonic() - start
    assert not counts["other"], counts["other"][:3]
    for proto in ("remoting", "http"):
        assert counts[f"{proto}_throttled"] > 0, counts
        assert counts[f"{proto}_checked"] <= rate * elapsed + rate + 1, (counts, elapsed)
