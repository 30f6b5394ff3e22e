"""Helpers shared by the engine tests (small segment sizes so boundaries are crossed often)."""

from __future__ import annotations

from engine.config import MessageStoreConfig


def small_config(root, **overrides) -> MessageStoreConfig:
    settings = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20 * 100,
        max_hash_slot_num=64,
        max_index_num=256,
        flush_interval_consume_queue=50,
    )
    settings.update(overrides)
    return MessageStoreConfig(**settings)
