"""The remote tier's object store: put / get / get-range / head / list / delete of whole objects.

What it owns: the one interface the tiered store talks to (``ObjectStore``), the errors a
caller can see, and the S3 implementation over obstore (``S3ObjectStore``). It owns no
manifest and no local files; which objects exist *for the broker* is decided by the manifest
in the state log (docs/design/tiered-storage.md), never by listing the bucket.

Why async: the broker's fronts are asyncio (Kafka, remoting, gRPC aio, admin HTTP); a read of
an offloaded offset happens inside a fetch handler and must not block the event loop, and
uploads run as background tasks whose concurrency is a semaphore, not a thread per upload.
obstore's ``*_async`` calls run on its own Rust (tokio) runtime without holding the GIL, so
a multi-MiB upload or range read costs the loop almost nothing.

Invariants:
- Every operation is bounded: it finishes, or raises ``ObjectStoreTimeout`` after
  ``op_timeout_s`` (the wrapper here is independent of the client's own timeouts, so a store
  that accepts a connection and then stops answering cannot hang a caller).
- Errors are four kinds a caller can act on: ``ObjectNotFound`` (the key is absent),
  ``ObjectStoreTimeout`` (too slow: retry later), ``ObjectStoreUnavailable`` (refused,
  unreachable, or answered with an error: retry later), and ``ChecksumMismatch`` (the bytes
  read are not the bytes written: never served).
- ``put`` is atomic (S3 semantics: a reader sees the whole object or none of it), records the
  object's CRC-32C as user metadata (``x-amz-meta-rockafka-crc32c``), and returns it; ``get``
  verifies the whole object against it (and against the caller's expected value, which is
  the one the manifest recorded). A range read cannot be checked against the whole-object
  sum; its bytes are checked by the reader against the record CRCs inside them.
- The obstore module is imported only when an ``S3ObjectStore`` is built: a broker with no
  remote tier never loads it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable
from typing import Any

import crc32c as _crc32c
import structlog

log = structlog.get_logger("rockafka.engine.tiered.object_store")

CRC_ATTRIBUTE = "rockafka-crc32c"  # S3 user metadata: x-amz-meta-rockafka-crc32c


class ObjectStoreError(Exception):
    """Base of every error the object store raises; ``op`` and ``key`` say what failed."""

    def __init__(self, op: str, key: str, message: str):
        super().__init__(f"object store {op} {key!r}: {message}")
        self.op = op
        self.key = key


class ObjectNotFound(ObjectStoreError):
    pass


class ObjectStoreTimeout(ObjectStoreError):
    pass


class ObjectStoreUnavailable(ObjectStoreError):
    pass


class ChecksumMismatch(ObjectStoreError):
    pass


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str | None = None


@dataclasses.dataclass(frozen=True)
class PutResult:
    key: str
    size: int
    crc32c: int
    etag: str | None


def crc32c(data: bytes | memoryview) -> int:
    return _crc32c.crc32c(data)


class ObjectStore:
    """The interface; subclasses implement the ``_do_*`` coroutines.

    The public methods add the deadline, the error mapping and the checksums, so every
    implementation (S3, the fault-injecting double in the tests) behaves the same to callers.
    """

    def __init__(self, *, op_timeout_s: float = 30.0):
        if op_timeout_s <= 0:
            raise ValueError("op_timeout_s must be positive")
        self.op_timeout_s = op_timeout_s

    # -- implementation hooks ------------------------------------------------------------
    async def _do_put(self, key: str, data: bytes, metadata: dict[str, str]) -> str | None:
        raise NotImplementedError

    async def _do_get(self, key: str) -> tuple[bytes, dict[str, str]]:
        raise NotImplementedError

    async def _do_get_range(self, key: str, start: int, end: int) -> bytes:
        raise NotImplementedError

    async def _do_head(self, key: str) -> ObjectInfo:
        raise NotImplementedError

    async def _do_list(self, prefix: str) -> list[ObjectInfo]:
        raise NotImplementedError

    async def _do_delete(self, key: str) -> None:
        raise NotImplementedError

    def _classify(self, op: str, key: str, exc: BaseException) -> ObjectStoreError | None:
        """Maps an implementation's exception to ours; None: not an object-store failure."""
        return None

    async def close(self) -> None:
        pass

    # -- the bounded, checked operations -------------------------------------------------
    async def _bounded(self, op: str, key: str, coro: Awaitable[Any]) -> Any:
        started = time.monotonic()
        try:
            return await asyncio.wait_for(coro, self.op_timeout_s)
        except ObjectStoreError:
            raise
        except (TimeoutError, asyncio.TimeoutError):
            log.warning("object_store_timeout", op=op, key=key, timeout_s=self.op_timeout_s)
            raise ObjectStoreTimeout(
                op, key, f"no answer within {self.op_timeout_s:g}s") from None
        except Exception as exc:  # noqa: BLE001 - mapped below or re-raised
            mapped = self._classify(op, key, exc)
            if mapped is None:
                raise
            log.warning("object_store_error", op=op, key=key, error=str(mapped),
                        elapsed_s=round(time.monotonic() - started, 3))
            raise mapped from exc

    async def put(self, key: str, data: bytes | memoryview) -> PutResult:
        data = bytes(data)
        crc = crc32c(data)
        etag = await self._bounded(
            "put", key, self._do_put(key, data, {CRC_ATTRIBUTE: f"{crc:08x}"}))
        return PutResult(key=key, size=len(data), crc32c=crc, etag=etag)

    async def get(self, key: str, *, expected_crc32c: int | None = None) -> bytes:
        data, metadata = await self._bounded("get", key, self._do_get(key))
        actual = crc32c(data)
        stored = metadata.get(CRC_ATTRIBUTE)
        if stored is not None and int(stored, 16) != actual:
            raise ChecksumMismatch("get", key, f"crc32c {actual:08x} != stored {stored}")
        if expected_crc32c is not None and expected_crc32c != actual:
            raise ChecksumMismatch(
                "get", key, f"crc32c {actual:08x} != expected {expected_crc32c:08x}")
        return data

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object; a short answer is an error, never returned."""
        if start < 0 or end <= start:
            raise ValueError(f"bad range [{start}, {end})")
        data = await self._bounded("get_range", key, self._do_get_range(key, start, end))
        if len(data) != end - start:
            raise ObjectStoreUnavailable(
                "get_range", key, f"asked {end - start} bytes at {start}, got {len(data)}")
        return bytes(data)

    async def head(self, key: str) -> ObjectInfo:
        return await self._bounded("head", key, self._do_head(key))

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        items = await self._bounded("list", prefix, self._do_list(prefix))
        return sorted(items, key=lambda o: o.key)

    async def delete(self, key: str) -> None:
        """Deletes the object; deleting an absent key is not an error (S3 semantics)."""
        await self._bounded("delete", key, self._do_delete(key))


class S3ObjectStore(ObjectStore):
    """An S3-compatible bucket through obstore (AWS S3, SeaweedFS, MinIO, Ceph RGW...).

    Objects larger than ``part_size`` go up as multipart uploads (``part_concurrency`` parts
    at a time); obstore aborts the upload on failure, and a crash mid-upload leaves only
    invisible parts (the bucket's lifecycle rule for incomplete uploads removes them).
    """

    def __init__(self, *, endpoint: str, bucket: str, access_key: str, secret_key: str,
                 region: str = "us-east-1", prefix: str = "",
                 op_timeout_s: float = 30.0, connect_timeout_s: float = 5.0,
                 max_retries: int = 2, part_size: int = 8 * 1024 * 1024,
                 part_concurrency: int = 4):
        super().__init__(op_timeout_s=op_timeout_s)
        import datetime

        from obstore.store import S3Store  # lazily: only a broker with a remote tier needs it

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.part_size = max(5 * 1024 * 1024, part_size)  # S3's smallest non-last part
        self.part_concurrency = max(1, part_concurrency)
        self._store = S3Store(
            bucket,
            prefix=self.prefix or None,
            endpoint=endpoint,
            region=region,
            access_key_id=access_key,
            secret_access_key=secret_key,
            virtual_hosted_style_request=False,
            client_options={
                "allow_http": endpoint.startswith("http://"),
                "connect_timeout": datetime.timedelta(seconds=connect_timeout_s),
                "timeout": datetime.timedelta(seconds=op_timeout_s),
            },
            retry_config={
                "max_retries": max_retries,
                "retry_timeout": datetime.timedelta(seconds=op_timeout_s),
                "backoff": {"init_backoff": datetime.timedelta(milliseconds=100),
                            "max_backoff": datetime.timedelta(seconds=2), "base": 2},
            },
        )
        import obstore

        self._obs = obstore
        self._not_found = obstore.exceptions.NotFoundError
        self._generic = obstore.exceptions.BaseError

    def _classify(self, op: str, key: str, exc: BaseException) -> ObjectStoreError | None:
        if isinstance(exc, (self._not_found, FileNotFoundError)):
            if op == "put":   # a PUT finds no bucket, not no object: the store is misconfigured or failing
                return ObjectStoreUnavailable(op, key, f"the bucket {self.bucket!r} was not found")
            return ObjectNotFound(op, key, "no such object")
        if isinstance(exc, (self._generic, OSError)):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            # "retry_timeout: 30s" is in every retried error's text: only a real time-out counts
            low = first.lower().replace("retry_timeout", "")
            if "timed out" in low or "timeout" in low:
                return ObjectStoreTimeout(op, key, first)
            return ObjectStoreUnavailable(op, key, first)
        return None

    async def _do_put(self, key: str, data: bytes, metadata: dict[str, str]) -> str | None:
        result = await self._obs.put_async(
            self._store, key, data, attributes=dict(metadata),
            use_multipart=len(data) > self.part_size, chunk_size=self.part_size,
            max_concurrency=self.part_concurrency)
        return result.get("e_tag")

    async def _do_get(self, key: str) -> tuple[bytes, dict[str, str]]:
        result = await self._obs.get_async(self._store, key)
        data = await result.bytes_async()
        attributes = {str(k): str(v) for k, v in (result.attributes or {}).items()}
        return bytes(data), attributes

    async def _do_get_range(self, key: str, start: int, end: int) -> bytes:
        return bytes(await self._obs.get_range_async(self._store, key, start=start, end=end))

    async def _do_head(self, key: str) -> ObjectInfo:
        meta = await self._obs.head_async(self._store, key)
        return ObjectInfo(key=meta["path"], size=meta["size"], etag=meta.get("e_tag"))

    async def _do_list(self, prefix: str) -> list[ObjectInfo]:
        out: list[ObjectInfo] = []
        async for chunk in self._obs.list(self._store, prefix or None, chunk_size=1000):
            out.extend(ObjectInfo(key=m["path"], size=m["size"], etag=m.get("e_tag"))
                       for m in chunk)
        return out

    async def _do_delete(self, key: str) -> None:
        await self._obs.delete_async(self._store, key)
