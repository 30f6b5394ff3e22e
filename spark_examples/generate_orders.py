"""Produce a deterministic stream of JSON order events to a Kafka topic (default ``orders``).

The same seed always yields the same orders, so a pipeline's output can be checked exactly:
``expected_stats`` computes, in plain Python, what ``orders_stream.py`` must write for them.

An order is ``{"order_id": "o-000001", "product": "apple", "quantity": 3, "price_cents": 250,
"ts": <event time, epoch ms>}``, keyed by ``order_id``. Event times advance by ``spacing_ms``
per order; about one order in five arrives late by up to ``max_lateness_ms`` (less than the
pipeline's watermark delay, so none is dropped). Prices are whole cents so every aggregate is an
exact integer.

Run: ``python spark_examples/generate_orders.py --bootstrap 127.0.0.1:9092 --count 1000``
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import asdict, dataclass

PRODUCTS = ("apple", "banana", "cherry", "durian", "elderberry")
START_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
WINDOW_MS = 60_000
WATERMARK_DELAY_MS = 60_000


@dataclass(frozen=True)
class Order:
    order_id: str
    product: str
    quantity: int
    price_cents: int
    ts: int

    def key(self) -> bytes:
        return self.order_id.encode()

    def value(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()


@dataclass(frozen=True)
class WindowStats:
    product: str
    window_start_ms: int
    window_end_ms: int
    orders: int
    quantity: int
    revenue_cents: int


def generate(count: int, seed: int = 42, *, start_ms: int = START_MS, spacing_ms: int = 5_000,
             max_lateness_ms: int = 20_000, first_id: int = 0) -> list[Order]:
    rng = random.Random(seed)
    orders = []
    for i in range(count):
        on_time = start_ms + (first_id + i) * spacing_ms
        late_by = rng.randint(1, max_lateness_ms) if rng.random() < 0.2 else 0
        orders.append(Order(order_id=f"o-{first_id + i:06d}", product=rng.choice(PRODUCTS),
                            quantity=rng.randint(1, 9), price_cents=rng.randrange(50, 5000, 5),
                            ts=max(start_ms, on_time - late_by)))
    return orders


def expected_stats(orders: list[Order], *, window_ms: int = WINDOW_MS,
                   watermark_delay_ms: int = WATERMARK_DELAY_MS) -> set[WindowStats]:
    """Windows an append-mode pipeline emits once it has seen ``orders``.

    Spark closes a window when its end is at or below the watermark, and the watermark is the
    largest event time seen minus the delay; later windows stay open (nothing is emitted).
    """
    if not orders:
        return set()
    watermark = max(o.ts for o in orders) - watermark_delay_ms
    acc: dict[tuple[str, int], list[int]] = {}
    for o in orders:
        start = o.ts - o.ts % window_ms
        a = acc.setdefault((o.product, start), [0, 0, 0])
        a[0] += 1
        a[1] += o.quantity
        a[2] += o.quantity * o.price_cents
    return {WindowStats(product, start, start + window_ms, n, q, r)
            for (product, start), (n, q, r) in acc.items() if start + window_ms <= watermark}


def produce(bootstrap: str, topic: str, orders: list[Order], *, timeout: float = 60.0,
            extra_conf: dict[str, object] | None = None) -> int:
    """Send ``orders`` in order with an idempotent producer; raise unless every one is acked."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"{msg.key()!r}: {err}")

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, **(extra_conf or {})})
    for o in orders:
        while True:
            try:
                producer.produce(topic, key=o.key(), value=o.value(), on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: let deliveries drain, then retry
                producer.poll(0.1)
    remaining = producer.flush(timeout)
    if remaining or errors:
        raise RuntimeError(f"{remaining} orders not acknowledged within {timeout}s; "
                           f"errors: {errors[:5]}")
    return len(orders)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True, help="host:port of the Kafka listener")
    ap.add_argument("--topic", default="orders")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--first-id", type=int, default=0,
                    help="continue a stream: ids and event times start after this many orders")
    ap.add_argument("--print-expected", action="store_true",
                    help="print the window stats orders_stream.py must emit, one JSON per line")
    args = ap.parse_args(argv)
    orders = generate(args.count, args.seed, first_id=args.first_id)
    try:
        sent = produce(args.bootstrap, args.topic, orders)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"produced {sent} orders to {args.topic}", file=sys.stderr)
    if args.print_expected:
        for s in sorted(expected_stats(orders), key=lambda s: (s.window_start_ms, s.product)):
            print(json.dumps(asdict(s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
