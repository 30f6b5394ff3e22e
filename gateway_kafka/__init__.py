"""Kafka wire-protocol gateway: stock Kafka clients talk to the engine unchanged."""
