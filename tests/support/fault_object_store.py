"""An in-memory object store that can be made slow, unreachable, hung or corrupting.

Only for the fault tests of ``engine.tiered.object_store``: what is under test there is the
bounding and checking layer every implementation shares (deadlines, error kinds, checksums);
the round trips themselves are tested against the real S3 server.
"""

from __future__ import annotations

import asyncio

from engine.tiered.object_store import ObjectInfo, ObjectNotFound, ObjectStore, \
    ObjectStoreError, ObjectStoreUnavailable


class FaultObjectStore(ObjectStore):
    def __init__(self, *, op_timeout_s: float):
        super().__init__(op_timeout_s=op_timeout_s)
        self.objects: dict[str, tuple[bytes, dict[str, str]]] = {}
        self.delay_s = 0.0          # every call waits this long first ("slow")
        self.down = False           # every call is refused ("stopped")
        self.hang = False           # every call waits forever ("accepts, never answers")
        self.corrupt_reads = False  # reads flip one byte ("bit rot on the way back")
        self.calls = 0
        self._never = asyncio.Event()

    def _classify(self, op: str, key: str, exc: BaseException) -> ObjectStoreError | None:
        if isinstance(exc, FileNotFoundError):
            return ObjectNotFound(op, key, "no such object")
        if isinstance(exc, ConnectionError):
            return ObjectStoreUnavailable(op, key, str(exc))
        return None

    async def _enter(self) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionRefusedError("connection refused")
        if self.hang:
            await self._never.wait()
        if self.delay_s:
            await asyncio.sleep(self.delay_s)

    def _maybe_corrupt(self, data: bytes) -> bytes:
        if not self.corrupt_reads or not data:
            return data
        return bytes([data[0] ^ 0x01]) + data[1:]

    async def _do_put(self, key, data, metadata):
        await self._enter()
        self.objects[key] = (data, dict(metadata))
        return f'"{len(data)}"'

    async def _do_get(self, key):
        await self._enter()
        if key not in self.objects:
            raise FileNotFoundError(key)
        data, meta = self.objects[key]
        return self._maybe_corrupt(data), meta

    async def _do_get_range(self, key, start, end):
        await self._enter()
        if key not in self.objects:
            raise FileNotFoundError(key)
        return self._maybe_corrupt(self.objects[key][0][start:end])

    async def _do_head(self, key):
        await self._enter()
        if key not in self.objects:
            raise FileNotFoundError(key)
        return ObjectInfo(key=key, size=len(self.objects[key][0]))

    async def _do_list(self, prefix):
        await self._enter()
        return [ObjectInfo(key=k, size=len(v[0])) for k, v in self.objects.items()
                if k.startswith(prefix)]

    async def _do_delete(self, key):
        await self._enter()
        self.objects.pop(key, None)
