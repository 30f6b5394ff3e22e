"""Long work reports progress: counts, percent, rate and an ETA, then a final line; quick work
stays silent."""

from __future__ import annotations

import structlog

from engine.progress import Progress


def test_progress_reports_counts_and_eta_then_finishes():
    with structlog.testing.capture_logs() as logs:
        p = Progress("recovery_progress", 1000, "bytes", every_s=0.0, phase="commitlog_scan")
        p.update(250)
        p.update(500)
        p.finish()
    assert [e["done"] for e in logs] == [250, 500, 500]
    first = logs[0]
    assert first["event"] == "recovery_progress" and first["total"] == 1000 and first["unit"] == "bytes"
    assert first["percent"] == 25.0 and first["phase"] == "commitlog_scan" and first["eta_s"] is not None
    assert first["eta_s"] >= 0 and logs[-1]["finished"] is True and logs[-1]["eta_s"] == 0.0


def test_quick_work_is_silent():
    with structlog.testing.capture_logs() as logs:
        p = Progress("retention_progress", 10, "queues", every_s=3600)
        for n in range(1, 11):
            p.update(n)
        p.finish()
    assert logs == []


def test_recovery_scan_logs_its_progress(tmp_path, monkeypatch):
    """The store's own recovery scan reports through Progress (its reporting period set to 0
    here, so a small log is enough to see the lines)."""
    from engine import progress as progress_mod
    from engine.config import MessageStoreConfig
    from engine.message import Message
    from engine.store import MessageStore

    cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path), mapped_file_size_commit_log=1 << 20,
                             mapped_file_size_consume_queue=20 * 1000)
    store = MessageStore(cfg)
    store.start()
    for i in range(3000):
        store.put_message(Message("P", b"x" * 10, keys=[f"k{i}"]))
    store.shutdown()
    (tmp_path / "checkpoint").unlink()  # no checkpoint: the whole commitlog is scanned again
    original = progress_mod.Progress.__init__

    def eager(self, *a, **kw):
        original(self, *a, **kw)
        self.every_s, self._next = 0.0, self.started
    monkeypatch.setattr(progress_mod.Progress, "__init__", eager)
    with structlog.testing.capture_logs() as logs:
        again = MessageStore(cfg)
        again.start()
        again.shutdown()
    scans = [e for e in logs if e["event"] == "recovery_progress"]
    assert scans and scans[-1]["finished"] is True and scans[-1]["unit"] == "bytes"
    assert scans[-1]["done"] > 0 and scans[-1]["total"] >= scans[-1]["done"]
