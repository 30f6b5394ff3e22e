"""Engine test fixtures: real stores on real files in a temporary directory, small segments."""

from __future__ import annotations

import pytest

from engine.store import MessageStore
from engine_support import small_config


@pytest.fixture
def make_store(tmp_path):
    """Factory: ``make_store(**config_overrides)`` -> started store, shut down at teardown."""
    stores: list[MessageStore] = []

    def make(root=None, file_io=None, start=True, **overrides) -> MessageStore:
        store = MessageStore(small_config(root or tmp_path / "store", **overrides), file_io=file_io)
        stores.append(store)
        if start:
            store.start()
        return store

    yield make
    for s in stores:
        s.shutdown()
