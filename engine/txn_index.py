"""Kafka transactions per queue (open and aborted), as readers of committed data need them.

The index is part of the store's producer state (``engine.producer_state``): derived from the
transactional batches and markers in the commitlog as they are put, checkpointed with the
commitlog offset it describes and rebuilt from the log after a crash. ``for_store(store)`` is
how both gateways reach it: ``last_stable_offset``, ``aborted_between``, ``is_aborted``,
``has_aborted``, ``is_open``, ``open_transactions``.
"""

from __future__ import annotations

from typing import Any

from .producer_state import ProducerStateTable


def for_store(store: Any) -> ProducerStateTable:
    return store.producer_state


__all__ = ["for_store"]
