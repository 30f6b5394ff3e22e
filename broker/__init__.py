"""The broker core: the rules every protocol shares, between the gateways and the engine.

Arrows: ``rockafka/`` -> ``gateway_*`` -> ``broker`` -> ``engine``. The engine is the store and its
semantics and knows no client protocol; a gateway decodes a request, calls this package, and
encodes the answer. What lives here is written once for the three gateways:

- ``put_path``: the one way a write reaches the store (inline or through the send queue with
  RocketMQ's fast failure), the replication wait, and ``PutStatus``, the protocol-neutral outcome
  each gateway maps to its wire codes with one table of its own.
- ``topics``: topic auto-creation (the one place a topic config is created for a write or a
  metadata request) and RocketMQ's TBW102 inheritance rule.
- ``read_path``: the internal-topic rule and the long-poll wake-ups (``ArrivalHub``).
- ``replication`` and ``store_view``: what a gateway may know of replication and of the
  commitlog, so no gateway reaches into ``store.ha``, ``store.commitlog`` or ``store.dispatcher``.

Invariants: nothing here imports a gateway or speaks a wire format (no Kafka, remoting or gRPC
types in an argument or a result); every blocking store call leaves the event loop unless the
store says it cannot wait (``put_would_wait``).
"""
