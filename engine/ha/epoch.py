"""The epoch file: which master wrote which part of the commitlog (``<root>/ha/epoch``).

Format version 1, text, written atomically (temp file, fsync, rename, fsync of the directory)::

    rockafka-epoch 1
    <epoch> <startOffset> <openedAtMs>   one line per epoch; epoch and start strictly ascending
    crc <crc32>                          CRC-32 of every byte above this line

Entry (e, s, t) says: the bytes from commitlog offset s up to the next entry's start (or the
log's end, for the last entry) were written by the master of epoch e, which opened it at wall
time t (ms). A store that becomes master opens a new epoch at its log end (``open_epoch``); a
slave copies its master's entries as the data it receives crosses them (``append``). Truncating
the log drops the entries that start past the new end (``truncate_from``). Kafka's leader-epoch
checkpoint keeps the first two facts; the opening time tells apart two epochs of the same number
and start that two masters opened independently (a master restored from an older copy of its
data opens "the same" epoch again), which without a controller handing out epochs can happen.

Invariants: epochs and start offsets strictly ascend; an entry is never rewritten except that
an epoch holding no bytes is replaced by the next one opened at the same offset. A file that is
unreadable or fails its CRC is an error (``EpochFileError``): the store never guesses history.
"""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from ..config_manager import write_atomic
from ..errors import StoreError

FORMAT_NAME = "rockafka-epoch"
FORMAT_VERSION = 1


class EpochFileError(StoreError):
    pass


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int
    opened_at: int = 0  # ms since the epoch (wall clock) when a master opened it


class EpochFile:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.lock = threading.RLock()
        self.entries: list[EpochEntry] = []

    # -- persistence -------------------------------------------------------------------------
    def load(self) -> None:
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            self.entries = []
            return
        except OSError as exc:
            raise EpochFileError(f"cannot read epoch file {self.path}: {exc.strerror}") from None
        self.entries = self.decode(text, str(self.path))

    @staticmethod
    def decode(data: bytes, where: str = "epoch file") -> list[EpochEntry]:
        body, sep, tail = data.rpartition(b"crc ")
        if not sep:
            raise EpochFileError(f"{where}: no crc line")
        try:
            crc = int(tail.strip())
        except ValueError:
            raise EpochFileError(f"{where}: crc line is not a number") from None
        if zlib.crc32(body) != crc:
            raise EpochFileError(f"{where}: CRC mismatch (file damaged); restore it or empty the data directory")
        lines = body.decode("utf-8").splitlines()
        if not lines or lines[0] != f"{FORMAT_NAME} {FORMAT_VERSION}":
            raise EpochFileError(f"{where}: unsupported header {lines[0] if lines else ''!r}")
        out: list[EpochEntry] = []
        for n, line in enumerate(lines[1:], 2):
            try:
                e, s, t = (int(x) for x in line.split())
            except ValueError:
                raise EpochFileError(f"{where}:{n}: expected '<epoch> <startOffset> <openedAtMs>', got {line!r}") from None
            if out and (e <= out[-1].epoch or s < out[-1].start_offset):
                raise EpochFileError(f"{where}:{n}: entries must ascend, got {e} {s} after {out[-1]}")
            out.append(EpochEntry(e, s, t))
        return out

    def encode(self) -> bytes:
        body = f"{FORMAT_NAME} {FORMAT_VERSION}\n" + "".join(f"{e.epoch} {e.start_offset} {e.opened_at}\n" for e in self.entries)
        raw = body.encode("utf-8")
        return raw + f"crc {zlib.crc32(raw)}\n".encode()

    def _persist(self) -> None:
        write_atomic(self.path, self.encode(), keep_backup=False)

    # -- queries -----------------------------------------------------------------------------
    def all(self) -> list[EpochEntry]:
        return list(self.entries)

    @property
    def last_epoch(self) -> int:
        entries = self.entries
        return entries[-1].epoch if entries else 0

    def last(self) -> EpochEntry | None:
        entries = self.entries
        return entries[-1] if entries else None

    def entry_for(self, offset: int) -> EpochEntry | None:
        """The epoch the byte at ``offset`` belongs to (None before the first entry)."""
        found = None
        for e in self.entries:
            if e.start_offset <= offset:
                found = e
            else:
                break
        return found

    def end_of(self, epoch: int, log_end: int) -> int | None:
        """Where ``epoch`` ends: the next entry's start, or ``log_end`` for the last one."""
        entries = self.entries
        for i, e in enumerate(entries):
            if e.epoch == epoch:
                return entries[i + 1].start_offset if i + 1 < len(entries) else log_end
        return None

    # -- changes -----------------------------------------------------------------------------
    def open_epoch(self, start_offset: int, epoch: int | None = None) -> EpochEntry:
        """A new master epoch from ``start_offset`` (the log end): ``epoch`` or last + 1."""
        with self.lock:
            new = EpochEntry(self.last_epoch + 1 if epoch is None else epoch, start_offset, int(time.time() * 1000))
            if new.epoch <= self.last_epoch:
                raise EpochFileError(f"epoch {new.epoch} is not newer than {self.last_epoch}")
            # an epoch that wrote nothing (started where the new one starts) leaves no trace
            self.entries = [e for e in self.entries if e.start_offset < start_offset] + [new]
            self._persist()
            return new

    def append(self, entry: EpochEntry) -> bool:
        """A slave records its master's epoch (False when it already has it)."""
        with self.lock:
            last = self.last()
            if last is not None and entry.epoch <= last.epoch:
                return False
            if last is not None and entry.start_offset < last.start_offset:
                raise EpochFileError(f"epoch {entry} starts before {last}")
            self.entries = [e for e in self.entries if e.start_offset < entry.start_offset] + [entry]
            self._persist()
            return True

    def truncate_from(self, offset: int) -> None:
        """The log was cut at ``offset``: drop the epochs that start after it."""
        with self.lock:
            keep = [e for e in self.entries if e.start_offset < offset]
            if keep != self.entries:
                self.entries = keep
                self._persist()

    def reset(self, entries: list[EpochEntry]) -> None:
        with self.lock:
            self.entries = list(entries)
            self._persist()


def consistent_point(master: list[EpochEntry], master_end: int, slave: list[EpochEntry],
                     slave_end: int) -> int | None:
    """Where the two logs stop being the same: the end of the newest epoch both hold (same
    number, start and opening time), bounded by both ends of that epoch. None when they share
    none."""
    m = set(master)
    common = [e for e in slave if e in m]
    if not common:
        return None
    e = common[-1]

    def end(entries: list[EpochEntry], log_end: int) -> int:
        for i, x in enumerate(entries):
            if x.epoch == e.epoch:
                return entries[i + 1].start_offset if i + 1 < len(entries) else log_end
        return log_end

    return min(end(master, master_end), end(slave, slave_end))
