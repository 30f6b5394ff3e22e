"""``rockafka admin``: operate a running node over the RocketMQ remoting protocol.

Talks to the NameServer given by ``--namesrv`` (default ``$ROCKAFKA_NAMESRV`` or
127.0.0.1:9876) through the SDK's ``Admin`` (gateway_native/client/admin.py); it never opens the
store. Commands:

    cluster                          every broker group: members, roles, epoch, in-sync, lag
    cluster status                   one line: groups, masters, slaves in sync; exit 1 when degraded
    controller                       the failover controller: leader, and per group the master,
                                     epoch, SyncStateSet and each replica's liveness
    elect-master --broker-name G [--broker-id N]
                                     a safe manual switch of master (to an alive SyncStateSet member)
    topics list | topics create TOPIC [--queues N] | topics delete TOPIC
    topics describe TOPIC            queues with min/max offsets and last store time, replicas, config
    topics alter TOPIC --queues N    change the queue count (queues are only added)
    groups list | groups lag [GROUP] | groups offsets GROUP --topic T
    groups describe GROUP            members, and per topic and queue the committed offset and lag
    groups delete GROUP              the group's config and committed offsets (no member may be online)
    groups reset-offsets GROUP --topic T --to-earliest|--to-latest|--to-offset N|--to-datetime TS
                                     [--dry-run]   (both protocols' groups; prints before and after)
    groups set GROUP --retry-max-times N
    messages send TOPIC BODY [--key K] [--tag T] [--property K=V]
    messages print TOPIC --key K | --id ID | --since TS [--until TS] | --queue Q --offset N  [--max N]
                                     (ID: the client id UNIQ_KEY `7F00...` or the offset id)
    users list | acl list            users and ACL bindings (RocketMQ ACL 2.0 model)
    reset-offset --group G --topic T --to-timestamp TS [--no-force]
    query key --topic T KEY [--begin TS] [--end TS] [--max N] | query id MSG_ID [--topic T]
    dlq list GROUP [--max N] | dlq resend GROUP MSG_ID
    acl set-user ACCESS_KEY SECRET_KEY [--topic-perms T=PUB|SUB,...] [--group-perms G=SUB,...] [--admin]
    acl delete-user ACCESS_KEY

On a secured node it authenticates like any client: ``--access-key`` / ``--secret-key`` (or
``ROCKAFKA_ACCESS_KEY`` / ``ROCKAFKA_SECRET_KEY``) sign every request as the Java client's
AclClientRPCHook does, ``--tls`` speaks TLS; a refusal prints the node's NO_PERMISSION remark.

Timestamps given are epoch milliseconds or ISO 8601 (``2026-11-22T10:00:00Z``; no zone = UTC);
times printed are ISO 8601 UTC with milliseconds. Output is an aligned table, or JSON with
``--json`` (before or after the command): keys sorted, the same names in every release. Exit
codes: 0 done, 1 the request failed or what it names does not exist (one line ``rockafka admin:
<reason>`` on stderr), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from typing import Any, Sequence

from .output import emit

DEFAULT_NAMESRV = "127.0.0.1:9876"


class AdminCliError(Exception):
    """A failure a person can act on; printed as one line."""


def parse_timestamp(text: str) -> int:
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise AdminCliError(f"{text!r} is neither epoch milliseconds nor an ISO 8601 time") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def add_admin_parser(sub: Any) -> None:
    leaf = argparse.ArgumentParser(add_help=False)  # --json also accepted after the command
    leaf.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON instead of a table")
    admin = sub.add_parser("admin", help="administer a running node (topics, groups, offsets, queries, DLQ)",
                           description="Administer a running node through its NameServer.")
    admin.add_argument("--namesrv", default=os.environ.get("ROCKAFKA_NAMESRV", DEFAULT_NAMESRV),
                       help=f"NameServer address host:port (default $ROCKAFKA_NAMESRV or {DEFAULT_NAMESRV})")
    admin.add_argument("--json", action="store_true", help="print JSON instead of a table")
    admin.add_argument("--timeout-ms", type=int, default=5000, help="per-request timeout (default 5000)")
    admin.add_argument("--access-key", default=os.environ.get("ROCKAFKA_ACCESS_KEY"),
                       help="sign requests as this user (RocketMQ ACL; default $ROCKAFKA_ACCESS_KEY)")
    admin.add_argument("--secret-key", default=os.environ.get("ROCKAFKA_SECRET_KEY"),
                       help="the user's remoting secret key (default $ROCKAFKA_SECRET_KEY)")
    admin.add_argument("--tls", action="store_true", help="speak TLS to the NameServer and brokers")
    admin.add_argument("--cert", dest="tls_cert", default=os.environ.get("ROCKAFKA_TLS_CERT"),
                       help="with --tls: a client certificate (PEM) to present, e.g. under "
                            "tlsServerNeedClientAuth=require (default $ROCKAFKA_TLS_CERT)")
    admin.add_argument("--key", dest="tls_key", default=os.environ.get("ROCKAFKA_TLS_KEY"),
                       help="with --tls: the client certificate's private key (PEM; default $ROCKAFKA_TLS_KEY)")
    admin.add_argument("--ca", dest="tls_ca", default=os.environ.get("ROCKAFKA_TLS_CA"),
                       help="with --tls: verify the node's certificate against these CAs (PEM; default: not "
                            "verified, as RocketMQ's tls.test.mode.enable)")
    what = admin.add_subparsers(dest="admin_command", metavar="WHAT")

    cl = what.add_parser("cluster", help="broker groups with their members' roles, in-sync state and replication lag",
                         parents=[leaf])
    cl.add_argument("view", nargs="?", choices=["status"], help="status: one line, exit 1 when degraded")
    ctl = what.add_parser("controller", help="the failover controller's view: leader, masters, epochs, SyncStateSets",
                          parents=[leaf])
    ctl.add_argument("--controller", help="controller addresses, `;`-separated (default: --namesrv)")
    elect = what.add_parser("elect-master", help="switch a group's master (mqadmin electMaster)", parents=[leaf])
    elect.add_argument("--controller", help="controller addresses, `;`-separated (default: --namesrv)")
    elect.add_argument("--broker-name", required=True, help="the broker group")
    elect.add_argument("--broker-id", type=int, default=None,
                       help="the member to lead (alive, in the SyncStateSet); default: the controller picks")
    elect.add_argument("--cluster", default="DefaultCluster")
    topics = what.add_parser("topics", help="list, create or delete topics").add_subparsers(dest="action", metavar="ACTION")
    topics.add_parser("list", help="every topic the NameServer routes", parents=[leaf])
    create = topics.add_parser("create", help="create or update a topic on every master", parents=[leaf])
    create.add_argument("topic")
    create.add_argument("--queues", type=int, default=8, help="read and write queue count (default 8)")
    delete = topics.add_parser("delete", help="delete a topic", parents=[leaf])
    delete.add_argument("topic")
    tdesc = topics.add_parser("describe", help="queues, offsets, replicas and config of a topic", parents=[leaf])
    tdesc.add_argument("topic")
    talter = topics.add_parser("alter", help="change a topic's queue count", parents=[leaf])
    talter.add_argument("topic")
    talter.add_argument("--queues", type=int, required=True, help="new read and write queue count")

    groups = what.add_parser("groups", help="consumer groups, their offsets and lag").add_subparsers(dest="action", metavar="ACTION")
    groups.add_parser("list", help="every group with committed offsets or a config", parents=[leaf])
    glag = groups.add_parser("lag", help="lag of every group, or per queue of one group", parents=[leaf])
    glag.add_argument("group", nargs="?")
    offsets = groups.add_parser("offsets", help="per queue: max offset, committed offset, lag", parents=[leaf])
    offsets.add_argument("group")
    offsets.add_argument("--topic", required=True)
    gdesc = groups.add_parser("describe", help="members and per-queue offsets and lag of a group", parents=[leaf])
    gdesc.add_argument("group")
    gdel = groups.add_parser("delete", help="delete a group's config and committed offsets", parents=[leaf])
    gdel.add_argument("group")
    greset = groups.add_parser("reset-offsets", help="move a group's committed offsets (kafka-consumer-groups style)",
                               parents=[leaf])
    greset.add_argument("group")
    greset.add_argument("--topic", required=True)
    to = greset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the first offset still stored")
    to.add_argument("--to-latest", action="store_true", help="the end of every queue")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N in every queue (clamped to what is stored)")
    to.add_argument("--to-datetime", metavar="TS", help="the first message stored at or after TS (ISO 8601 or ms)")
    greset.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    gset = groups.add_parser("set", help="change a group's config (subscriptionGroup.json)", parents=[leaf])
    gset.add_argument("group")
    gset.add_argument("--retry-max-times", type=int, required=True, help="deliveries before a message goes to the DLQ")

    reset = what.add_parser("reset-offset", help="move a group's offsets to a point in time", parents=[leaf])
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", required=True)
    reset.add_argument("--to-timestamp", required=True, metavar="TS", help="epoch ms or ISO 8601; -1 = the end")
    reset.add_argument("--no-force", action="store_true", help="only move offsets backwards")

    query = what.add_parser("query", help="find messages by key or id").add_subparsers(dest="action", metavar="ACTION")
    qkey = query.add_parser("key", help="messages with KEYS (or a Kafka record key) = KEY", parents=[leaf])
    qkey.add_argument("key")
    qkey.add_argument("--topic", required=True)
    qkey.add_argument("--begin", default="0", metavar="TS")
    qkey.add_argument("--end", default=None, metavar="TS")
    qkey.add_argument("--max", type=int, default=32)
    qid = query.add_parser("id", help="one message by offset message id (or client id with --topic)", parents=[leaf])
    qid.add_argument("msg_id")
    qid.add_argument("--topic", default=None)

    dlq = what.add_parser("dlq", help="dead letters of a group").add_subparsers(dest="action", metavar="ACTION")
    dlist = dlq.add_parser("list", help="messages in %%DLQ%%<group>", parents=[leaf])
    dlist.add_argument("group")
    dlist.add_argument("--max", type=int, default=32)
    dres = dlq.add_parser("resend", help="send a dead letter back to the group's retry topic", parents=[leaf])
    dres.add_argument("group")
    dres.add_argument("msg_id")

    msgs = what.add_parser("messages", help="send a test message; print messages by key, id or time").add_subparsers(
        dest="action", metavar="ACTION")
    msend = msgs.add_parser("send", help="send one message (native producer)", parents=[leaf])
    msend.add_argument("topic")
    msend.add_argument("body")
    msend.add_argument("--key", action="append", default=[], help="message key (KEYS; repeatable)")
    msend.add_argument("--tag", default=None)
    msend.add_argument("--property", action="append", default=[], metavar="K=V", help="user property (repeatable)")
    for name in ("print", "query"):
        mprint = msgs.add_parser(name, help="print messages of a topic found by key, id, time or position",
                                 parents=[leaf])
        mprint.add_argument("topic")
        by = mprint.add_mutually_exclusive_group(required=True)
        by.add_argument("--key", help="KEYS or a Kafka record key")
        by.add_argument("--id", dest="msg_id", help="client message id (UNIQ_KEY) or offset message id")
        by.add_argument("--since", metavar="TS", help="messages stored at or after TS, per queue, by time")
        by.add_argument("--queue", type=int, help="with --offset: messages from this queue position")
        mprint.add_argument("--until", metavar="TS", help="with --since: stop at TS")
        mprint.add_argument("--offset", type=int, default=0, help="with --queue: first logical offset")
        mprint.add_argument("--max", type=int, default=32, help="at most N messages (default 32)")
    users = what.add_parser("users", help="users (RocketMQ ACL 2.0 / SCRAM)").add_subparsers(dest="action", metavar="ACTION")
    users.add_parser("list", help="every user with its type and status", parents=[leaf])
    acl = what.add_parser("acl", help="remoting users (access keys) and their permissions").add_subparsers(
        dest="action", metavar="ACTION")
    aset = acl.add_parser("set-user", help="create or update a user's secret key and permissions (updateAclConfig)",
                          parents=[leaf])
    aset.add_argument("user", metavar="ACCESS_KEY")
    aset.add_argument("user_secret", metavar="SECRET_KEY")
    aset.add_argument("--topic-perms", help="TOPIC=PUB|SUB|DENY,... (PUB = write, SUB = read)")
    aset.add_argument("--group-perms", help="GROUP=SUB,...")
    aset.add_argument("--admin", action="store_true", help="every operation on the cluster, topics and groups")
    adel = acl.add_parser("delete-user", help="remove a user's secret key and permissions", parents=[leaf])
    adel.add_argument("user", metavar="ACCESS_KEY")
    acl.add_parser("list", help="every ACL entry: subject, resource, actions, decision", parents=[leaf])


def iso_time(ms: int | None) -> str | None:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds (``2026-11-22T10:00:00.000Z``)."""
    if ms is None or ms < 0:
        return None
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _message_row(m: Any) -> dict[str, Any]:
    return {"msgId": m.msg_id, "offsetMsgId": m.offset_msg_id, "topic": m.topic, "queueId": m.queue_id,
            "queueOffset": m.queue_offset, "tags": m.tags, "keys": m.keys, "reconsumeTimes": m.reconsume_times,
            "storeTimestamp": m.store_timestamp, "bornTimestamp": m.born_timestamp,
            "storeTime": iso_time(m.store_timestamp), "bornTime": iso_time(m.born_timestamp),
            "properties": {k: v for k, v in m.properties.items() if k not in ("TAGS", "KEYS")},
            "body": m.body.decode("utf-8", "replace")}


def _tls_context(args: argparse.Namespace) -> Any:
    """None (plaintext), True (TLS, any server certificate) or a context carrying ``--cert`` /
    ``--key`` (a client certificate) and ``--ca`` (verify the node)."""
    cert, key, ca = getattr(args, "tls_cert", None), getattr(args, "tls_key", None), getattr(args, "tls_ca", None)
    if not args.tls:
        if cert or key or ca:
            raise AdminCliError("--cert, --key and --ca go with --tls")
        return None
    if bool(cert) != bool(key):
        raise AdminCliError("--cert and --key go together")
    if not (cert or ca):
        return True
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # nodes are addressed by IP; the CA is what is checked
    try:
        if ca:
            ctx.load_verify_locations(cafile=ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
        else:
            ctx.verify_mode = ssl.CERT_NONE
        if cert:
            ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise AdminCliError(f"cannot use the TLS files ({cert or ''} {key or ''} {ca or ''}): {exc}") from None
    return ctx


def run(args: argparse.Namespace) -> int:
    from gateway_native.client import Admin

    if args.admin_command is None or (args.admin_command not in ("reset-offset", "cluster", "controller", "elect-master")
                                      and getattr(args, "action", None) is None):
        raise AdminCliError("missing command; see `rockafka admin --help`")
    if bool(args.access_key) != bool(args.secret_key):
        print("rockafka admin: --access-key and --secret-key go together", file=sys.stderr)
        return 2
    credentials = (args.access_key, args.secret_key) if args.access_key else None
    tls = _tls_context(args)
    admin = Admin(args.namesrv, timeout_ms=args.timeout_ms, credentials=credentials, tls=tls)
    admin.start()
    try:
        return _dispatch(admin, args)
    finally:
        admin.shutdown()


def cluster_rows(info: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per broker from NameServer cluster info (with Rockafka's ``brokerExtraTable``)."""
    extras = info.get("brokerExtraTable") or {}
    cluster_of = {name: c for c, names in (info.get("clusterAddrTable") or {}).items() for name in names}
    rows = []
    for name, bd in sorted((info.get("brokerAddrTable") or {}).items()):
        master_ex = extras.get((bd.get("brokerAddrs") or {}).get("0"), {})
        slaves = {int(s["brokerId"]): s for s in master_ex.get("slaves") or []}
        for bid, addr in sorted((bd.get("brokerAddrs") or {}).items(), key=lambda kv: int(kv[0])):
            ex = extras.get(addr, {})
            bid = int(bid)
            row = {"cluster": cluster_of.get(name, bd.get("cluster", "")), "brokerName": name, "brokerId": bid,
                   "addr": addr, "role": ex.get("brokerRole", "MASTER" if bid == 0 else "SLAVE"),
                   "epoch": ex.get("masterEpoch", ""), "kafka": (f"{ex['kafkaHost']}:{ex['kafkaPort']} (node {ex['kafkaNodeId']})"
                                                             if "kafkaPort" in ex else ""),
                   "inSync": "", "lagBytes": "", "lagMs": ""}
            if bid != 0:
                s = slaves.get(bid)
                if s is not None:
                    row.update(inSync="yes" if s["inSync"] else "no", lagBytes=s["lagBytes"], lagMs=s["lagMs"])
                else:
                    row.update(inSync="no", lagBytes=ex.get("behindBytes", ""))
            rows.append(row)
    return rows


def controller_rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per replica from CONTROLLER_GET_SYNC_STATE_DATA's replicasInfoTable."""
    rows = []
    for name, g in sorted(table.items()):
        for r in sorted(g.get("inSyncReplicas", []) + g.get("notInSyncReplicas", []), key=lambda r: r["brokerId"]):
            in_sync = any(x["brokerId"] == r["brokerId"] for x in g.get("inSyncReplicas", []))
            rows.append({"brokerName": name, "brokerId": r["brokerId"], "addr": r.get("brokerAddress"),
                         "role": "master" if r["brokerId"] == g.get("masterBrokerId") else "slave",
                         "inSyncStateSet": "yes" if in_sync else "no",
                         "alive": {True: "yes", False: "no"}.get(r.get("alive"), ""),
                         "masterEpoch": g.get("masterEpoch"), "syncStateSetEpoch": g.get("syncStateSetEpoch")})
    return rows


def _controller_addrs(args: argparse.Namespace) -> list[str]:
    raw = getattr(args, "controller", None) or args.namesrv
    return [a.strip() for a in raw.split(";") if a.strip()]


def _dispatch(admin: Any, args: argparse.Namespace) -> int:
    cmd, action, js = args.admin_command, getattr(args, "action", None), args.json
    if cmd == "controller":
        addrs = _controller_addrs(args)
        peers = admin.controller_metadata(addrs)
        if all("error" in p for p in peers):
            raise AdminCliError(f"no controller answers at {', '.join(addrs)}: {peers[0]['error']}")
        table = admin.sync_state_data(addrs)
        leader = next((p for p in peers if p.get("isLeader")), None)
        if js:
            emit({"peers": peers, "replicasInfoTable": table}, True)
            return 0
        print(f"controller leader: {leader['selfId']} at {leader['address']} (term {leader.get('term')})"
              if leader else "controller leader: none")
        emit(controller_rows(table), False, ["brokerName", "brokerId", "role", "addr", "alive", "inSyncStateSet",
                                             "masterEpoch", "syncStateSetEpoch"])
        return 0
    if cmd == "elect-master":
        result = admin.elect_master(_controller_addrs(args), args.broker_name, args.broker_id, args.cluster)
        emit(result, js)
        return 0
    if cmd == "cluster":
        rows = cluster_rows(admin.cluster_info())
        if not rows:
            raise AdminCliError("no broker is registered with the NameServer")
        if getattr(args, "view", None) == "status":
            return _cluster_status(admin, rows, js)
        emit(rows, js, ["cluster", "brokerName", "brokerId", "role", "addr", "epoch", "inSync", "lagBytes", "lagMs",
                          "kafka"])
        return 0
    if cmd == "topics":
        if action == "list":
            emit(sorted(admin.topic_list()), js)
        elif action == "create":
            if args.queues < 1:
                raise AdminCliError("--queues must be at least 1")
            admin.create_topic(args.topic, args.queues)
            emit({"created": args.topic, "queues": args.queues}, js)
        elif action == "delete":
            _require_topic(admin, args.topic)
            admin.delete_topic(args.topic)
            emit({"deleted": args.topic}, js)
        elif action == "describe":
            _describe_topic(admin, args.topic, js)
        elif action == "alter":
            route = _require_topic(admin, args.topic)
            now = max(int(q["writeQueueNums"]) for q in route["queueDatas"])
            if args.queues < now:
                raise AdminCliError(f"topic {args.topic} has {now} queues; queues can only be added "
                                    "(messages in a removed queue would be unreachable)")
            perm = int(route["queueDatas"][0].get("perm", 6))
            admin.create_topic(args.topic, args.queues, perm=perm)
            emit({"topic": args.topic, "queues": args.queues, "previousQueues": now}, js)
    elif cmd == "groups":
        if action == "list":
            groups = admin.consumer_groups()
            rows = [{"group": g, "topics": ",".join(v["topics"]),
                     "retryMaxTimes": (v["config"] or {}).get("retryMaxTimes", 16)} for g, v in groups.items()]
            emit(rows, js, ["group", "topics", "retryMaxTimes"])
        elif action == "lag":
            _group_lag(admin, args.group, js)
        elif action == "offsets":
            progress = admin.consumer_progress(args.group, args.topic)
            rows = [{"broker": p.queue.broker_name, "queue": p.queue.queue_id, "maxOffset": p.broker_offset,
                     "consumerOffset": p.consumer_offset, "lag": p.lag} for p in progress]
            if not js:
                rows.append({"broker": "TOTAL", "queue": "", "maxOffset": sum(p.broker_offset for p in progress),
                             "consumerOffset": "", "lag": sum(p.lag for p in progress)})
            emit(rows, js, ["broker", "queue", "maxOffset", "consumerOffset", "lag"])
        elif action == "describe":
            _describe_group(admin, args.group, js)
        elif action == "delete":
            _delete_group(admin, args.group, js)
        elif action == "reset-offsets":
            _reset_offsets(admin, args, js)
        elif action == "set":
            if args.retry_max_times < 0:
                raise AdminCliError("--retry-max-times must be >= 0")
            admin.update_subscription_group(args.group, retryMaxTimes=args.retry_max_times)
            emit({"group": args.group, "retryMaxTimes": args.retry_max_times}, js)
    elif cmd == "reset-offset":
        ts = parse_timestamp(args.to_timestamp)
        table = admin.reset_offset_by_timestamp(args.group, args.topic, ts, force=not args.no_force)
        rows = [{"broker": mq.broker_name, "queue": mq.queue_id, "offset": off} for mq, off in sorted(table.items())]
        emit(rows, js, ["broker", "queue", "offset"])
    elif cmd == "query":
        if action == "key":
            end = parse_timestamp(args.end) if args.end else None
            msgs = admin.query_message_by_key(args.topic, args.key, args.max, parse_timestamp(args.begin), end)
            if not msgs:
                raise AdminCliError(f"no message with key {args.key!r} in topic {args.topic} in that time range")
            emit([_message_row(m) for m in msgs], js, ["msgId", "queueId", "queueOffset", "tags", "keys", "storeTime", "body"])
        elif action == "id":
            emit(_message_row(admin.view_message(args.msg_id, args.topic)), js)
    elif cmd == "dlq":
        if action == "list":
            msgs = admin.dlq_messages(args.group, args.max)
            from gateway_native.client.admin import dead_letter_origin

            rows = [{**_message_row(m), "originTopic": dead_letter_origin(args.group, m.properties)[0],
                     "originMsgId": m.properties.get("ORIGIN_MESSAGE_ID")} for m in msgs]
            emit(rows, js, ["originMsgId", "originTopic", "reconsumeTimes", "storeTime", "body"])
        elif action == "resend":
            from gateway_native.client.admin import dead_letter_origin

            m = admin.resend_dlq_message(args.group, args.msg_id)
            origin, to, _ = dead_letter_origin(args.group, m.properties)
            emit({"resent": m.properties.get("ORIGIN_MESSAGE_ID") or m.msg_id, "to": to, "originTopic": origin}, js)
    elif cmd == "acl":
        if action == "set-user":
            admin.update_acl_config(args.user, args.user_secret, topic_perms=args.topic_perms,
                                    group_perms=args.group_perms, admin=args.admin)
            emit({"user": args.user, "topicPerms": args.topic_perms or "", "groupPerms": args.group_perms or "",
                  "admin": args.admin}, js)
        elif action == "delete-user":
            admin.delete_acl_config(args.user)
            emit({"deleted": args.user}, js)
        elif action == "list":
            emit(_acl_rows(admin), js, ["subject", "resource", "actions", "sourceIps", "decision"])
    elif cmd == "users":
        emit(_auth_list(admin, RC_AUTH_LIST_USER), js, ["username", "userType", "userStatus"])
    elif cmd == "messages":
        if action == "send":
            _send(args, js)
        else:
            _print_messages(admin, args, js)
    return 0


RC_AUTH_LIST_USER = 3005  # RocketMQ 5 ACL 2.0 request codes (gateway_native/remoting/codes.py)
RC_AUTH_LIST_ACL = 3010
RC_UPDATE_CONSUMER_OFFSET = 15
RC_DELETE_SUBSCRIPTIONGROUP = 207
RC_VIEW_MESSAGE_BY_ID = 33


def _first_master(admin: Any) -> str:
    masters = admin._masters(None)
    if not masters:
        raise AdminCliError("no broker master is registered with the NameServer")
    return masters[0]


def _require_topic(admin: Any, topic: str) -> dict[str, Any]:
    """The topic's route; a clear error when no broker serves it."""
    route = admin.topic_route(topic) if topic in set(admin.topic_list()) else None
    if not route or not route.get("queueDatas"):
        raise AdminCliError(f"topic {topic!r} does not exist")
    return route


def _queues(admin: Any, topic: str) -> list[Any]:
    _require_topic(admin, topic)
    return admin.message_queues(topic)


def _cluster_status(admin: Any, rows: list[dict[str, Any]], js: bool) -> int:
    groups = sorted({r["brokerName"] for r in rows})
    masters = {r["brokerName"] for r in rows if r["brokerId"] == 0}
    slaves = [r for r in rows if r["brokerId"] != 0]
    in_sync = [r for r in slaves if r["inSync"] == "yes"]
    problems = [f"{g} has no master" for g in groups if g not in masters]
    problems += [f"{r['brokerName']}/{r['brokerId']} not in sync" for r in slaves if r["inSync"] != "yes"]
    status = {"status": "degraded" if problems else "ok", "brokerGroups": len(groups), "brokers": len(rows),
              "masters": len(masters), "slaves": len(slaves), "slavesInSync": len(in_sync),
              "topics": len([t for t in admin.topic_list() if not _is_system_topic(t)]), "problems": problems}
    if js:
        emit(status, True)
    else:
        line = (f"{status['status'].upper()}: {len(groups)} broker group(s), {len(masters)} master(s), "
                f"{len(in_sync)}/{len(slaves)} slave(s) in sync, {status['topics']} topic(s)")
        print(line + (" -- " + "; ".join(problems) if problems else ""))
    return 1 if problems else 0


def _is_system_topic(topic: str) -> bool:
    return (topic.startswith(("%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_", "SCHEDULE_TOPIC", "__"))
            or topic in ("TBW102", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "BenchmarkTest", "DefaultCluster")
            or "_REPLY_TOPIC" in topic)


def _describe_topic(admin: Any, topic: str, js: bool) -> None:
    route = _require_topic(admin, topic)
    brokers = {bd["brokerName"]: bd for bd in route.get("brokerDatas") or []}
    configs = [{"brokerName": q["brokerName"], "readQueueNums": q["readQueueNums"],
                "writeQueueNums": q["writeQueueNums"], "perm": _perm_text(int(q.get("perm", 6))),
                "topicSysFlag": q.get("topicSysFlag", 0)} for q in route["queueDatas"]]
    queues = []
    for mq in admin.message_queues(topic):
        lo, hi = admin.min_offset(mq), admin.max_offset(mq)
        addrs = (brokers.get(mq.broker_name) or {}).get("brokerAddrs") or {}
        last = None
        if hi > lo:
            last = _last_store_time(admin, mq, hi)
        queues.append({"broker": mq.broker_name, "queue": mq.queue_id, "minOffset": lo, "maxOffset": hi,
                       "messages": hi - lo, "lastStored": last,
                       "leader": addrs.get("0", ""),
                       "replicas": ",".join(a for b, a in sorted(addrs.items(), key=lambda kv: int(kv[0])))})
    out = {"topic": topic, "queues": queues, "configs": configs, "messages": sum(q["messages"] for q in queues)}
    remote = admin.remote_tier(topic)   # groups where the topic is tiered
    if remote:
        out["remoteTier"] = [{"brokerName": name, **stats} for name, stats in sorted(remote.items())]
    if js:
        emit(out, True)
        return
    print(f"topic {topic}: {len(queues)} queue(s), {out['messages']} message(s) stored")
    emit(configs, False, ["brokerName", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag"])
    print()
    emit(queues, False, ["broker", "queue", "minOffset", "maxOffset", "messages", "lastStored", "leader", "replicas"])
    if remote:
        print("\nremote tier (minOffset above is the first offset readable from either tier):")
        emit(out["remoteTier"], False, ["brokerName", "remote_bytes", "remote_segments", "upload_lag_bytes",
                                        "upload_errors"])


def _perm_text(perm: int) -> str:
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "")


def _pull(admin: Any, mq: Any, offset: int, max_nums: int) -> list[Any]:
    from gateway_native.client.pull_api import PullAPI, PullStatus
    from gateway_native.remoting.subscription import SubscriptionData

    api = PullAPI(admin.runtime, "rockafka-admin-browse")
    sub = SubscriptionData.build(mq.topic, "*")
    result = admin._call(api.pull(mq, sub, offset, max_nums, timeout_ms=10_000))
    return result.messages if result.status == PullStatus.FOUND else []


def _last_store_time(admin: Any, mq: Any, hi: int) -> str | None:
    try:
        msgs = _pull(admin, mq, hi - 1, 1)
    except Exception:  # a queue whose last unit is unreadable still describes; the time stays empty
        return None
    return iso_time(msgs[-1].store_timestamp) if msgs else None


def _group_topics(admin: Any, group: str) -> dict[str, Any]:
    groups = admin.consumer_groups()
    if group not in groups:
        raise AdminCliError(f"group {group!r} does not exist (no committed offsets and no config)")
    return groups[group]


def _describe_group(admin: Any, group: str, js: bool) -> None:
    info = _group_topics(admin, group)
    rows, members = [], set()
    for topic in info["topics"]:
        if topic.startswith(("%RETRY%", "%DLQ%")):
            continue
        members.update(admin.consumer_ids(group, topic))
        for p in admin.consumer_progress(group, topic):
            rows.append({"topic": topic, "broker": p.queue.broker_name, "queue": p.queue.queue_id,
                         "maxOffset": p.broker_offset, "consumerOffset": p.consumer_offset, "lag": p.lag})
    out = {"group": group, "members": sorted(members), "offsets": rows, "lag": sum(r["lag"] for r in rows),
           "retryMaxTimes": (info.get("config") or {}).get("retryMaxTimes", 16)}
    if js:
        emit(out, True)
        return
    print(f"group {group}: {len(members)} native member(s) online, total lag {out['lag']}, "
          f"retryMaxTimes {out['retryMaxTimes']}")
    for m in sorted(members):
        print(f"  member {m}")
    emit(rows, False, ["topic", "broker", "queue", "maxOffset", "consumerOffset", "lag"])


def _delete_group(admin: Any, group: str, js: bool) -> None:
    info = admin.consumer_groups().get(group)
    if info is not None:
        online = sorted({m for t in info["topics"] for m in admin.consumer_ids(group, t)})
        if online:
            raise AdminCliError(f"group {group!r} has {len(online)} member(s) online; stop its consumers first")
    # asked even when no offsets or config name the group: a Kafka group whose members have not
    # committed yet lives only in its coordinator, and the broker refuses while it has members
    for addr in admin._masters(None):
        admin._call(admin._ok(addr, RC_DELETE_SUBSCRIPTIONGROUP, {"groupName": group, "cleanOffset": True}))
    if info is None:
        raise AdminCliError(f"group {group!r} does not exist (no committed offsets and no config)")
    emit({"deleted": group}, js)


def _reset_offsets(admin: Any, args: argparse.Namespace, js: bool) -> None:
    """Plan per queue (current -> target), then apply unless --dry-run. Earliest, latest and
    datetime go through INVOKE_BROKER_TO_RESET_OFFSET (which refuses a Kafka group with live
    members and tells online native consumers); --to-offset commits each queue's offset."""
    queues = _queues(admin, args.topic)
    ts = parse_timestamp(args.to_datetime) if args.to_datetime else None
    plan = []
    for mq in queues:
        lo, hi = admin.min_offset(mq), admin.max_offset(mq)
        if args.to_earliest:
            target = lo
        elif args.to_latest:
            target = hi
        elif ts is not None:
            target = admin.search_offset(mq, ts)
        else:
            target = min(max(args.to_offset, lo), hi)
        plan.append((mq, target))
    current = {p.queue: p.consumer_offset for p in admin.consumer_progress(args.group, args.topic)}
    rows = [{"topic": args.topic, "broker": mq.broker_name, "queue": mq.queue_id, "currentOffset": current.get(mq, -1),
             "newOffset": target} for mq, target in plan]
    if not args.dry_run:
        if args.to_offset is not None:
            for mq, target in plan:
                addr = admin.runtime.master_addr(mq.broker_name)
                admin._call(admin._ok(addr, RC_UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": args.group, "topic": args.topic, "queueId": mq.queue_id, "commitOffset": target}))
        else:
            stamp = 0 if args.to_earliest else -1 if args.to_latest else ts
            applied = admin.reset_offset_by_timestamp(args.group, args.topic, stamp, force=True)
            for row in rows:
                for mq, off in applied.items():
                    if mq.broker_name == row["broker"] and mq.queue_id == row["queue"]:
                        row["newOffset"] = off
    if js:
        emit({"group": args.group, "dryRun": args.dry_run, "offsets": rows}, True)
        return
    emit(rows, False, ["topic", "broker", "queue", "currentOffset", "newOffset"])
    print("dry run: nothing changed" if args.dry_run else f"group {args.group}: offsets reset")


def _kafka_record_by_id(admin: Any, topic: str, msg_id: str) -> list[Any]:
    """A Kafka record by the id native consumers see for it (store ip(4) + commitlog offset of
    its batch(8) + offset delta(4)): VIEW_MESSAGE_BY_ID gives the batch's first record, whose
    queue offset plus the delta is the record's position, read with a pull."""
    from gateway_native.client.message import MessageQueue
    from gateway_native.remoting.message_codec import decode_units

    if len(msg_id) != 32 or any(c not in "0123456789abcdefABCDEF" for c in msg_id):
        return []
    raw = bytes.fromhex(msg_id)
    offset, delta = int.from_bytes(raw[4:12], "big"), int.from_bytes(raw[12:16], "big")
    route = admin.topic_route(topic) or {}
    for bd in route.get("brokerDatas") or []:
        addr = (bd.get("brokerAddrs") or {}).get("0")
        if addr is None:
            continue
        try:
            resp = admin._call(admin._ok(addr, RC_VIEW_MESSAGE_BY_ID, {"offset": offset}))
        except Exception:  # no unit starts there on this broker
            continue
        for first in decode_units(bytes(resp.body or b"")):
            if first.topic != topic:
                continue
            mq = MessageQueue(topic, bd["brokerName"], first.queue_id)
            found = [m for m in _pull(admin, mq, first.queue_offset + delta, 1)
                     if (m.properties.get("UNIQ_KEY") or "").upper() == msg_id.upper()]
            if found:
                return found
    return []


def _auth_list(admin: Any, code: int) -> list[dict[str, Any]]:
    resp = admin._call(admin._ok(_first_master(admin), code, {}))
    return json.loads(bytes(resp.body)) if resp.body else []


def _acl_rows(admin: Any) -> list[dict[str, Any]]:
    rows = []
    for info in _auth_list(admin, RC_AUTH_LIST_ACL):
        for policy in info.get("policies") or []:
            for e in policy.get("entries") or []:
                rows.append({"subject": info.get("subject"), "resource": e.get("resource"),
                             "actions": ",".join(e.get("actions") or []), "sourceIps": ",".join(e.get("sourceIps") or []),
                             "decision": e.get("decision")})
    return rows


def _send(args: argparse.Namespace, js: bool) -> None:
    from gateway_native.client import Message, Producer

    props = {}
    for item in args.property:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise AdminCliError(f"--property {item!r} is not KEY=VALUE")
        props[k] = v
    credentials = (args.access_key, args.secret_key) if args.access_key else None
    producer = Producer("rockafka-admin-producer", args.namesrv, credentials=credentials,
                        tls=True if args.tls else None, send_msg_timeout=args.timeout_ms)
    producer.start()
    try:
        r = producer.send(Message(args.topic, args.body.encode(), tags=args.tag, keys=args.key or None,
                                  properties=props))
    finally:
        producer.shutdown()
    emit({"status": r.status.value, "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id, "topic": args.topic,
          "broker": r.message_queue.broker_name, "queue": r.message_queue.queue_id, "queueOffset": r.queue_offset},
         js)


def _print_messages(admin: Any, args: argparse.Namespace, js: bool) -> None:
    _require_topic(admin, args.topic)
    if args.max < 1:
        raise AdminCliError("--max must be at least 1")
    if args.key is not None:
        msgs = admin.query_message_by_key(args.topic, args.key, args.max)
        what = f"with key {args.key!r}"
    elif args.msg_id is not None:
        msgs = admin.query_message_by_key(args.topic, args.msg_id, 1, unique_key=True)
        if not msgs:
            try:
                m = admin.view_message(args.msg_id)
                msgs = [m] if m.topic == args.topic else []
            except Exception:  # not an offset id either: reported below as not found
                msgs = []
        if not msgs:
            msgs = _kafka_record_by_id(admin, args.topic, args.msg_id)
        what = f"with id {args.msg_id}"
    elif args.since is not None:
        since = parse_timestamp(args.since)
        until = parse_timestamp(args.until) if args.until else None
        msgs = []
        for mq in admin.message_queues(args.topic):
            start = admin.search_offset(mq, since)
            got = [m for m in _pull(admin, mq, start, args.max)
                   if m.store_timestamp >= since and (until is None or m.store_timestamp <= until)]
            msgs.extend(got)
        msgs = sorted(msgs, key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset))[:args.max]
        what = f"stored since {iso_time(since)}"
    else:
        mq = next((q for q in admin.message_queues(args.topic) if q.queue_id == args.queue), None)
        if mq is None:
            raise AdminCliError(f"topic {args.topic} has no queue {args.queue}")
        msgs = _pull(admin, mq, args.offset, args.max)
        what = f"at queue {args.queue} offset {args.offset}"
    if not msgs:
        raise AdminCliError(f"no message {what} in topic {args.topic}")
    emit([_message_row(m) for m in msgs], js, ["msgId", "queueId", "queueOffset", "tags", "keys", "storeTime", "body"])


SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # RocketMQ's MixAll.isSysConsumerGroup


def _group_lag(admin: Any, group: str | None, js: bool) -> None:
    """Without a group: one line per group with its total lag. With one: a line per queue of
    every topic the group has offsets on, then the total."""
    # the broker's own progress records (POP revive, ...) are not consumer groups a user runs
    groups = {g: v for g, v in admin.consumer_groups().items() if not g.startswith(SYSTEM_GROUP_PREFIX)}
    if group is not None and group not in groups:
        raise AdminCliError(f"group {group!r} has no committed offsets and no config")
    rows = []
    for name in [group] if group else sorted(groups):
        for topic in groups[name]["topics"]:
            if topic.startswith(("%RETRY%", "%DLQ%")):
                continue
            for p in admin.consumer_progress(name, topic):
                rows.append({"group": name, "topic": topic, "queue": p.queue.queue_id, "maxOffset": p.broker_offset,
                             "consumerOffset": p.consumer_offset, "lag": p.lag})
    if group is None:
        totals: dict[str, dict[str, Any]] = {n: {"group": n, "topics": len(groups[n]["topics"]), "lag": 0}
                                             for n in sorted(groups)}
        for r in rows:
            totals[r["group"]]["lag"] += r["lag"]
        emit(list(totals.values()), js, ["group", "topics", "lag"])
        return
    if not js:
        rows.append({"group": "TOTAL", "lag": sum(r["lag"] for r in rows)})
    emit(rows, js, ["group", "topic", "queue", "maxOffset", "consumerOffset", "lag"])


def main(args: argparse.Namespace) -> int:
    from gateway_native.client import MQClientError

    try:
        return run(args)
    except AdminCliError as exc:
        print(f"rockafka admin: {exc}", file=sys.stderr)
        return 2 if "missing command" in str(exc) else 1
    except MQClientError as exc:
        print(f"rockafka admin: {exc}", file=sys.stderr)
        return 1
    except (OSError, TimeoutError) as exc:
        print(f"rockafka admin: cannot reach the NameServer or broker at {args.namesrv}: {exc}", file=sys.stderr)
        return 1


def entry(argv: Sequence[str] | None = None) -> int:
    """``python -m rockafka.admin_cli ...`` (same as ``rockafka admin ...``)."""
    parser = argparse.ArgumentParser(prog="rockafka")
    add_admin_parser(parser.add_subparsers(dest="command"))
    return main(parser.parse_args(["admin", *(argv if argv is not None else sys.argv[1:])]))


if __name__ == "__main__":
    sys.exit(entry())
