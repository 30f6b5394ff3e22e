"""The ``rockafka`` command as a user runs it: help, configuration errors, a locked data dir,
graceful shutdown leaving no ``abort`` file."""

from __future__ import annotations

import subprocess

from tests.support.node import RunningNode, rockafka_command


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(rockafka_command() + list(args), capture_output=True, text=True, timeout=timeout)


def test_serve_help_documents_every_listener_flag():
    out = run("serve", "--help")
    assert out.returncode == 0
    for flag in ("--data-dir", "--kafka-port", "--namesrv-port", "--broker-port", "--admin-port",
                 "--host", "--config", "--set"):
        assert flag in out.stdout
    assert "9092" in out.stdout and "9876" in out.stdout and "10911" in out.stdout


def test_bad_config_value_is_a_clear_error(tmp_path):
    out = run("serve", "--data-dir", str(tmp_path / "d"), "--set", "flushDiskType=SOMETIMES")
    assert out.returncode == 2
    assert "flushDiskType" in out.stderr and "SOMETIMES" in out.stderr
    assert "Traceback" not in out.stderr


def test_inconsistent_broker_group_settings_are_clear_errors(tmp_path):
    cases = [(["--set", "brokerRole=SLAVE"], "brokerId"),  # a slave with the master's id 0
             (["--set", "brokerId=2"], "brokerRole=SLAVE"),  # a slave id on a master
             (["--set", "brokerRole=SLAVE", "--set", "brokerId=1", "--set", "haMasterAddress=nohostport"],
              "haMasterAddress"),
             (["--set", "brokerRole=MASTER"], "brokerRole")]
    for args, says in cases:
        out = run("serve", "--data-dir", str(tmp_path / "d"), *args)
        assert out.returncode == 2, (args, out.stderr)
        assert says in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)


def test_missing_config_file_is_a_clear_error(tmp_path):
    out = run("serve", "--config", str(tmp_path / "nope.conf"))
    assert out.returncode == 2 and "nope.conf" in out.stderr and "Traceback" not in out.stderr


def test_broker_conf_keys_are_applied(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("# RocketMQ key names\nbrokerName=broker-x\nflushDiskType=SYNC_FLUSH\n")
    node = RunningNode(tmp_path / "data")
    node_args = node.args
    node.args = lambda: node_args() + ["--config", str(conf)]  # type: ignore[method-assign]
    with node:
        log = node.log_tail(10**6)
        assert "flush_disk_type='SYNC_FLUSH'" in log
        assert "broker-x" in log


def test_second_process_on_same_data_dir_is_refused(tmp_path):
    with RunningNode(tmp_path / "data") as first:
        out = run("serve", "--host", "127.0.0.1", "--data-dir", str(first.data_dir),
                  "--kafka-port", "0", "--namesrv-port", "0", "--broker-port", "0",
                  "--ha-port", "0", "--admin-port", "0")
        assert out.returncode == 1
        assert "lock" in out.stderr.lower() and "Traceback" not in out.stderr
        assert first.running()


def test_a_listener_port_in_use_is_a_clear_error_and_a_clean_exit(tmp_path):
    """Another program already holds the admin port: the node says which address is taken,
    exits non-zero, releases the listeners it had opened and leaves the store closed cleanly."""
    import socket

    from tests.support.node import free_port

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        busy = taken.getsockname()[1]
        kafka_port = free_port()
        out = run("serve", "--host", "127.0.0.1", "--data-dir", str(tmp_path / "data"),
                  "--kafka-port", str(kafka_port), "--namesrv-port", "0", "--broker-port", "0",
                  "--ha-port", "0", "--admin-port", str(busy))
    assert out.returncode == 1
    assert str(busy) in out.stderr and "in use" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "data" / "abort").exists()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as again:
        again.bind(("127.0.0.1", kafka_port))  # the Kafka listener it had opened is closed


def test_sigterm_shuts_down_cleanly(tmp_path):
    node = RunningNode(tmp_path / "data").start()
    assert (node.data_dir / "abort").exists()
    assert node.stop() == 0
    assert not (node.data_dir / "abort").exists()
    assert (node.data_dir / "checkpoint").exists()


def test_node_lifts_a_low_open_files_limit(tmp_path):
    """A node with thousands of queues needs thousands of descriptors: a low soft limit is
    lifted to the hard limit at start."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(512, hard)
    node = RunningNode(tmp_path / "data")
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))  # the child inherits it
    try:
        node.start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        limits = open(f"/proc/{node.proc.pid}/limits").read()
        line = next(line for line in limits.splitlines() if line.startswith("Max open files"))
        expected = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
        assert line.split()[3] == expected or hard == resource.RLIM_INFINITY
        assert low == hard or "open_files_limit_raised" in node.log_tail(10**6)
    finally:
        node.stop()


def test_misspelt_key_is_refused_before_the_node_starts(tmp_path):
    out = run("serve", "--data-dir", str(tmp_path / "d"), "--set", "flushDiskTyp=SYNC_FLUSH")
    assert out.returncode == 2 and "did you mean flushDiskType" in out.stderr
    assert not (tmp_path / "d").exists()  # refused before anything was created


def test_config_list_describes_every_key_with_a_unit_within_100_columns_and_as_json():
    import json

    out = run("config", "list", "--set", "flushDiskType=SYNC_FLUSH")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    at = lines.index("flushDiskType = SYNC_FLUSH  (default ASYNC_FLUSH; enum; store)")
    assert "SYNC_FLUSH" in lines[at + 1] and lines[at + 1].startswith("    ")
    assert "kafkaPort = 9092  (default; port; node)" in lines
    rows = json.loads(run("config", "list", "--json").stdout)
    assert {"kafkaPort", "flushDiskType", "advertised_host"} <= {r["key"] for r in rows}
    assert len(rows) > 150
    for r in rows:  # every key says what it does, in one line, and in what unit
        assert r["about"] and "\n" not in r["about"] and r["unit"], r
        assert r["key"] in out.stdout
    units = {r["key"]: r["unit"] for r in rows}
    assert units["flushIntervalCommitLog"] == "ms" and units["maxMessageSize"] == "bytes"
    assert units["fileReservedTime"] == "hours" and units["group_max_size"] == "count"


def test_missing_tls_certificate_is_a_clear_error(tmp_path):
    proc = run("serve", "--data-dir", str(tmp_path / "data"), "--kafka-port", "0", "--namesrv-port", "0",
               "--broker-port", "0", "--ha-port", "0", "--admin-port", "0", "--grpc-port", "0",
               "--set", f"tlsServerCertPath={tmp_path / 'no-such.pem'}", "--set",
               f"tlsServerKeyPath={tmp_path / 'no-such.key'}", "--set", "tlsServerMode=enforcing")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "no-such.pem" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]


def test_every_port_in_use_is_named_and_a_failed_start_leaves_no_abort(tmp_path):
    import socket

    from tests.support.node import free_port

    ports = {flag: free_port() for flag in ("--kafka-port", "--namesrv-port", "--broker-port", "--ha-port",
                                            "--admin-port", "--grpc-port")}
    taken = []
    try:
        for flag in ("--kafka-port", "--ha-port", "--grpc-port"):
            s = socket.socket()
            s.bind(("127.0.0.1", ports[flag]))
            s.listen()
            taken.append(s)
        args = ["serve", "--host", "127.0.0.1", "--data-dir", str(tmp_path / "d")]
        for flag, port in ports.items():
            args += [flag, str(port)]
        out = run(*args)
    finally:
        for s in taken:
            s.close()
    assert out.returncode == 1 and "Traceback" not in out.stderr
    for name, flag in (("kafka", "--kafka-port"), ("ha", "--ha-port"), ("grpc", "--grpc-port")):
        assert f"{name} 127.0.0.1:{ports[flag]}" in out.stderr, out.stderr
    assert f"127.0.0.1:{ports['--broker-port']}" not in out.stderr
    assert not (tmp_path / "d" / "abort").exists()


def test_namesrv_check_config(tmp_path):
    ok = run("namesrv", "--check-config", "--port", "19999")
    assert ok.returncode == 0 and "configuration ok" in ok.stdout and "0.0.0.0:19999" in ok.stdout
    unfinished = run("namesrv", "--check-config", "--set", "enableControllerInNamesrv=true")
    assert unfinished.returncode == 2 and "controllerDLegerPeers" in unfinished.stderr
    bad = run("namesrv", "--check-config", "--set", "authenticationEnabld=true")
    assert bad.returncode == 2 and "did you mean authenticationEnabled" in bad.stderr and "Traceback" not in bad.stderr
    missing = run("namesrv", "--check-config", "--config", str(tmp_path / "nope.conf"))
    assert missing.returncode == 2 and "nope.conf" in missing.stderr
