"""``rockafka`` command line: ``serve`` (all-in-one node), ``namesrv``, ``admin``, ``config list`` and
``cluster up|status|down`` (a local cluster of broker groups, rockafka/cluster_launcher.py).

Every listener follows the same flags; precedence is defaults < ``--config`` broker.conf <
``ROCKAFKA_*`` environment < flags. Errors a person can fix exit non-zero with one line.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any, Sequence

from engine.config import ConfigError, NodeConfig, load_node_config
from engine.errors import StoreError
from broker.tls import TlsError

from . import __version__
from . import logging as rlog


def _add_listener_flags(p: argparse.ArgumentParser) -> None:
    d = NodeConfig()
    p.add_argument("--config", metavar="FILE", help="RocketMQ-style broker.conf (key=value, RocketMQ key names)")
    p.add_argument("--data-dir", metavar="DIR", help=f"store root directory (storePathRootDir; default {d.data_dir})")
    p.add_argument("--host", metavar="ADDR", help=f"listen address for every listener (default {d.host})")
    p.add_argument("--kafka-port", type=int, metavar="PORT", help=f"Kafka protocol port (default {d.kafka_port}; 0 = any free port)")
    p.add_argument("--namesrv-port", type=int, metavar="PORT", help=f"NameServer port (default {d.namesrv_port})")
    p.add_argument("--broker-port", type=int, metavar="PORT", help=f"RocketMQ broker port (listenPort; default {d.broker_port})")
    p.add_argument("--ha-port", type=int, metavar="PORT", help=f"HA replication port (haListenPort; default {d.ha_port})")
    p.add_argument("--admin-port", type=int, metavar="PORT", help=f"admin HTTP port (default {d.admin_port})")
    p.add_argument("--grpc-port", type=int, metavar="PORT",
                   help="RocketMQ 5 gRPC proxy port for the official clients (grpcProxyPort; default 8081)")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="any other key, e.g. --set flushDiskType=SYNC_FLUSH (repeatable; `rockafka config list` shows them all)",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-json", action="store_true", help="log JSON lines instead of key=value")


def config_from_args(args: argparse.Namespace) -> NodeConfig:
    overrides: dict[str, object] = {}
    for item in args.set:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        overrides[k] = v
    for flag in ("data_dir", "host", "kafka_port", "namesrv_port", "broker_port", "ha_port", "admin_port"):
        value = getattr(args, flag, None)
        if value is not None:
            overrides[flag] = value
    if getattr(args, "grpc_port", None) is not None:
        overrides["grpc_proxy_port"] = args.grpc_port
    return load_node_config(args.config, overrides)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rockafka", description="Rockafka: RocketMQ semantics, Kafka and RocketMQ wire protocols")
    parser.add_argument("--version", action="version", version=f"rockafka {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = sub.add_parser("serve", help="run an all-in-one node (NameServer, broker, Kafka gateway, admin HTTP)",
                           description="Run an all-in-one Rockafka node on embedded defaults.")
    _add_listener_flags(serve)
    serve.add_argument("--check-config", action="store_true",
                       help="resolve and validate the configuration (file, environment, flags), then exit: "
                            "0 when it loads, 2 with the reason when it does not")
    namesrv = sub.add_parser("namesrv", help="run a standalone RocketMQ NameServer",
                             description="Run a standalone NameServer (brokers register with it, clients ask it for routes).")
    namesrv.add_argument("--host", default="0.0.0.0", help="listen address (default 0.0.0.0)")
    namesrv.add_argument("--port", type=int, default=9876, help="listen port (default 9876; 0 = any free port)")
    namesrv.add_argument("--advertised-host", metavar="HOST", default=None,
                         help="the address the controller announces as the leader's (default: the listen "
                              "address, or this machine's own address when listening on 0.0.0.0)")
    namesrv.add_argument("--kv-config", metavar="FILE", help="where to persist KV config (default: not persisted)")
    namesrv.add_argument("--broker-expired-ms", type=int, default=120_000, help="drop brokers silent this long (default 120000)")
    namesrv.add_argument("--data-dir", metavar="DIR", default="./namesrv-data",
                         help="where the controller keeps its Raft journal (default ./namesrv-data)")
    namesrv.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                         help="serve Prometheus /metrics here (controller elections and leadership)")
    namesrv.add_argument("--config", metavar="FILE", help="broker.conf with the security and TLS keys "
                         "(tlsServerMode, tlsServerCertPath, authenticationEnabled, innerClientAuthenticationCredentials, ...)")
    namesrv.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                         help="as `serve --set`, and the controller keys, e.g. enableControllerInNamesrv=true "
                              "controllerDLegerPeers=... (docs/design/failover.md)")
    namesrv.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    namesrv.add_argument("--log-json", action="store_true", help="log JSON lines instead of key=value")
    namesrv.add_argument("--check-config", action="store_true",
                         help="resolve and validate the configuration (file, --set, controller keys), then exit: "
                              "0 when it loads, 2 with the reason when it does not")
    from .admin_cli import add_admin_parser

    add_admin_parser(sub)
    from .admin_security import add_security_parser

    add_security_parser(sub)
    from .cluster_launcher import add_cluster_parser

    add_cluster_parser(sub)
    config = sub.add_parser("config", help="list every configuration key with its value and default",
                            description="Show configuration keys (RocketMQ spelling) as `rockafka serve` would "
                                        "resolve them from the same --config, environment and --set.")
    config_what = config.add_subparsers(dest="config_command", metavar="ACTION")
    config_list = config_what.add_parser("list", help="every key, its effective value and default")
    config_list.add_argument("--config", metavar="FILE", help="a broker.conf to resolve, as `serve --config`")
    config_list.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="as `serve --set`")
    config_list.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def cmd_config(args: argparse.Namespace) -> int:
    from engine.config import describe

    from .output import emit

    if args.config_command != "list":
        print("rockafka config: missing action; see `rockafka config --help`", file=sys.stderr)
        return 2
    rows = describe(config_from_args(args))
    if args.json:
        emit(rows, True)
        return 0
    print("\n".join(config_lines(rows)))
    return 0


def config_lines(rows: list[dict[str, str]], width: int = 100) -> list[str]:
    """Two lines a key, none wider than ``width``: ``key = value  (default D; unit; section)``,
    then what it does, indented; a long value wraps onto indented lines."""
    import textwrap

    out = []
    for r in rows:
        default = "default" if r["value"] == r["default"] else f"default {r['default'] or '(none)'}"
        head = f"{r['key']} = {r['value']}  ({default}; {r['unit']}; {r['section']})"
        out += textwrap.wrap(head, width, subsequent_indent="      ", break_on_hyphens=False) or [head]
        out += textwrap.wrap(r["about"], width, initial_indent="    ", subsequent_indent="    ")
    return out


def cmd_namesrv(args: argparse.Namespace) -> int:
    import signal

    import structlog

    from engine.config import is_controller_key, load_controller_config
    from gateway_native.namesrv import NameServer

    rlog.configure(args.log_level, args.log_json)
    settings = {}  # the controller's keys; the rest (security, TLS) configure the NameServer as a node's
    node_settings = []
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        if is_controller_key(key):
            settings[key] = value
        else:
            node_settings.append(item)
    controller = load_controller_config(settings)
    if args.check_config:
        sec_config = config_from_args(argparse.Namespace(config=args.config, set=node_settings))
        role = "with the failover controller" if controller.enable_controller_in_namesrv else "without a controller"
        print(f"configuration ok: {args.config or 'defaults'}, NameServer on {args.host}:{args.port} {role}, "
              f"authentication {'on' if sec_config.security.authentication_enabled else 'off'}")
        return 0

    async def run() -> None:
        ns = NameServer(args.host, args.port, kv_config_path=args.kv_config, broker_expired_ms=args.broker_expired_ms,
                        scan_interval_ms=min(5000, max(100, args.broker_expired_ms // 4)),
                        controller=controller if controller.enable_controller_in_namesrv else None,
                        data_dir=args.data_dir, advertised_host=args.advertised_host)
        # the same security as a node's NameServer: TLS as tlsServerMode says (a self-signed pair
        # beside the KV config, or in the working directory), REGISTER_BROKER only from brokers
        # signing with the inner credentials when authenticationEnabled
        from engine import security as engine_security
        from gateway_native.security import secure_server

        sec_config = config_from_args(argparse.Namespace(config=args.config, set=node_settings))
        sec_config.host = args.host
        if args.kv_config:
            sec_config.store.store_path_root_dir = str(Path(args.kv_config).resolve().parent)
        elif not (sec_config.extra_str("tls_server_mode") or sec_config.extra_str("tls_mode")
                  or sec_config.extra_str("tls_server_cert_path")):
            sec_config.extra["tls_server_mode"] = "disabled"  # nowhere to keep a generated certificate
        security = engine_security.SecurityService(None, sec_config)
        security.start()
        secure_server(ns.server, security, sec_config)
        if sec_config.security.authentication_enabled:
            # no users here: route reads signed by a broker's users are checked by a broker
            from gateway_native.namesrv import BrokerAuthDelegate

            ns.server.gate.delegate = BrokerAuthDelegate(ns, sec_config)
        from broker.tls import tls_mode

        secured = (sec_config.security.authentication_enabled or sec_config.security.authorization_enabled
                   or tls_mode(sec_config) == "enforcing")
        if secured and controller.enable_controller_in_namesrv:
            if security.inner is None:
                raise ConfigError("enableControllerInNamesrv with security on (authenticationEnabled, "
                                  "authorizationEnabled or tlsServerMode=enforcing) needs "
                                  "innerClientAuthenticationCredentials, the same on every controller: the "
                                  "controllers' Raft traffic is encrypted and authenticated with its secret")
            # the controllers' Raft traffic encrypted and authenticated with the cluster's inner secret
            ns.controller_raft_password = security.inner[1]
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await ns.start()
        metrics_port = None
        if args.metrics_port is not None:
            from prometheus_client import start_http_server

            from engine.metrics import REGISTRY

            server, _thread = start_http_server(args.metrics_port, addr=args.host, registry=REGISTRY)
            metrics_port = server.server_port
        structlog.get_logger("rockafka.namesrv").info("namesrv_ready", host=args.host, namesrv_port=ns.port,
                                                      metrics_port=metrics_port)
        try:
            await stop.wait()
        finally:
            await ns.stop()
    asyncio.run(run())
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .app import Node

    config = config_from_args(args)
    if args.check_config:
        print(f"configuration ok: {args.config or 'defaults'}, broker {config.broker.broker_name} "
              f"id {config.broker.broker_id} {config.store.broker_role}, data in {config.data_dir}")
        return 0
    busy = ports_in_use(config)
    if busy:
        print(f"rockafka: address already in use: {', '.join(busy)} "
              "(choose others with --kafka-port, --namesrv-port, --broker-port, --ha-port, --admin-port, "
              "--grpc-port)", file=sys.stderr)
        return 1
    rlog.configure(args.log_level, args.log_json)
    node = Node(config)
    asyncio.run(node.run_until_signal())
    return 0


def ports_in_use(config: Any) -> list[str]:
    """Every listener port of ``config`` another process listens on (``name host:port``), found
    by binding each as the node will (SO_REUSEADDR), so one start names every conflict."""
    import errno
    import socket

    wanted = [("namesrv", config.host, config.namesrv_port), ("broker", config.host, config.broker.listen_port),
              ("ha", config.host, config.broker.ha_listen_port),
              ("admin", config.security.admin_host, config.admin_port),
              ("grpc", config.host, config.extra_int("grpc_proxy_port", config.extra_int("grpc_server_port", 8081)))]
    if not (config.extra_str("listeners") or ""):
        wanted.insert(0, ("kafka", config.host, config.kafka_port))
    busy = []
    for name, host, port in wanted:
        if not port:
            continue
        try:
            infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except OSError:
            continue  # an unresolvable host is reported by the listener itself
        for family, kind, proto, _name, addr in infos[:1]:
            with socket.socket(family, kind, proto) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(addr)
                except OSError as exc:
                    if exc.errno == errno.EADDRINUSE:
                        busy.append(f"{name} {host}:{port}")
    return busy


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        if args.command == "serve":
            return cmd_serve(args)
        if args.command == "namesrv":
            return cmd_namesrv(args)
        if args.command == "config":
            return cmd_config(args)
        if args.command == "admin":
            from .admin_cli import main as admin_main

            return admin_main(args)
        if args.command == "security":
            from .admin_security import security_main

            return security_main(args)
        if args.command == "cluster":
            from .cluster_launcher import main as cluster_main

            return cluster_main(args)
    except ConfigError as exc:
        print(f"rockafka: configuration error: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"rockafka: {exc}", file=sys.stderr)
        return 1
    except TlsError as exc:  # a certificate or key file missing or unreadable
        print(f"rockafka: TLS: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        return 0
    except OSError as exc:  # e.g. a port already in use
        print(f"rockafka: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
