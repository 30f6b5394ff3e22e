"""Network namespaces for the partition fault of ``compat/chaos/failover.py`` (root, iproute2).

Layout: one namespace for the controller quorum and one per broker, each joined to this
(the host's) namespace by a veth pair on its own /24 — host side ``10.X.N.1``, namespace side
``10.X.N.2`` (X from this process id, so concurrent runs do not collide). The host forwards
between them, so every process reaches every other through real routing, and the clients
(running here) reach each namespace directly over its link.

``isolate(node)`` deletes the default route inside that broker's namespace: it can still talk
to the host side of its own link (the clients), but no longer to the controllers or the other
brokers (their packets arrive; its answers have no route). ``heal`` puts the route back.
``close`` deletes the namespaces (their veth pairs go with them). IPv4 forwarding is switched on
and left on (another run may be routing through it at the same time).
"""

from __future__ import annotations

import os
import subprocess
from typing import Any


def _ip(*args: str, ns: str | None = None, check: bool = True) -> None:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip", *args]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {res.stderr.strip()}")


class Network:
    def __init__(self, members: int = 3):
        tag = os.getpid() % 10000
        self.second = 200 + os.getpid() % 50
        self.prefix = f"rkf{tag}"
        self.names: dict[int, str] = {}  # 0 = controllers, 1.. = brokers
        # left on afterwards: another run on this machine may be routing through it meanwhile
        with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
            f.write("1")
        try:
            for n in range(members + 1):
                self._make(n)
        except Exception:
            self.close()
            raise

    def _make(self, n: int) -> None:
        ns = f"{self.prefix}n{n}"
        host_if, ns_if = f"{self.prefix}h{n}", f"{self.prefix}v{n}"
        _ip("netns", "add", ns)
        self.names[n] = ns
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", ns)
        _ip("addr", "add", f"{self.host_ip(n)}/24", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("addr", "add", f"{self.ns_ip(n)}/24", "dev", ns_if, ns=ns)
        _ip("link", "set", ns_if, "up", ns=ns)
        _ip("link", "set", "lo", "up", ns=ns)
        _ip("route", "add", "default", "via", self.host_ip(n), ns=ns)

    def host_ip(self, n: int) -> str:
        return f"10.{self.second}.{n}.1"

    def ns_ip(self, n: int) -> str:
        return f"10.{self.second}.{n}.2"

    def controller_place(self) -> dict[str, Any]:
        return {"host": self.ns_ip(0), "command_prefix": ["ip", "netns", "exec", self.names[0]]}

    def broker_place(self, n: int) -> dict[str, Any]:
        return {"host": self.ns_ip(n), "command_prefix": ["ip", "netns", "exec", self.names[n]]}

    def _index(self, node: Any) -> int:
        for n in self.names:
            if n and self.ns_ip(n) == node.host:
                return n
        raise ValueError(f"{node} is not in a namespace of this network")

    def isolate(self, node: Any) -> None:
        n = self._index(node)
        _ip("route", "del", "default", ns=self.names[n])

    def heal(self, node: Any) -> None:
        n = self._index(node)
        _ip("route", "replace", "default", "via", self.host_ip(n), ns=self.names[n])

    def close(self) -> None:
        for ns in self.names.values():
            _ip("netns", "del", ns, check=False)
        self.names = {}
