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
        # disk-usage thresholds out of the way: tests must not depend on how full the disk is
        disk_max_used_space_ratio=99,
        disk_space_clean_forcibly_ratio=99,
        disk_space_warning_level_ratio=99,
    )
    settings.update(overrides)
    return MessageStoreConfig(**settings)


def crash_config(root, **overrides) -> MessageStoreConfig:
    """The crash tests' settings (the writer child and the verifying parent must agree)."""
    settings = dict(flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=16 * 1024,
                    flush_interval_consume_queue=20, max_hash_slot_num=1024, max_index_num=4096)
    settings.update(overrides)
    return small_config(root, **settings)
