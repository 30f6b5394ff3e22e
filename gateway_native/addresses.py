"""This machine's addresses as a broker or a controller announces them: the IPv4 addresses of
its interfaces, and the one RocketMQ picks for brokerIP1 (never 127.0.0.1 when another exists,
since a client on another host cannot reach it)."""

from __future__ import annotations

import functools
import socket
import struct


def interface_addresses() -> list[str]:
    """IPv4 addresses of this machine's network interfaces, in interface order (Linux ioctl;
    empty where that is not available)."""
    try:
        import fcntl

        names = [name for _idx, name in socket.if_nameindex()]
    except (ImportError, OSError, AttributeError):
        return []
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name in names:
            try:
                raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:  # no IPv4 address on this interface
                continue
            out.append(socket.inet_ntoa(raw[20:24]))
    return out


@functools.lru_cache(maxsize=1)
def local_address() -> str:
    """This machine's address as RocketMQ's ``RemotingUtil.getLocalAddress`` picks it for
    brokerIP1: the first non-loopback IPv4 address outside 192.168/16, else the last
    non-loopback one, else what the host name resolves to. ``gethostbyname(gethostname())``
    alone often gives 127.0.0.1 (Debian's /etc/hosts), which remote clients cannot reach."""
    candidates = [ip for ip in interface_addresses() if not ip.startswith("127.")]
    for ip in candidates:
        if not ip.startswith("192.168."):
            return ip
    if candidates:
        return candidates[-1]
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
