"""Atomic JSON state files with a backup copy (RocketMQ's ``ConfigManager`` / ``MixAll.string2File``).

Persisting (``write_atomic``) writes a temp file with a name no other writer uses
(``<file>.<random>.tmp``), fsyncs it, hard-links the current file to ``<file>.bak``, renames the
temp file into place and fsyncs the directory, all under a lock per path: so the file itself
always exists and is complete, its ``.bak`` holds the previous complete version, and two
writers of one path (threads of one process) never share or race on a temp file. A crash can
leave a ``<file>.*.tmp`` behind; loading removes such leftovers.

Loading: a missing file means "empty" (first start) unless a ``.bak`` exists; a file that does
not parse is reported (``config_file_corrupt`` event) and the ``.bak`` is used instead; if
neither parses, ``StoreConfigError`` names both paths. State is never silently reset.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import structlog

from .errors import StoreConfigError

log = structlog.get_logger("rockafka.engine.config_manager")




def _default_file_mode() -> int:
    """The mode ``open()`` gives a new file (mkstemp's 0600 would hide configs from tools)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _default_file_mode()
_path_locks: dict[str, threading.Lock] = {}
_path_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    key = os.path.abspath(path)
    with _path_locks_guard:
        lock = _path_locks.get(key)
        if lock is None:
            lock = _path_locks[key] = threading.Lock()
        return lock


def write_atomic(path: Path, data: bytes, keep_backup: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically and durably (see the module docstring)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock_for(path):
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            os.fchmod(fd, _FILE_MODE)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if keep_backup and path.exists():
                _link_backup(path)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        try:
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass


def _link_backup(path: Path) -> None:
    """Make ``<path>.bak`` the current content of ``path`` without ever removing ``path``."""
    bak = path.with_name(path.name + ".bak")
    fd, staged = tempfile.mkstemp(prefix=bak.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(staged)
    try:
        os.link(path, staged)
    except OSError:  # no hard links on this file system: copy
        shutil.copyfile(path, staged)
    os.replace(staged, bak)


def remove_stale_temps(path: Path) -> None:
    """Delete temp files a crashed ``write_atomic`` of ``path`` left behind."""
    path = Path(path)
    with _lock_for(path):  # never a temp file a live writer is filling
        try:
            names = os.listdir(path.parent)
        except OSError:
            return
        prefixes = (path.name + ".", path.name + ".bak.")
        for name in names:
            if name.endswith(".tmp") and name.startswith(prefixes):
                try:
                    os.unlink(path.parent / name)
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
        remove_stale_temps(self.path)
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
