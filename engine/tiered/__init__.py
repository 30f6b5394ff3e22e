"""The remote (object-store) tier of the store: docs/design/tiered-storage.md.

``object_store_from_config`` builds the broker's object store from its keys
(``tieredBackendServiceProvider`` and the ``objectStore*`` keys), or None when the broker has
no remote tier (the default: ``make serve`` needs no object store).
"""

from __future__ import annotations

from typing import Any


def object_store_from_config(store_config: Any) -> Any:
    """An ``ObjectStore`` for ``store_config`` (a ``MessageStoreConfig``), or None for ``none``."""
    provider = getattr(store_config, "tiered_backend_service_provider", "none")
    if provider == "none":
        return None
    if provider != "s3":
        raise ValueError(f"tieredBackendServiceProvider must be none or s3, got {provider!r}")
    from .object_store import S3ObjectStore

    return S3ObjectStore(endpoint=store_config.object_store_endpoint,
                         bucket=store_config.object_store_bucket,
                         access_key=store_config.object_store_access_key,
                         secret_key=store_config.object_store_secret_key,
                         region=store_config.object_store_region,
                         prefix=store_config.tiered_store_file_path,
                         op_timeout_s=store_config.tiered_store_op_timeout / 1000)
