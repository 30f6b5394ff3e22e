"""Rockafka's RocketMQ-semantic broker core.

The engine owns the store (commitlog, consume queues, index files, checkpoint), the
configuration managers (topics, consumer offsets, subscription groups) and the message
semantics built on them. It imports no wire protocol: ``gateway_kafka`` and
``gateway_native`` import it, never the other way round (``tests/test_layering.py``).
"""
