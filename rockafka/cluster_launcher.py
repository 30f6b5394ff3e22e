"""``rockafka cluster up|down|status|restart|kill``: broker groups and NameServers on one machine.

With ``--controllers K`` the NameServers run the failover controller (Raft between them, port
base + 50 + k) and the brokers run in controller mode (brokerIds 1..R, named ``broker-a-1``..);
``up`` then also waits for the controller to name each group's master with every member in the
SyncStateSet, and ``status`` adds the controller's view. ``restart MEMBER`` and ``kill MEMBER
[--signal]`` (or ``kill --master-of GROUP``) are for drills. Invariant: a member whose recorded
process (pid and start time) still runs is never started again, so its pid (``cluster.json``,
``<dir>/pids/<name>.pid``) is never overwritten while it lives.

For trying a cluster and testing against one: ``up`` starts K standalone NameServers
(``rockafka namesrv``) and N broker groups of M replicas each (``rockafka serve``: brokerId 0
the master, SYNC_MASTER or ASYNC_MASTER, brokerIds 1.. its SLAVEs), every one a process of its
own, detached from the terminal, logging to ``<dir>/logs/<name>.log``, with its store in
``<dir>/<name>/``. ``status`` shows each process (alive, live role, ports, replication read
from its admin HTTP ``/api/cluster``); ``down`` sends SIGTERM (the node flushes, checkpoints and
removes ``abort``), then SIGKILL to whatever is still running after ``--timeout`` seconds.

Port plan (``--base-port P``, default 20000), every port fixed so a restarted cluster comes back
on the same addresses: NameServer k listens on ``P + k``; the broker of group g (0 = broker-a)
with brokerId r has the block ``P + 100 * (g + 1) + 10 * r`` and in it kafka +0, broker
(remoting) +1, ha +2, admin +3, grpc +4 and its own embedded NameServer +5 (unused by clients:
the group registers with the cluster's NameServers).

State: ``<dir>/cluster.json`` (``STATE_FORMAT`` 1), written before any process starts and
again as each is started, so ``down`` can always find what ``up`` left running::

    {"format": 1, "state": "up" | "down", "host", "clusterName", "groups", "replicas",
     "namesrvs", "role", "basePort", "namesrvAddr", "kafkaBootstrap",
     "members": [{"name", "kind": "namesrv" | "broker", "brokerName", "brokerId", "role",
                  "ports": {listener: port}, "dataDir", "log", "argv", "pid", "startTicks"}]}

``startTicks`` is the process start time from ``/proc/<pid>/stat``: a pid the kernel has since
given to another program is never taken for a member (nor signalled). ``<dir>/.lock`` (flock)
keeps two ``up``/``down`` commands off one directory at once.

Refused with a message and exit 2, before anything starts: counts out of range, a port of the
plan that something already listens on, a cluster of this directory still running, a key
``--set`` or ``--config`` names that does not exist (or that the launcher itself sets), a
base port that does not leave room for the plan. A process that exits or is not ready within
``--timeout`` during ``up`` stops the whole cluster again, prints its log's tail, exit 1.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Sequence

from engine.config import ConfigError, load_node_config, resolve_key

from .output import emit

STATE_FILE = "cluster.json"
STATE_FORMAT = 1
LOCK_FILE = ".lock"
MAX_GROUPS = 10  # broker-a .. broker-j; the port plan has room for ten blocks of a hundred
MAX_REPLICAS = 4  # a master and up to three slaves
MAX_NAMESRVS = 5
DEFAULT_BASE_PORT = 20000
BROKER_LISTENERS = ("kafka", "broker", "ha", "admin", "grpc", "namesrv")
MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER")
# what the launcher decides per member; a --set of one of these would break the plan
RAFT_OFFSET = 50  # controller k's Raft port is base + 50 + k (inside the NameServers' hundred)
LAUNCHER_KEYS = frozenset({
    "host", "kafka_port", "namesrv_port", "admin_port", "listen_port", "ha_listen_port", "grpc_proxy_port",
    "grpc_server_port", "store_path_root_dir", "broker_cluster_name", "broker_name", "broker_id", "broker_role",
    "namesrv_addr", "ha_master_address", "listeners", "advertised_listeners", "kafka_node_id",
    "enable_controller_mode", "controller_addr",
})


class LauncherError(Exception):
    """Something a person must fix; printed as one line. ``code`` 2 = refused input, 1 = failed."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


# -- the plan ---------------------------------------------------------------------------------
def connect_host(host: str) -> str:
    """Where the launcher (and the members, to each other) connect for a listen address."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def broker_name(group: int) -> str:
    return f"broker-{chr(ord('a') + group)}"


def plan_cluster(directory: Path, *, groups: int, replicas: int, namesrvs: int, role: str, host: str,
                 base_port: int, cluster_name: str, config_file: str | None, settings: Sequence[str],
                 command: Sequence[str], controllers: int = 0) -> dict[str, Any]:
    """The state document of a cluster not yet started: every member's ports, paths and argv.
    ``controllers`` > 0: that many NameServers run the failover controller (Raft between them)
    and replace ``namesrvs``; the brokers run in controller mode. LauncherError when the counts,
    the ports or a setting cannot make a working cluster."""
    for what, value, low, high in (("--groups", groups, 1, MAX_GROUPS), ("--replicas", replicas, 1, MAX_REPLICAS),
                                   ("--namesrvs", namesrvs, 1, MAX_NAMESRVS),
                                   ("--controllers", controllers, 0, MAX_NAMESRVS)):
        if not low <= value <= high:
            raise LauncherError(f"{what} must be {low}..{high}, got {value}")
    if controllers:
        namesrvs = controllers
    if role not in MASTER_ROLES:
        raise LauncherError(f"--role must be SYNC_MASTER or ASYNC_MASTER, got {role!r}")
    top = base_port + 100 * MAX_GROUPS + 10 * (MAX_REPLICAS - 1) + len(BROKER_LISTENERS)
    if base_port < 1024 or top > 65535:
        raise LauncherError(f"--base-port must be 1024..{65535 - (top - base_port)}, got {base_port}: "
                            "the plan uses the ports from there to base + 1035")
    overrides = _parse_settings(settings)
    directory = directory.resolve()
    reach = connect_host(host)
    namesrv_addr = ";".join(f"{reach}:{base_port + k}" for k in range(namesrvs))
    members: list[dict[str, Any]] = []
    raft_peers = ";".join(f"n{k}-{reach}:{base_port + RAFT_OFFSET + k}" for k in range(controllers))
    for k in range(namesrvs):
        name = f"controller-{k}" if controllers else f"namesrv-{k}"
        data = directory / name
        ports = {"namesrv": base_port + k}
        argv = list(command) + ["namesrv", "--host", host, "--port", str(base_port + k)]
        if controllers:
            ports["raft"] = base_port + RAFT_OFFSET + k
            argv += ["--data-dir", str(data), "--set", "enableControllerInNamesrv=true",
                     "--set", f"controllerDLegerPeers={raft_peers}", "--set", f"controllerDLegerSelfId=n{k}"]
        else:
            argv += ["--kv-config", str(data / "kvConfig.json")]
        members.append({"name": name, "kind": "namesrv", "brokerName": None, "brokerId": None,
                        "role": "CONTROLLER" if controllers else "NAMESRV",
                        "ports": ports, "dataDir": str(data),
                        "log": str(directory / "logs" / f"{name}.log"), "argv": argv, "pid": None,
                        "startTicks": None})
    for g in range(groups):
        bname = broker_name(g)
        master_ha = base_port + 100 * (g + 1) + 2
        for r in range(replicas):
            block = base_port + 100 * (g + 1) + 10 * r
            ports = {listener: block + i for i, listener in enumerate(BROKER_LISTENERS)}
            name = f"{bname}-{r + 1}" if controllers else f"{bname}-{r}"  # named by its brokerId
            data = directory / name
            if controllers:
                # controller mode: brokerIds 1..R, each the role the controller gives it; every
                # member a SYNC_MASTER (or ASYNC_MASTER) when elected (docs/design/failover.md)
                member_role = role
                keys = {"brokerClusterName": cluster_name, "brokerName": bname, "brokerId": str(r + 1),
                        "brokerRole": role, "namesrvAddr": namesrv_addr, "enableControllerMode": "true",
                        "controllerAddr": namesrv_addr, "kafka_node_id": str(100 * g + r + 1)}
            else:
                member_role = role if r == 0 else "SLAVE"
                # every node of the cluster its own Kafka node id (docs/design/cluster.md): 100 * group + brokerId
                keys = {"brokerClusterName": cluster_name, "brokerName": bname, "brokerId": str(r),
                        "brokerRole": member_role, "namesrvAddr": namesrv_addr, "kafka_node_id": str(100 * g + r)}
            if r and not controllers:
                keys["haMasterAddress"] = f"{reach}:{master_ha}"
            argv = list(command) + [
                "serve", "--host", host, "--data-dir", str(data), "--kafka-port", str(ports["kafka"]),
                "--namesrv-port", str(ports["namesrv"]), "--broker-port", str(ports["broker"]),
                "--ha-port", str(ports["ha"]), "--admin-port", str(ports["admin"]),
                "--grpc-port", str(ports["grpc"])]
            if config_file:
                argv += ["--config", str(Path(config_file).resolve())]
            for key, value in list(keys.items()) + list(overrides.items()):
                argv += ["--set", f"{key}={value}"]
            _check_member_config(name, config_file, {**overrides, **keys})
            members.append({"name": name, "kind": "broker", "brokerName": bname,
                            "brokerId": r + 1 if controllers else r, "role": member_role,
                            "ports": ports, "dataDir": str(data), "log": str(directory / "logs" / f"{name}.log"),
                            "argv": argv, "pid": None, "startTicks": None})
    return {"format": STATE_FORMAT, "state": "planned", "host": host, "clusterName": cluster_name, "groups": groups,
            "replicas": replicas, "namesrvs": namesrvs, "controllers": controllers, "role": role,
            "basePort": base_port,
            "namesrvAddr": namesrv_addr,
            # under a controller any member may lead: every broker is a bootstrap server
            "kafkaBootstrap": ",".join(f"{reach}:{m['ports']['kafka']}" for m in members if m["kind"] == "broker")
            if controllers else ",".join(f"{reach}:{base_port + 100 * (g + 1)}" for g in range(groups)),
            "members": members}


def _parse_settings(settings: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise LauncherError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            resolved = resolve_key(key)
        except ConfigError as exc:
            raise LauncherError(str(exc)) from None
        if resolved in LAUNCHER_KEYS:
            raise LauncherError(f"--set {key}: the launcher sets this key for each process (use --groups, --replicas, "
                                "--role, --host, --base-port, --cluster-name or --dir)")
        out[key.strip()] = value
    return out


def _check_member_config(name: str, config_file: str | None, overrides: dict[str, str]) -> None:
    """Resolve the member's configuration as its ``rockafka serve`` will, so a bad key or value
    is refused before any process starts."""
    try:
        load_node_config(config_file, overrides)
    except ConfigError as exc:
        raise LauncherError(f"{name}: {exc}") from None


def taken_ports(state: dict[str, Any]) -> list[str]:
    """``port (member listener)`` for each planned port something on this machine listens on."""
    out = []
    for m in state["members"]:
        for listener, port in m["ports"].items():
            if not port_free(state["host"], port):
                out.append(f"{port} ({m['name']} {listener})")
    return out


def port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # as the listeners bind: a port a finished connection still holds (TIME_WAIT) is free
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


# -- state and processes --------------------------------------------------------------------
def read_state(directory: Path) -> dict[str, Any] | None:
    path = directory / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LauncherError(f"cannot read {path}: {exc}", code=1) from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise LauncherError(f"{path} is not a cluster state file of format {STATE_FORMAT}", code=1)
    return state


def write_state(directory: Path, state: dict[str, Any]) -> None:
    path = directory / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, path)


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK_FILE, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LauncherError(f"another `rockafka cluster` command is working on {directory}") from None
        yield


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) from /proc; None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
    return fields[0], int(fields[19])


def start_ticks(pid: int) -> int | None:
    stat = _proc_stat(pid)
    return stat[1] if stat else None


def alive(member: dict[str, Any]) -> bool:
    pid = member.get("pid")
    if not pid:
        return False
    if not Path("/proc/self/stat").exists():  # no procfs: the pid alone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    stat = _proc_stat(pid)
    if stat is None or stat[0] in ("Z", "X"):  # gone, or a zombie nobody has reaped yet
        return False
    return member.get("startTicks") is None or stat[1] == member["startTicks"]


def pid_file(member: dict[str, Any]) -> Path:
    """``<dir>/pids/<name>.pid``: for tools that want a pid file (systemd, scripts)."""
    return Path(member["log"]).parent.parent / "pids" / f"{member['name']}.pid"


def _spawn(member: dict[str, Any]) -> int:
    """Start one member; never while the process it recorded still runs (its pid file stays)."""
    if alive(member):
        raise LauncherError(f"{member['name']} is still running (pid {member['pid']}); not started twice")
    Path(member["dataDir"]).mkdir(parents=True, exist_ok=True)
    log_path = Path(member["log"])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        member["logOffset"] = log.tell()
        proc = subprocess.Popen(member["argv"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
    member["pid"] = proc.pid
    member["startTicks"] = start_ticks(proc.pid)
    pf = pid_file(member)
    pf.parent.mkdir(parents=True, exist_ok=True)
    tmp = pf.with_suffix(".tmp")
    tmp.write_text(f"{proc.pid}\n")
    os.replace(tmp, pf)
    return proc.pid


def _forget_pid(member: dict[str, Any]) -> None:
    if "log" in member and not alive(member):  # a member of a cluster (not a bare process)
        with contextlib.suppress(FileNotFoundError):
            pid_file(member).unlink()


def _log_since(member: dict[str, Any]) -> str:
    try:
        with open(member["log"], "rb") as f:
            f.seek(member.get("logOffset", 0))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def log_tail(member: dict[str, Any], lines: int = 15) -> str:
    return "\n".join(_log_since(member).splitlines()[-lines:])


def admin_get(member: dict[str, Any], path: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """A broker's admin HTTP JSON (on loopback, where the admin listener binds by default)."""
    url = f"http://127.0.0.1:{member['ports']['admin']}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _ready(member: dict[str, Any]) -> bool:
    event = "namesrv_ready" if member["kind"] == "namesrv" else "node_ready"
    return event in _log_since(member)


def controller_view(state: dict[str, Any], timeout_ms: int = 2000) -> dict[str, Any] | None:
    """The controller's replicasInfoTable (per group: masterBrokerId, masterAddress, epochs,
    inSyncReplicas, notInSyncReplicas); None when no controller leader answers."""
    if not state.get("controllers"):
        return None
    from gateway_native.client import Admin

    addrs = state["namesrvAddr"].split(";")
    admin = Admin(addrs, timeout_ms=timeout_ms)
    admin.start()
    try:
        return admin.sync_state_data(addrs)
    except Exception:
        return None
    finally:
        admin.shutdown()


def _group_settled(state: dict[str, Any], table: dict[str, Any] | None, bname: str,
                   members: list[dict[str, Any]]) -> bool:
    """The controller named a master of the group and every running member is in its SyncStateSet."""
    group = (table or {}).get(bname) or {}
    if int(group.get("masterBrokerId") or -1) < 1:
        return False
    in_sync = {r["brokerId"] for r in group.get("inSyncReplicas", [])}
    return all(m["brokerId"] in in_sync for m in members if m["brokerName"] == bname and alive(m))


def _replication_connected(state: dict[str, Any], member: dict[str, Any]) -> bool:
    """A master has every slave of its group connected on the HA port."""
    if member["kind"] != "broker" or member["brokerId"] != 0 or state["replicas"] < 2:
        return True
    info = admin_get(member, "/api/ha") or {}
    return int(info.get("haConnections") or 0) >= state["replicas"] - 1


def wait_ready(state: dict[str, Any], members: list[dict[str, Any]], deadline: float) -> None:
    """Until every member logged its ready event and every master has its slaves connected;
    LauncherError(code 1) naming the first member that exited or was not ready in time."""
    pending = list(members)
    while True:
        for m in list(pending):
            if not alive(m):
                raise LauncherError(f"{m['name']} exited during start-up; the end of {m['log']}:\n{log_tail(m)}",
                                    code=1)
            if _ready(m) and _replication_connected(state, m):
                pending.remove(m)
        if not pending and state.get("controllers") and any(m["kind"] == "broker" for m in members):
            table = controller_view(state)
            unsettled = [g for g in sorted({m["brokerName"] for m in members if m["kind"] == "broker"})
                         if not _group_settled(state, table, g, state["members"])]
            if not unsettled:
                return
            if time.monotonic() > deadline:
                raise LauncherError(f"the controller did not elect a master of {', '.join(unsettled)} with every "
                                    f"member in sync within the --timeout (view: {json.dumps(table)})", code=1)
            time.sleep(0.2)
            continue
        if not pending:
            return
        if time.monotonic() > deadline:
            m = pending[0]
            what = "its slaves did not connect" if _ready(m) else "not ready"
            raise LauncherError(f"{m['name']}: {what} within the --timeout; the end of {m['log']}:\n{log_tail(m)}",
                                code=1)
        time.sleep(0.2)


def stop_members(members: list[dict[str, Any]], timeout: float) -> dict[str, str]:
    """SIGTERM to every running member, SIGKILL to those still running after ``timeout``
    seconds; waits until each is gone. name -> what happened."""
    outcome = {m["name"]: "was not running" for m in members if not alive(m)}
    running = [m for m in members if alive(m)]
    for m in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(m["pid"], signal.SIGTERM)
            os.kill(m["pid"], signal.SIGCONT)  # a member stopped by `cluster kill --signal STOP` too
    deadline = time.monotonic() + timeout
    while any(alive(m) for m in running) and time.monotonic() < deadline:
        time.sleep(0.1)
    for m in running:
        if alive(m):
            with contextlib.suppress(ProcessLookupError):
                os.kill(m["pid"], signal.SIGKILL)
            outcome[m["name"]] = f"killed (SIGKILL): still running {timeout:g} s after SIGTERM"
        else:
            outcome[m["name"]] = "stopped"
    kill_deadline = time.monotonic() + 10
    while any(alive(m) for m in running) and time.monotonic() < kill_deadline:
        time.sleep(0.05)
    for m in members:
        if alive(m):
            outcome[m["name"]] = f"STILL RUNNING (pid {m['pid']})"
        _forget_pid(m)
    return outcome


def _stop_cluster(state: dict[str, Any], timeout: float) -> dict[str, str]:
    """Brokers first (they unregister from the NameServers as they go), then the NameServers."""
    brokers = [m for m in state["members"] if m["kind"] == "broker"]
    namesrvs = [m for m in state["members"] if m["kind"] == "namesrv"]
    outcome = stop_members(brokers, timeout)
    outcome.update(stop_members(namesrvs, timeout))
    return outcome


# -- commands ---------------------------------------------------------------------------------
def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """A member or status row with one column per listener, for tables."""
    return {**row, **{listener: row["ports"].get(listener) for listener in BROKER_LISTENERS}}


def cmd_up(args: argparse.Namespace) -> int:
    directory = Path(args.dir).resolve()
    state = plan_cluster(directory, groups=args.groups, replicas=args.replicas, namesrvs=args.namesrvs,
                         controllers=args.controllers,
                         role=args.role, host=args.host, base_port=args.base_port, cluster_name=args.cluster_name,
                         config_file=args.config, settings=args.set, command=rockafka_command())
    with locked(directory):
        previous = read_state(directory)
        if previous is not None:
            running = [m for m in previous["members"] if alive(m)]
            if running:
                names = ", ".join(f"{m['name']} (pid {m['pid']})" for m in running)
                raise LauncherError(f"a cluster is already up in {directory}: {names}; "
                                    f"`rockafka cluster down --dir {args.dir}` stops it")
        taken = taken_ports(state)
        if taken:
            more = f" and {len(taken) - 6} more" if len(taken) > 6 else ""
            raise LauncherError("ports of the plan already in use: " + ", ".join(taken[:6]) + more
                                + "; choose another --base-port or stop what listens there")
        if not args.json:
            print(f"cluster {state['clusterName']} in {directory}: {args.groups} group(s) x {args.replicas} "
                  f"replica(s), {args.role}, "
                  + (f"{args.controllers} NameServer(s) with the failover controller" if args.controllers
                     else f"{args.namesrvs} NameServer(s)"))
            emit([_flat(m) for m in state["members"]], False,
                 ["name", "role", "kafka", "broker", "ha", "admin", "grpc", "namesrv", "log"])
            sys.stdout.flush()
        state["state"] = "starting"
        write_state(directory, state)
        deadline = time.monotonic() + args.timeout
        try:
            namesrvs = [m for m in state["members"] if m["kind"] == "namesrv"]
            for m in namesrvs:
                _spawn(m)
            write_state(directory, state)
            wait_ready(state, namesrvs, deadline)  # brokers register with them as they start
            brokers = [m for m in state["members"] if m["kind"] == "broker"]
            for m in brokers:
                _spawn(m)
            write_state(directory, state)
            wait_ready(state, brokers, deadline)
        except BaseException:
            _stop_cluster(state, 10.0)
            state["state"] = "down"
            write_state(directory, state)
            raise
        state["state"] = "up"
        state["startedMs"] = int(time.time() * 1000)
        write_state(directory, state)
    if args.json:
        emit(state, True)
    else:
        print(f"up: Kafka bootstrap {state['kafkaBootstrap']}; NameServers {state['namesrvAddr']}; "
              f"`rockafka cluster status --dir {args.dir}` shows it, `rockafka cluster down --dir {args.dir}` stops it")
    return 0


def replication_summary(info: dict[str, Any] | None) -> str:
    if not info:
        return ""
    if "slaves" in info:  # a master
        slaves = info["slaves"]
        text = f"{info.get('haConnections', 0)} slave(s) connected, {info.get('inSyncSlaves', 0)} in sync"
        if slaves:
            text += f", max lag {max(int(s.get('lagBytes') or 0) for s in slaves)} B"
        return text
    if "masterAddress" in info:
        if not info.get("connected"):
            why = f": {info['lastError']}" if info.get("lastError") else ""
            return f"not connected to {info['masterAddress']}{why}"
        behind = info.get("behindBytes")
        return f"following {info['masterAddress']}" + (f", {behind} B behind" if behind is not None else "")
    return ""


def status_rows(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Each member as it is now: alive, live role (a broker's own answer), ports, replication."""
    rows = []
    for m in state["members"]:
        up = alive(m)
        row = {"name": m["name"], "kind": m["kind"], "brokerName": m["brokerName"], "brokerId": m["brokerId"],
               "pid": m["pid"] if up else None, "alive": up, "role": m["role"], "ports": m["ports"],
               "log": m["log"], "dataDir": m["dataDir"], "replication": None, "summary": ""}
        if not up:
            row["summary"] = "not running"
        elif (_proc_stat(m["pid"]) or ("",))[0] == "T":
            row["summary"] = "stopped (SIGSTOP; `cluster kill --signal CONT` resumes it)"
        elif m["kind"] == "broker":
            info = admin_get(m, "/api/cluster")
            if info is None:
                row["summary"] = "admin HTTP not answering"
            else:
                replication = info.get("replication") or {}
                row["role"] = replication.get("brokerRole") or info.get("role") or m["role"]
                row["replication"] = replication
                row["summary"] = replication_summary(replication)
        rows.append(row)
    return rows


def controller_groups(state: dict[str, Any], table: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """Per group the controller's master (and which member that is) and SyncStateSet."""
    if table is None:
        return None
    by_id = {(m["brokerName"], m["brokerId"]): m["name"] for m in state["members"] if m["kind"] == "broker"}
    out = []
    for bname, g in sorted(table.items()):
        master = int(g.get("masterBrokerId") or -1)
        out.append({"brokerName": bname, "masterBrokerId": master, "master": by_id.get((bname, master), ""),
                    "masterAddress": g.get("masterAddress"), "masterEpoch": g.get("masterEpoch"),
                    "syncStateSet": sorted(r["brokerId"] for r in g.get("inSyncReplicas", [])),
                    "syncStateSetEpoch": g.get("syncStateSetEpoch")})
    return out


def _member(state: dict[str, Any], name: str) -> dict[str, Any]:
    for m in state["members"]:
        if m["name"] == name:
            return m
    raise LauncherError(f"no member {name!r} in this cluster; members: "
                        + ", ".join(m["name"] for m in state["members"]))


def _existing(directory: Path) -> dict[str, Any]:
    state = read_state(directory)
    if state is None:
        raise LauncherError(f"no cluster in {directory} (no {STATE_FILE})")
    return state


SIGNALS = {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM, "STOP": signal.SIGSTOP, "CONT": signal.SIGCONT}


def _master_of(state: dict[str, Any], group: str) -> dict[str, Any]:
    """The member the controller names master of ``group`` now."""
    if not state.get("controllers"):
        raise LauncherError("--master-of needs a cluster started with --controllers")
    if group not in {m["brokerName"] for m in state["members"] if m["kind"] == "broker"}:
        raise LauncherError(f"no group {group!r} in this cluster")
    view = controller_view(state) or {}
    master = int((view.get(group) or {}).get("masterBrokerId") or -1)
    for m in state["members"]:
        if m["brokerName"] == group and m["brokerId"] == master:
            return m
    raise LauncherError(f"the controller names no master of {group} now")


def cmd_kill(args: argparse.Namespace) -> int:
    """A signal to one member, for drills: KILL (default, as kill -9), TERM, STOP (hang it), CONT."""
    directory = Path(args.dir).resolve()
    with locked(directory):
        state = _existing(directory)
        if (args.member is None) == (args.master_of is None):
            raise LauncherError("name a MEMBER or --master-of GROUP (one of them)")
        m = _member(state, args.member) if args.member else _master_of(state, args.master_of)
        if not alive(m):
            raise LauncherError(f"{m['name']} is not running")
        os.kill(m["pid"], SIGNALS[args.signal])
        if args.signal == "KILL":
            deadline = time.monotonic() + 10
            while alive(m) and time.monotonic() < deadline:
                time.sleep(0.05)
            _forget_pid(m)
    print(f"{m['name']}: SIG{args.signal} sent to pid {m['pid']}")
    return 0


def cmd_restart(args: argparse.Namespace) -> int:
    """Stop one member (SIGTERM, SIGKILL after --timeout; nothing when it is not running) and
    start it again with the same command line, store and ports; returns once it is ready."""
    directory = Path(args.dir).resolve()
    with locked(directory):
        state = _existing(directory)
        m = _member(state, args.member)
        outcome = stop_members([m], args.timeout)[m["name"]]
        busy = [f"{port} ({listener})" for listener, port in m["ports"].items() if not port_free(state["host"], port)]
        if busy:
            raise LauncherError(f"{m['name']}: ports in use: {', '.join(busy)}")
        _spawn(m)
        write_state(directory, state)
        wait_ready(state, [m], time.monotonic() + args.timeout)
        write_state(directory, state)
    print(f"{m['name']}: {outcome}; started again, pid {m['pid']}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    directory = Path(args.dir).resolve()
    state = read_state(directory)
    if state is None:
        raise LauncherError(f"no cluster in {directory} (no {STATE_FILE}); `rockafka cluster up --dir {args.dir}` "
                            "starts one")
    rows = status_rows(state)
    table = controller_view(state) if any(m["kind"] == "namesrv" and alive(m) for m in state["members"]) else None
    groups = controller_groups(state, table)
    if args.json:
        emit({"state": state["state"], "dir": str(directory), "kafkaBootstrap": state["kafkaBootstrap"],
              "namesrvAddr": state["namesrvAddr"], "members": rows, "controller": groups}, True)
    else:
        print(f"cluster {state['clusterName']} in {directory} ({state['state']}): Kafka bootstrap "
              f"{state['kafkaBootstrap']}; NameServers {state['namesrvAddr']}")
        emit([{**_flat(r), "alive": "yes" if r["alive"] else "NO"} for r in rows], False, ["name", "pid", "alive", "role", "kafka", "broker", "ha", "admin", "grpc", "namesrv",
                           "summary"])
        if state.get("controllers"):
            if table is None:
                print("controller: no leader answers")
            else:
                print("controller's view:")
                emit(groups, False, ["brokerName", "master", "masterBrokerId", "masterAddress", "masterEpoch",
                                     "syncStateSet", "syncStateSetEpoch"])
    # as `systemctl status`: 3 when something that should run does not
    return 0 if all(alive(m) for m in state["members"]) else 3


def cmd_down(args: argparse.Namespace) -> int:
    directory = Path(args.dir).resolve()
    if not (directory / STATE_FILE).exists():
        raise LauncherError(f"no cluster in {directory} (no {STATE_FILE})")
    with locked(directory):
        state = read_state(directory)
        if state is None:
            raise LauncherError(f"no cluster in {directory} (no {STATE_FILE})")
        outcome = _stop_cluster(state, args.timeout)
        state["state"] = "down"
        state["stoppedMs"] = int(time.time() * 1000)
        write_state(directory, state)
    for m in state["members"]:
        print(f"{m['name']}: {outcome.get(m['name'], 'was not running')}")
    return 0


def rockafka_command() -> list[str]:
    """How members are started: the ``rockafka`` beside this Python, else this Python's module."""
    exe = Path(sys.executable).with_name("rockafka")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "rockafka.cli"]


def add_cluster_parser(sub: Any) -> None:
    cluster = sub.add_parser("cluster", help="start, inspect or stop broker groups and NameServers on this machine",
                             description="A local cluster of broker groups (master + slaves) and NameServers, "
                                         "each a process of its own, for trying and testing.")
    what = cluster.add_subparsers(dest="cluster_command", metavar="ACTION")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", default="./cluster", help="the cluster's directory: state, logs, stores "
                                                         "(default ./cluster)")
    up = what.add_parser("up", parents=[common], help="start the NameServers and broker groups")
    up.add_argument("--groups", type=int, default=2, help=f"broker groups, 1..{MAX_GROUPS} (default 2)")
    up.add_argument("--replicas", type=int, default=2,
                    help=f"members per group, master included, 1..{MAX_REPLICAS} (default 2)")
    up.add_argument("--namesrvs", type=int, default=1, help=f"NameServers, 1..{MAX_NAMESRVS} (default 1)")
    up.add_argument("--controllers", type=int, default=0,
                    help=f"NameServers running the failover controller (Raft between them), 0..{MAX_NAMESRVS}, "
                         "in place of --namesrvs; the brokers then run in controller mode (default 0: none)")
    up.add_argument("--role", default="SYNC_MASTER", choices=list(MASTER_ROLES), help="the masters' brokerRole")
    up.add_argument("--host", default="127.0.0.1", help="listen address of every process (default 127.0.0.1)")
    up.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT,
                    help=f"first port of the plan (default {DEFAULT_BASE_PORT}; it uses base .. base + 1035)")
    up.add_argument("--cluster-name", default="DefaultCluster", help="brokerClusterName (default DefaultCluster)")
    up.add_argument("--config", metavar="FILE", help="a broker.conf every broker loads (ports, names and roles "
                                                     "come from the launcher)")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a key for every broker "
                                                                                   "(repeatable)")
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for every process to be ready "
                                                                 "(default 120)")
    up.add_argument("--json", action="store_true", help="print the state document instead of a table")
    status = what.add_parser("status", parents=[common], help="each process: alive, role, ports, replication")
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    down = what.add_parser("down", parents=[common], help="stop every process (SIGTERM, SIGKILL after --timeout)")
    down.add_argument("--timeout", type=float, default=30.0,
                      help="seconds a process has to stop after SIGTERM before SIGKILL (default 30)")
    restart = what.add_parser("restart", parents=[common], help="stop one member and start it again")
    restart.add_argument("member", help="a member's name as `status` lists it (broker-a-0, controller-1, ...)")
    restart.add_argument("--timeout", type=float, default=60.0,
                         help="seconds to stop it (SIGKILL after) and again to wait until it is ready (default 60)")
    kill = what.add_parser("kill", parents=[common], help="send one member a signal, for failure drills")
    kill.add_argument("member", nargs="?", help="a member's name as `status` lists it")
    kill.add_argument("--master-of", metavar="GROUP", help="instead of MEMBER: the member the controller names "
                                                          "master of this group (broker-a, ...) now")
    kill.add_argument("--signal", default="KILL", choices=sorted(SIGNALS),
                      help="KILL (default: as kill -9), TERM, STOP (the process hangs), CONT (it resumes)")


def main(args: argparse.Namespace) -> int:
    commands = {"up": cmd_up, "status": cmd_status, "down": cmd_down, "kill": cmd_kill, "restart": cmd_restart}
    command = commands.get(args.cluster_command or "")
    if command is None:
        print("rockafka cluster: missing action (up, status, down, restart or kill); see `rockafka cluster --help`", file=sys.stderr)
        return 2
    try:
        return command(args)
    except LauncherError as exc:
        print(f"rockafka cluster: {exc}", file=sys.stderr)
        return exc.code
