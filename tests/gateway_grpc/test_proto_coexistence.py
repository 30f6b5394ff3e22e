"""The broker's generated RocketMQ v2 modules and the official Python client load in one process,
in either order (an application embedding a node, or a test process using both): protobuf's
process-wide descriptor pool refuses the same message names from differently named files."""

from __future__ import annotations

import subprocess
import sys

import pytest

OFFICIAL = "from rocketmq.grpc_protocol import service_pb2 as official"
OURS = "from gateway_grpc.proto import service_pb2 as ours; import gateway_grpc.server"
CHECK = "assert ours.SendMessageRequest.DESCRIPTOR.full_name == official.SendMessageRequest.DESCRIPTOR.full_name"


@pytest.mark.parametrize("first,second", [(OFFICIAL, OURS), (OURS, OFFICIAL)], ids=["client-first", "broker-first"])
def test_official_client_and_broker_modules_in_one_process(first, second):
    proc = subprocess.run([sys.executable, "-c", f"{first}\n{second}\n{CHECK}"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
