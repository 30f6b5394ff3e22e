"""Failover configuration mistakes are CLI errors a person can act on (exit 2, the key named),
never a broker that starts half-configured (docs/design/failover.md, "Configuration")."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.node import rockafka_command


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(rockafka_command() + list(args), capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("settings, message", [
    (["enableControllerMode=true", "brokerId=1"], "needs controllerAddr"),
    (["enableControllerMode=true", "controllerAddr=127.0.0.1:1"], "must be >= 1"),
    (["enableControllerMode=true", "controllerAddr=127.0.0.1:1", "brokerId=2", "masterLeaseMills=9000"],
     "masterLeaseMills (9000) must be positive and shorter than controllerHeartBeatTimeoutMills (6000)"),
])
def test_serve_refuses_an_incomplete_controller_mode(tmp_path, settings, message):
    args = ["serve", "--data-dir", str(tmp_path / "d")]
    for s in settings:
        args += ["--set", s]
    proc = _run(*args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


@pytest.mark.parametrize("settings, message", [
    (["enableControllerInNamesrv=true"], "needs controllerDLegerPeers"),
    (["enableControllerInNamesrv=true", "controllerDLegerPeers=n0-127.0.0.1:1", "controllerDLegerSelfId=n9"],
     "controllerDLegerSelfId naming one of them"),
    (["controllerDLegerPeers=n0:1"], "expected id-host:port"),
    (["noSuchKey=1"], "unknown config key 'noSuchKey'"),
])
def test_namesrv_refuses_bad_controller_settings(tmp_path, settings, message):
    args = ["namesrv", "--port", "0", "--data-dir", str(tmp_path / "ns")]
    for s in settings:
        args += ["--set", s]
    proc = _run(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
