"""The cluster deployment files agree with the code that will read them.

- deploy/config/: the master's and the slave's broker.conf pass ``rockafka serve
  --check-config``; the NameServer's starts a real ``rockafka namesrv``; the controller
  NameServer's keys load through the controller's own loader; in every file a misspelt key is
  refused, naming the key.
- the controller cluster: ``rockafka-controller@nK`` loads as controller nK of three, and
  broker-controller.conf is a member in controller mode under those three.
- deploy/systemd/: ``systemd-analyze verify`` finds nothing wrong but the missing install
  (/opt/rockafka); ExecStart lines are valid ``rockafka`` commands whose config files are the
  examples above; a dedicated user, a restart policy, LimitNOFILE.
- deploy/k8s/: every manifest passes Kubernetes' published schemas (strict) and, pod by pod as
  the kubelet and the node would read it, container args are valid ``rockafka`` commands, every
  ConfigMap key is a key engine/config.py accepts, container ports are the ports the resolved
  configuration listens on, probes ask paths the admin HTTP serves on a port it binds beyond
  loopback, StatefulSets have headless Services and volumes where the store is; the three
  NameServer pods run the controller with one peer list in which each is ``n<ordinal>`` at its
  stable name; broker pods are controller-mode members (brokerId = ordinal) whose namesrvAddr
  and controllerAddr are those three; each StatefulSet's first pod passes ``--check-config``;
  edited copies that break the cluster are refused; and the three NameServer pods' and broker
  group broker-a's pods' commands, run on loopback, elect a controller leader and a master.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

import engine.config as engine_config
from engine.config import ConfigError, NodeConfig, load_node_config, read_broker_conf, resolve_key
from rockafka.cli import build_parser, config_from_args
from tests.support.node import rockafka_command

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CONFIG = DEPLOY / "config"
BROKER_EXAMPLES = ["broker-master.conf", "broker-slave.conf"]
ADMIN_ROUTES = set(re.findall(r'add_get\("([^"]+)"', (ROOT / "rockafka" / "admin_http.py").read_text()))


def misspelt(path: Path, tmp_path: Path) -> list[tuple[str, Path]]:
    """(key, a copy of the file with that key misspelt) for every key of the file."""
    lines = path.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^([A-Za-z][^=:\s]*)\s*[=:]", line)
        if m:
            bad = tmp_path / f"{path.stem}-{i}.conf"
            bad.write_text("\n".join(lines[:i] + [m.group(1) + "Typo" + line[m.end(1):]] + lines[i + 1:]) + "\n")
            out.append((m.group(1) + "Typo", bad))
    return out


# -- deploy/config ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", BROKER_EXAMPLES)
def test_broker_examples_pass_check_config_and_refuse_a_misspelt_key(name, tmp_path):
    out = subprocess.run(rockafka_command() + ["serve", "--config", str(CONFIG / name), "--check-config"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    cfg = load_node_config(str(CONFIG / name), environ={})
    assert cfg.broker.broker_name == "broker-a" and cfg.data_dir == "/var/lib/rockafka"
    assert cfg.broker.namesrv_addr and len(cfg.broker.namesrv_addr.split(";")) == 2
    assert (cfg.broker.broker_id, cfg.store.broker_role) == ((0, "SYNC_MASTER") if "master" in name else (1, "SLAVE"))
    cases = misspelt(CONFIG / name, tmp_path)
    assert len(cases) >= 15
    for key, bad in cases:
        with pytest.raises(ConfigError, match=re.escape(repr(key))):
            load_node_config(str(bad), environ={})
    key, bad = cases[0]
    out = subprocess.run(rockafka_command() + ["serve", "--config", str(bad), "--check-config"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and f"unknown config key {key!r}; did you mean" in out.stderr


def test_namesrv_example_starts_a_nameserver_and_refuses_a_misspelt_key(tmp_path):
    for key, bad in misspelt(CONFIG / "namesrv.conf", tmp_path):
        with pytest.raises(ConfigError, match=re.escape(repr(key))):
            config_from_args(argparse.Namespace(config=str(bad), set=[]))
    log = tmp_path / "namesrv.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(rockafka_command() + ["namesrv", "--host", "127.0.0.1", "--port", "0", "--kv-config",
                                                      str(tmp_path / "ns" / "kvConfig.json"), "--config",
                                                      str(CONFIG / "namesrv.conf")],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while b"namesrv_ready" not in log.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()


def test_controller_namesrv_example_loads_with_the_controller_keys(tmp_path):
    if not hasattr(engine_config, "load_controller_config"):
        pytest.skip("the failover controller's configuration (engine.config.load_controller_config) is not here")
    values = read_broker_conf(CONFIG / "namesrv-controller.conf")
    # `rockafka namesrv --set` hands these to the controller, not to the node configuration
    assert all(engine_config.is_controller_key(k) for k in values)
    controller = engine_config.load_controller_config(values)
    assert controller.enable_controller_in_namesrv
    assert sorted(controller.peers()) == ["n0", "n1", "n2"] and controller.controller_d_leger_self_id == "n0"
    for key, bad in misspelt(CONFIG / "namesrv-controller.conf", tmp_path):
        with pytest.raises(ConfigError, match=re.escape(repr(key))):
            engine_config.load_controller_config(read_broker_conf(bad))


# -- deploy/systemd -----------------------------------------------------------------------------
def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


UNITS = {"rockafka-namesrv.service": [None],
         "rockafka-broker@.service": ["broker-master", "broker-slave", "broker-controller"]}


@pytest.mark.parametrize("name", sorted(UNITS))
def test_systemd_units_run_rockafka_with_the_example_configs(name, tmp_path):
    service = unit(DEPLOY / "systemd" / name)["Service"]
    assert service["User"] == ["rockafka"] and service["Group"] == ["rockafka"]
    assert service["Restart"] == ["on-failure"] and int(service["LimitNOFILE"][0]) >= 65536
    state_dir = Path("/var/lib") / service["StateDirectory"][0]
    for instance in UNITS[name]:
        commands = service.get("ExecStartPre", []) + service["ExecStart"]
        for line in commands:
            argv = shlex.split(line.replace("%i", instance or ""))
            assert argv[0] == "/opt/rockafka/bin/rockafka"
            args = build_parser().parse_args(argv[1:])  # SystemExit (usage error) fails the test
            assert args.config.startswith("/etc/rockafka/")
            example = CONFIG / Path(args.config).name
            assert example.exists(), f"{name}: {args.config} is none of deploy/config's examples"
            args.config = str(example)
            cfg = config_from_args(args)
            if args.command == "serve":
                assert Path(cfg.data_dir) == state_dir
            else:
                assert Path(args.kv_config).parent == state_dir
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is installed by deploy/dev/install-test-deps.sh"
    target = tmp_path / name.replace("@.service", "@broker-master.service")
    target.write_text((DEPLOY / "systemd" / name).read_text())
    out = subprocess.run([analyze, "verify", str(target)], capture_output=True, text=True, timeout=60)
    # the one complaint expected on a machine without the install the unit's header describes
    problems = [line for line in (out.stdout + out.stderr).splitlines()
                if line.strip() and "Command /opt/rockafka/bin/rockafka is not executable" not in line]
    assert problems == []


def test_controller_unit_and_broker_example_make_a_controller_cluster(tmp_path):
    """rockafka-controller@nK runs a NameServer with the controller whose keys load as the
    controller's, its id the instance; broker-controller.conf is a member in controller mode
    whose controllers are three NameServers (what `rockafka cluster up --controllers 3` starts)."""
    name = "rockafka-controller@.service"
    service = unit(DEPLOY / "systemd" / name)["Service"]
    assert service["User"] == ["rockafka"] and service["Restart"] == ["on-failure"]
    assert service["EnvironmentFile"] == ["/etc/rockafka/controller.env"]
    peers = "n0-10.0.0.1:9878;n1-10.0.0.2:9878;n2-10.0.0.3:9878"
    for instance in ("n0", "n1", "n2"):
        (line,) = service["ExecStart"]
        argv = shlex.split(line.replace("%i", instance).replace("${CONTROLLER_PEERS}", peers))
        assert argv[0] == "/opt/rockafka/bin/rockafka"
        args = build_parser().parse_args(argv[1:])
        assert args.command == "namesrv" and Path(args.data_dir) == Path("/var/lib") / service["StateDirectory"][0]
        values = dict(item.split("=", 1) for item in args.set)
        assert all(engine_config.is_controller_key(k) for k in values)
        controller = engine_config.load_controller_config(values)
        assert controller.enable_controller_in_namesrv and sorted(controller.peers()) == ["n0", "n1", "n2"]
        assert controller.controller_d_leger_self_id == instance
    target = tmp_path / "rockafka-controller@n0.service"
    target.write_text((DEPLOY / "systemd" / name).read_text())
    out = subprocess.run(["systemd-analyze", "verify", str(target)], capture_output=True, text=True, timeout=60)
    problems = [line for line in (out.stdout + out.stderr).splitlines()
                if line.strip() and "Command /opt/rockafka/bin/rockafka is not executable" not in line]
    assert problems == []
    cfg = load_node_config(str(CONFIG / "broker-controller.conf"), {}, environ={})
    assert cfg.broker.enable_controller_mode and cfg.broker.broker_id == 1
    values = read_broker_conf(CONFIG / "broker-controller.conf")
    assert values["enableControllerMode"] == "true" and int(values["brokerId"]) >= 1
    assert values["controllerAddr"] == values["namesrvAddr"] and len(values["controllerAddr"].split(";")) == 3
    for key, bad in misspelt(CONFIG / "broker-controller.conf", tmp_path):
        out = subprocess.run(rockafka_command() + ["serve", "--config", str(bad), "--check-config"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and key in out.stdout + out.stderr, key


def test_systemd_verify_does_catch_a_misspelt_directive(tmp_path):
    """The verification above can fail: a unit with a misspelt key is reported."""
    bad = tmp_path / "rockafka-namesrv.service"
    bad.write_text((DEPLOY / "systemd" / "rockafka-namesrv.service").read_text().replace("LimitNOFILE", "LimitNOFILES"))
    out = subprocess.run(["systemd-analyze", "verify", str(bad)], capture_output=True, text=True, timeout=60)
    assert "Unknown key 'LimitNOFILES'" in out.stdout + out.stderr


# -- deploy/k8s ---------------------------------------------------------------------------------
def manifests() -> list[dict]:
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    listed = kustomization["resources"]
    assert sorted(listed) == sorted(p.name for p in (DEPLOY / "k8s").glob("*.yaml") if p.name != "kustomization.yaml")
    return [doc for name in listed for doc in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()) if doc]


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


POD_INDEX_LABEL = "metadata.labels['apps.kubernetes.io/pod-index']"


def pods(sts: dict) -> range:
    """The ordinals of a StatefulSet's pods (``spec.ordinals.start`` onwards)."""
    start = sts["spec"].get("ordinals", {}).get("start", 0)
    return range(start, start + sts["spec"]["replicas"])


def pod_command(sts: dict, container: dict, ordinal: int) -> tuple[list[str], dict[str, str]]:
    """The container's args and environment in pod ``ordinal`` as the kubelet expands them: field
    references filled from the pod (sample IP), ``$(VAR)`` replaced by earlier variables."""
    samples = {"status.podIP": "10.1.2.3", "metadata.name": f"{sts['metadata']['name']}-{ordinal}",
               "metadata.namespace": "default", POD_INDEX_LABEL: str(ordinal)}
    env: dict[str, str] = {}
    for var in container.get("env", []):
        value = var.get("value") or samples[var["valueFrom"]["fieldRef"]["fieldPath"]]
        env[var["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], value)
        if var["name"].startswith("ROCKAFKA_"):
            resolve_key(var["name"][len("ROCKAFKA_"):])  # a key engine/config.py knows
    # a reference to a variable the container does not define stays literal: a KeyError here
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in container["args"]]
    return args, env


def mounted_config(sts: dict, container: dict, args: argparse.Namespace, configmaps: dict[str, dict],
                   tmp_path: Path) -> Path:
    """A local copy of the ConfigMap file the container's --config names."""
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    configmap = configmaps[volumes[mounts[str(Path(args.config).parent)]]["configMap"]["name"]]
    local = tmp_path / f"{sts['metadata']['name']}-{Path(args.config).name}"
    local.write_text(configmap["data"][Path(args.config).name])
    return local


def resolved_config(sts: dict, container: dict, configmaps: dict[str, dict], tmp_path: Path,
                    ordinal: int) -> tuple[argparse.Namespace, NodeConfig, dict[str, str]]:
    """Pod ``ordinal``'s command as `rockafka` parses it and the configuration the node would run
    with: the mounted ConfigMap file, its ROCKAFKA_* environment, its --set flags."""
    assert container["command"] == ["rockafka"]
    argv, env = pod_command(sts, container, ordinal)
    args = build_parser().parse_args(argv)
    local = mounted_config(sts, container, args, configmaps, tmp_path)
    overrides = {k: v for k, v in (item.split("=", 1) for item in (getattr(args, "set", None) or []))
                 if not engine_config.is_controller_key(k)}
    cfg = load_node_config(str(local), overrides, environ=env)
    return args, cfg, env


def test_k8s_manifests_pass_the_kubernetes_schemas():
    import kubernetes_validate

    version = kubernetes_validate.latest_version()
    docs = manifests()
    assert {d["kind"] for d in docs} == {"ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget"}
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)  # raises on any unknown or missing field
    broken = dict(by_kind(docs, "StatefulSet")[0])
    broken["spec"] = dict(broken["spec"], replica=1)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, version, strict=True)


def test_k8s_configmap_keys_are_keys_rockafka_accepts(tmp_path):
    configmaps = by_kind(manifests(), "ConfigMap")
    assert configmaps
    for cm in configmaps:
        for name, text in cm["data"].items():
            assert name.endswith(".conf")
            path = tmp_path / name
            path.write_text(text)
            values = read_broker_conf(path)
            for key in values:
                resolve_key(key)
            # in controller mode each pod adds its brokerId (its ordinal, 1 onwards) with --set
            controller_mode = values.get("enableControllerMode") == "true"
            load_node_config(str(path), {"brokerId": "1"} if controller_mode else {}, environ={})


def check_k8s_cluster(docs: list[dict], tmp_path: Path) -> None:
    """Every pod of every StatefulSet, resolved as the node would run it, makes one controller
    cluster: three controller NameServers agreeing on their peers, each its own id; broker
    groups in controller mode whose namesrvAddr and controllerAddr are those NameServers."""
    configmaps = {cm["metadata"]["name"]: cm for cm in by_kind(docs, "ConfigMap")}
    services = by_kind(docs, "Service")
    pdbs = by_kind(docs, "PodDisruptionBudget")
    groups: dict[str, dict[int, str]] = {}
    kafka_node_ids: dict[int, str] = {}  # one Kafka cluster: every broker its own node id
    namesrv_pods: list[str] = []
    peer_lists: set[str] = set()
    self_ids: dict[str, str] = {}
    broker_lists: set[tuple[str | None, str | None]] = set()
    for sts in by_kind(docs, "StatefulSet"):
        spec, name = sts["spec"], sts["metadata"]["name"]
        labels = spec["template"]["metadata"]["labels"]
        assert selects(spec["selector"]["matchLabels"], labels)
        # stable network ids: a headless Service governs the pods
        governing = next(s for s in services if s["metadata"]["name"] == spec["serviceName"])
        assert governing["spec"]["clusterIP"] == "None" and selects(governing["spec"]["selector"], labels)
        # at most one member of a group or of the NameServers away at once
        pdb = [p for p in pdbs if selects(p["spec"]["selector"]["matchLabels"], labels)]
        assert len(pdb) == 1 and pdb[0]["spec"]["maxUnavailable"] == 1, name
        (container,) = spec["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert [t["metadata"]["name"] for t in spec["volumeClaimTemplates"]] == ["data"]
        for ordinal in pods(sts):
            pod = f"{name}-{ordinal}"
            args, cfg, env = resolved_config(sts, container, configmaps, tmp_path, ordinal)
            if args.command == "serve":
                assert Path(cfg.data_dir) == Path(mounts["data"])
                assert ports == {"kafka": cfg.kafka_port, "broker": cfg.broker_port, "ha": cfg.ha_port,
                                 "admin": cfg.admin_port, "grpc": cfg.extra_int("grpc_proxy_port", 8081)}
                assert cfg.security.admin_host == "0.0.0.0"  # the kubelet probes from outside the pod
                for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                    get = container[probe]["httpGet"]
                    assert get["path"] in ADMIN_ROUTES and ports[get["port"]] == cfg.admin_port, (name, probe)
                # controller mode: the pod's ordinal is its brokerId (1, 2, ...), no fixed role
                assert cfg.broker.enable_controller_mode, pod
                assert cfg.broker.broker_id == ordinal >= 1, pod
                assert cfg.store.broker_role in ("SYNC_MASTER", "ASYNC_MASTER") and not cfg.store.ha_master_address
                group = groups.setdefault(cfg.broker.broker_name, {})
                assert cfg.broker.broker_id not in group, f"two pods are {cfg.broker.broker_name} id {cfg.broker.broker_id}"
                group[cfg.broker.broker_id] = pod
                node_id = cfg.extra_int("kafka_node_id", cfg.broker.broker_id)
                assert node_id not in kafka_node_ids, f"{pod} and {kafka_node_ids.get(node_id)} are Kafka node {node_id}"
                kafka_node_ids[node_id] = pod
                assert labels["rockafka.io/broker-name"] == cfg.broker.broker_name
                assert cfg.broker.broker_ip1 == "10.1.2.3"  # the pod's IP, from the downward API
                assert env["ROCKAFKA_ADVERTISED_HOST"].startswith(f"{pod}.{spec['serviceName']}.")
                broker_lists.add((cfg.broker.namesrv_addr, cfg.broker.controller_addr))
            else:
                assert args.command == "namesrv"
                assert Path(args.kv_config).parent == Path(mounts["data"]) == Path(args.data_dir)
                controller = engine_config.load_controller_config(dict(item.split("=", 1) for item in args.set))
                assert controller.enable_controller_in_namesrv, pod
                peers = controller.peers()
                # the pod's id is its ordinal; its Raft address its own stable name
                assert controller.controller_d_leger_self_id == f"n{ordinal}", pod
                assert peers[f"n{ordinal}"] == f"{pod}.{spec['serviceName']}:{ports['raft']}", pod
                assert ports == {"namesrv": args.port, "raft": ports["raft"]}
                for probe in ("readinessProbe", "livenessProbe"):
                    assert ports[container[probe]["tcpSocket"]["port"]] == args.port
                self_ids[pod] = controller.controller_d_leger_self_id
                peer_lists.add(controller.controller_d_leger_peers)
                namesrv_pods.append(f"{pod}.{spec['serviceName']}:{args.port}")
    # the controller quorum: three pods, one peer list, every peer one of the pods
    assert len(self_ids) == 3 and len(peer_lists) == 1, (self_ids, peer_lists)
    (peer_list,) = peer_lists
    assert sorted(engine_config.load_controller_config({"controllerDLegerPeers": peer_list}).peers()) \
        == sorted(self_ids.values())
    # brokers take routes and elections from every controller NameServer, by its stable name
    (addrs,) = broker_lists
    assert addrs[0] == addrs[1] and sorted(addrs[0].split(";")) == sorted(namesrv_pods), addrs
    assert sorted(groups) == ["broker-a", "broker-b"]
    for members in groups.values():
        assert len(members) >= 2 and sorted(members) == list(range(1, len(members) + 1)), members
    # Services forward to ports the selected pods have
    pod_ports = [(sts["spec"]["template"]["metadata"]["labels"],
                  {p["name"] for p in sts["spec"]["template"]["spec"]["containers"][0]["ports"]})
                 for sts in by_kind(docs, "StatefulSet")]
    for svc in services:
        chosen = [names for labels, names in pod_ports if selects(svc["spec"]["selector"], labels)]
        assert chosen, svc["metadata"]["name"]
        for port in svc["spec"]["ports"]:
            assert all(port["targetPort"] in names for names in chosen), (svc["metadata"]["name"], port)


def test_k8s_workloads_make_one_controller_cluster(tmp_path):
    check_k8s_cluster(manifests(), tmp_path)


def edited(docs: list[dict], name: str, edit) -> list[dict]:
    out = copy.deepcopy(docs)
    edit(next(d for d in out if d["metadata"]["name"] == name and d["kind"] in ("StatefulSet", "ConfigMap")))
    return out


@pytest.mark.parametrize("case", ["a fourth controller", "a broker missing a controller", "no controller mode",
                                  "ids from 0"])
def test_k8s_cluster_check_catches_an_inconsistent_cluster(case, tmp_path):
    """The check above can fail: a NameServer pod outside the peer list, a broker group whose
    controllerAddr misses one controller, brokers with fixed roles, members numbered from 0."""
    docs = manifests()

    def conf(text_edit):
        return lambda cm: cm["data"].__setitem__("broker.conf", text_edit(cm["data"]["broker.conf"]))

    broken, reason = {
        "a fourth controller": (edited(docs, "rockafka-namesrv", lambda s: s["spec"].__setitem__("replicas", 4)),
                                "controllerDLegerSelfId naming one of them"),
        "a broker missing a controller": (edited(docs, "rockafka-config", conf(
            lambda t: re.sub(r"^(controllerAddr=.*);[^;\n]*$", r"\1", t, flags=re.M))), "rockafka-namesrv-2"),
        "no controller mode": (edited(docs, "rockafka-broker-a", lambda s: s["spec"]["template"]["spec"]["containers"][0][
            "args"].__setitem__(6, "enableControllerMode=false")), "is a slave id"),
        "ids from 0": (edited(docs, "rockafka-broker-b", lambda s: s["spec"].pop("ordinals")), "must be >= 1"),
    }[case]
    with pytest.raises((AssertionError, ConfigError), match=reason):
        check_k8s_cluster(broken, tmp_path)


def test_k8s_pods_pass_check_config(tmp_path):
    """The first pod of each StatefulSet, its command run with --check-config as the image would
    run it (ConfigMap file, environment, --set flags; paths under /var/lib/ moved to tmp_path)."""
    docs = manifests()
    configmaps = {cm["metadata"]["name"]: cm for cm in by_kind(docs, "ConfigMap")}
    checked = set()
    for sts in by_kind(docs, "StatefulSet"):
        (container,) = sts["spec"]["template"]["spec"]["containers"]
        argv, env = pod_command(sts, container, pods(sts)[0])
        args = build_parser().parse_args(argv)
        local = mounted_config(sts, container, args, configmaps, tmp_path)
        local.write_text(local.read_text().replace("/var/lib/", f"{tmp_path}/"))
        argv = [str(local) if a == args.config else a.replace("/var/lib/", f"{tmp_path}/") for a in argv]
        argv = [a for a in argv if a != "--log-json"] + ["--check-config"]
        out = subprocess.run(rockafka_command() + argv, capture_output=True, text=True, timeout=60,
                             env={**os.environ, **env})
        assert out.returncode == 0, (sts["metadata"]["name"], out.stdout + out.stderr)
        checked.add(args.command)
    assert checked == {"serve", "namesrv"}


def test_dockerfile_runs_the_user_and_command_the_manifests_expect():
    text = (DEPLOY / "k8s" / "Dockerfile").read_text()
    assert re.search(r'^ENTRYPOINT \["rockafka"\]$', text, re.M)
    assert re.search(r"^USER 10001:10001$", text, re.M)
    for sts in by_kind(manifests(), "StatefulSet"):
        ctx = sts["spec"]["template"]["spec"]["securityContext"]
        assert (ctx["runAsUser"], ctx["runAsGroup"]) == (10001, 10001)
    copied = set(re.findall(r"^COPY (\w+) \1$", text, re.M))
    packages = {p.split("*")[0] for p in re.findall(r'"(\w+)\*?"', (ROOT / "pyproject.toml").read_text().split(
        "[tool.setuptools.packages.find]")[1].split("\n\n")[0])}
    assert copied == packages  # every package the install needs is in the image


def test_k8s_pods_run_a_controller_cluster(tmp_path):
    """The three NameServer pods' and broker group broker-a's pods' commands, run here with each
    pod's stable name mapped to loopback and its ports to free ones (the same mapping everywhere),
    make one cluster: each NameServer starts its controller as n<ordinal>, one becomes the
    leader, and the controller makes one broker-a pod master and the other its slave."""
    from tests.support.node import free_port

    docs = manifests()
    sts_by_name = {s["metadata"]["name"]: s for s in by_kind(docs, "StatefulSet")}
    configmaps = {cm["metadata"]["name"]: cm for cm in by_kind(docs, "ConfigMap")}
    ns_sts, broker_sts = sts_by_name["rockafka-namesrv"], sts_by_name["rockafka-broker-a"]
    (ns_container,) = ns_sts["spec"]["template"]["spec"]["containers"]
    (broker_container,) = broker_sts["spec"]["template"]["spec"]["containers"]
    ns_ports = {p["name"]: p["containerPort"] for p in ns_container["ports"]}
    local_ports = {i: (free_port(), free_port()) for i in pods(ns_sts)}

    def local_names(text: str) -> str:
        for i, (ns, raft) in local_ports.items():
            name = f"rockafka-namesrv-{i}.{ns_sts['spec']['serviceName']}"
            text = text.replace(f"{name}:{ns_ports['raft']}", f"127.0.0.1:{raft}")
            text = text.replace(f"{name}:{ns_ports['namesrv']}", f"127.0.0.1:{ns}")
        return text

    procs, logs = [], []

    def start(sts: dict, container: dict, ordinal: int, argv_edit, conf_edit=lambda t: t, env_edit=None) -> None:
        argv, env = pod_command(sts, container, ordinal)
        args = build_parser().parse_args(argv)
        conf = mounted_config(sts, container, args, configmaps, tmp_path)
        conf = conf.rename(conf.with_name(f"{ordinal}-{conf.name}"))
        conf.write_text(conf_edit(local_names(conf.read_text()).replace("/var/lib/", f"{tmp_path}/{sts['metadata']['name']}-{ordinal}/")))
        argv = [str(conf) if a == args.config else argv_edit(local_names(a).replace(
            "/var/lib/", f"{tmp_path}/{sts['metadata']['name']}-{ordinal}/")) for a in argv]
        logs.append(tmp_path / f"{sts['metadata']['name']}-{ordinal}.log")
        with open(logs[-1], "wb") as out:
            procs.append(subprocess.Popen(rockafka_command() + argv, stdout=out, stderr=subprocess.STDOUT,
                                          env={**os.environ, **env, **(env_edit or {})}))

    def events(name: str) -> list[dict]:
        return [json.loads(line) for log in logs for line in log.read_text().splitlines()
                if line.startswith("{") and f'"{name}"' in line]

    def wait_for(done, what: str) -> None:
        deadline = time.monotonic() + 60
        while not done():
            assert all(p.poll() is None for p in procs) and time.monotonic() < deadline, (
                what + "\n" + "\n".join(log.read_text()[-3000:] for log in logs))
            time.sleep(0.2)

    try:
        for i in pods(ns_sts):
            start(ns_sts, ns_container, i, lambda a, i=i: str(local_ports[i][0]) if a == str(ns_ports["namesrv"]) else a)
        wait_for(lambda: len(events("controller_started")) == 3 and events("controller_became_leader"),
                 "a controller leader")
        started = events("controller_started")
        assert sorted(e["self_id"] for e in started) == [f"n{i}" for i in pods(ns_sts)]
        assert all(e["peers"] == started[0]["peers"] for e in started)
        port_keys = ("kafkaPort", "listenPort", "haListenPort", "grpcProxyPort", "adminPort")
        for i in pods(broker_sts):
            mine = {k: free_port() for k in port_keys}
            start(broker_sts, broker_container, i, lambda a: a,
                  lambda t, mine=mine: re.sub(r"^(%s)=\d+$" % "|".join(port_keys), lambda m: f"{m.group(1)}={mine[m.group(1)]}",
                                              t, flags=re.M).replace("adminHost=0.0.0.0", "adminHost=127.0.0.1"),
                  # a node's own NameServer port (the pod's 9876 is its own; here it must be free)
                  {"ROCKAFKA_BROKER_IP1": "127.0.0.1", "ROCKAFKA_ADVERTISED_HOST": "127.0.0.1",
                   "ROCKAFKA_NAMESRV_PORT": str(free_port())})
        wait_for(lambda: events("failover_became_master") and events("failover_following"), "a master and its slave")
        assert len(events("failover_became_master")) == 1
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
