"""Atomic JSON state files with a backup copy (RocketMQ's ``ConfigManager`` / ``MixAll.string2File``).

Persisting writes ``<file>.tmp``, fsyncs it, moves the current file to ``<file>.bak`` and
renames the temp file into place, then fsyncs the directory. So at every moment either the
file or its ``.bak`` is a complete document.

Loading: a missing file means "empty" (first start) unless a ``.bak`` exists; a file that does
not parse is reported (``config_file_corrupt`` event) and the ``.bak`` is used instead; if
neither parses, ``StoreConfigError`` names both paths. State is never silently reset.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import structlog

from .errors import StoreConfigError

log = structlog.get_logger("rockafka.engine.config_manager")


def write_atomic(path: Path, data: bytes, keep_backup: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError:  # e.g. a full disk: the current file stays as it was, the partial copy goes
        tmp.unlink(missing_ok=True)
        raise
    if keep_backup and path.exists():
        os.replace(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


class ConfigManager:
    """Base: subclasses implement ``encode() -> dict`` and ``decode(dict)``."""

    file_name = ""

    def __init__(self, config_dir: str | os.PathLike[str]):
        self.path = Path(config_dir) / self.file_name
        self.lock = threading.RLock()
        self._dirty = False

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    def load(self) -> None:
        doc = self._read(self.path)
        if doc is None:
            doc = self._read(self.backup_path)
            if doc is None:
                if self.path.exists() or self.backup_path.exists():
                    raise StoreConfigError(
                        f"{self.path} and its backup {self.backup_path} are both unreadable; "
                        "restore one of them (the store does not reset state silently)")
                return
            log.warning("config_file_backup_used", path=str(self.path), backup=str(self.backup_path))
        with self.lock:
            self.decode(doc)

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.error("config_file_unreadable", path=str(path), error=str(exc))
            return None
        try:
            doc = json.loads(raw.decode("utf-8"))
            if not isinstance(doc, dict):
                raise ValueError("top level is not an object")
            return doc
        except (ValueError, UnicodeDecodeError) as exc:
            log.error("config_file_corrupt", path=str(path), error=str(exc))
            return None

    def persist(self) -> None:
        with self.lock:
            data = json.dumps(self.encode(), indent=2, sort_keys=True).encode("utf-8")
            self._dirty = False
            try:
                write_atomic(self.path, data)
            except OSError:
                self._dirty = True  # not on disk yet: the next persist_if_dirty tries again
                raise

    def mark_dirty(self) -> None:
        self._dirty = True

    def persist_if_dirty(self) -> None:
        if self._dirty:
            self.persist()

    def encode(self) -> dict[str, Any]:
        raise NotImplementedError

    def decode(self, doc: dict[str, Any]) -> None:
        raise NotImplementedError


class DataVersion:
    """RocketMQ's ``DataVersion``: bumped on every change so peers can tell configs apart."""

    def __init__(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter = 0

    def next(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter += 1

    def to_json(self) -> dict[str, int]:
        return {"timestamp": self.timestamp, "counter": self.counter}

    def load(self, doc: dict[str, Any] | None) -> None:
        if doc:
            self.timestamp = int(doc.get("timestamp", self.timestamp))
            self.counter = int(doc.get("counter", 0))
