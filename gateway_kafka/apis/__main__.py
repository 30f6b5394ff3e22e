"""Print the Kafka APIs and versions the gateway offers as a Markdown table.

    python -m gateway_kafka.apis

compat/README.md quotes its output, so the documented table is the registry's.
"""

from __future__ import annotations

from gateway_kafka.apis import REGISTRY, advertised, load_all
from gateway_kafka.protocol import api_name


def markdown() -> str:
    load_all()
    lines = ["| key | API | versions | module |", "|---:|---|---|---|"]
    for key, lo, hi in advertised():
        spec = REGISTRY[key]
        lines.append(f"| {key} | {api_name(key)} | {lo}-{hi} | `gateway_kafka/apis/{spec.name}.py` |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
