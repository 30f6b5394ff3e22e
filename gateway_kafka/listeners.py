"""Kafka listeners: ``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map``.

Each listener is ``NAME://host:port`` with a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT,
SASL_SSL): by the protocol map, or the name itself when it is one of the four (Kafka's rule).
An empty host binds the node's host; port 0 takes any free port. ``advertised.listeners``
names the address clients are told per listener name; a listener without one advertises its
own host (the node's advertised host when it binds a wildcard) and bound port. Metadata,
FindCoordinator and DescribeCluster answer a client with the addresses of the listener it came
in on, so a client stays on its network and its security protocol.

Without ``listeners`` the node has one listener on ``kafka_port``, named by its protocol:
SASL_PLAINTEXT when ``sasl.enabled.mechanisms`` is set, PLAINTEXT otherwise; ``advertised_host``
/ ``advertised_port`` (older keys) advertise it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")


class ListenerConfigError(ValueError):
    pass


@dataclass
class ListenerSpec:
    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int = 0

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def _parse(text: str, key: str) -> list[tuple[str, str, int]]:
    out = []
    for raw in (text or "").split(","):
        raw = raw.strip()
        if not raw:
            continue
        m = _ENTRY.match(raw)
        if m is None:
            raise ListenerConfigError(f"{key}: {raw!r} is not NAME://host:port")
        out.append((m["name"].upper(), m["host"].strip("[]"), int(m["port"])))
    return out


def listener_specs(config: Any) -> list[ListenerSpec]:
    mechanisms = sasl_mechanisms(config)
    raw = config.extra_str("listeners")
    if not raw:
        protocol = "SASL_PLAINTEXT" if mechanisms else "PLAINTEXT"
        return [ListenerSpec(protocol, protocol, config.host, config.kafka_port,
                             config.extra_str("advertised_host"), config.extra_int("advertised_port", 0))]
    pmap = {}
    for pair in (config.extra_str("listener_security_protocol_map") or "").split(","):
        if ":" in pair:
            name, proto = pair.split(":", 1)
            pmap[name.strip().upper()] = proto.strip().upper()
    specs = []
    for name, host, port in _parse(raw, "listeners"):
        proto = pmap.get(name, name if name in PROTOCOLS else None)
        if proto not in PROTOCOLS:
            raise ListenerConfigError(f"listener {name}: no security protocol (add {name}:PLAINTEXT|SSL|SASL_PLAINTEXT|"
                                      "SASL_SSL to listener.security.protocol.map)")
        if any(s.name == name for s in specs):
            raise ListenerConfigError(f"listeners: {name} appears twice")
        if proto.startswith("SASL_") and not mechanisms:
            raise ListenerConfigError(f"listener {name} is {proto}: set sasl.enabled.mechanisms (e.g. SCRAM-SHA-512)")
        specs.append(ListenerSpec(name, proto, host or config.host, port))
    for name, host, port in _parse(config.extra_str("advertised_listeners") or "", "advertised.listeners"):
        spec = next((s for s in specs if s.name == name), None)
        if spec is None:
            raise ListenerConfigError(f"advertised.listeners names {name}, which is not in listeners")
        spec.advertised_host, spec.advertised_port = host or None, port
    return specs


def sasl_mechanisms(config: Any) -> list[str]:
    out = []
    for m in (config.extra_str("sasl_enabled_mechanisms", "") or "").split(","):
        m = m.strip().upper()
        if not m:
            continue
        if m not in SASL_MECHANISMS:
            raise ListenerConfigError(f"sasl.enabled.mechanisms: {m} is not supported ({', '.join(SASL_MECHANISMS)})")
        out.append(m)
    return out
