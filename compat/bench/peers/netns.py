"""Run this process again inside a private network namespace (``unshare -n``) with only its own
loopback up — for peers that bind every interface (Apache RocketMQ's proxy has no bind
address). Nothing started inside is reachable from outside the namespace; everything the run
talks to (peers, Rockafka nodes, client runners) is started inside it too.

``reexec_in_private_netns()`` returns in the new process (the caller continues there); the
original process waits for it and exits with its status. Fetch everything that needs the network
(Maven) before calling it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

_MARK = "ROCKAFKA_IN_PRIVATE_NETNS"


def reexec_in_private_netns() -> None:
    if os.environ.get(_MARK) == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=False)
        return
    unshare = shutil.which("unshare")
    if unshare is None:
        sys.exit("unshare (util-linux) is needed to give the peer a private network namespace")
    env = dict(os.environ, **{_MARK: "1"})
    cmd = [unshare, "-n"] if os.geteuid() == 0 else [unshare, "-rn"]
    # the command line exactly as this process was started (``python -m pkg.mod`` included)
    proc = subprocess.run([*cmd, sys.executable, *sys.orig_argv[1:]], env=env)
    sys.exit(proc.returncode)
