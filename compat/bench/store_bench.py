"""Store benchmark: MessageStore put/get throughput against the disk's raw sequential write speed.

Run: ``.venv/bin/python compat/bench/store_bench.py`` (about 1-2 minutes; ``--seconds`` per
case, ``--threads`` writers, ``--dir`` for the data directory, default a temp dir).

For 128 B and 1 KiB bodies, under ASYNC_FLUSH and SYNC_FLUSH, several writer threads put
messages for a fixed time (plus SYNC_FLUSH with 4x the writers, to show group commit); then one reader reads them all back with get_message. In the same
run the physical reference writes the same bytes (the stored units) in the same chunks (one
write per unit) to a plain file in the same directory: buffered for ASYNC (fsync at the end,
as the periodic flush amounts to), and fsync after every chunk for SYNC (what a writer
without group commit would pay). Kafka-style record batches (100 records each) are measured
too. The ratio column is store throughput / raw throughput. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import structlog  # noqa: E402

from engine.config import MessageStoreConfig  # noqa: E402
from engine.message import Message  # noqa: E402
from engine.record_batch import Record, build_batch  # noqa: E402
from engine.store import MessageStore  # noqa: E402

MiB = 1024 * 1024


def quiet_logs() -> None:
    import logging

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def put_case(root: str, body_size: int, flush: str, threads: int, seconds: float, queues: int = 8) -> dict:
    cfg = MessageStoreConfig(store_path_root_dir=root, flush_disk_type=flush,
                             mapped_file_size_commit_log=256 * MiB)
    store = MessageStore(cfg)
    store.start()
    body = os.urandom(body_size)
    counts = [0] * threads
    unit_sizes = [0] * threads
    stop = threading.Event()
    errors: list[str] = []

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            r = store.put_message(Message("Bench", body, queue_id=(n + i) % queues))
            if not r.ok:
                errors.append(f"{r.status.name}: {r.error}")
                return
            unit_sizes[n] = r.wrote_bytes
            i += 1
        counts[n] = i

    ts = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    start = time.perf_counter()
    for t in ts:
        t.start()
    time.sleep(seconds)  # fixed measuring window
    stop.set()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - start
    total = sum(counts)
    unit = max(unit_sizes)
    # read everything back
    rstart = time.perf_counter()
    read = 0
    read_bytes = 0
    for q in range(queues):
        off = store.get_min_offset_in_queue("Bench", q)
        end = store.get_max_offset_in_queue("Bench", q)
        while off < end:
            got = store.get_message("bench", "Bench", q, off, 32)
            read += len(got.messages)
            read_bytes += got.buffer_total_size
            off = got.next_begin_offset
    relapsed = time.perf_counter() - rstart
    store.shutdown()
    return {"count": total, "seconds": elapsed, "unit_size": unit, "errors": errors[:3],
            "msgs_per_s": total / elapsed, "body_mb_per_s": total * body_size / elapsed / MiB,
            "unit_mb_per_s": total * unit / elapsed / MiB,
            "get_msgs_per_s": read / relapsed if relapsed else 0.0,
            "get_mb_per_s": read_bytes / relapsed / MiB if relapsed else 0.0, "read": read}


def batch_case(root: str, records: int, record_size: int, threads: int, seconds: float) -> dict:
    cfg = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=256 * MiB)
    store = MessageStore(cfg)
    store.start()
    batch = build_batch([Record(i, 0, None, os.urandom(record_size), []) for i in range(records)])
    counts = [0] * threads
    stop = threading.Event()

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            r = store.put_record_batch("Batches", n, batch)
            if not r.ok:
                return
            i += 1
        counts[n] = i

    ts = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    start = time.perf_counter()
    for t in ts:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - start
    store.shutdown()
    n = sum(counts)
    return {"batches": n, "records_per_s": n * records / elapsed, "mb_per_s": n * len(batch) / elapsed / MiB,
            "batch_bytes": len(batch)}


def raw_write(path: str, chunk: int, count: int, sync_each: bool, seconds: float) -> dict:
    """Write ``count`` chunks of ``chunk`` bytes sequentially (stop early after ``seconds``)."""
    data = os.urandom(chunk)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    written = 0
    start = time.perf_counter()
    try:
        deadline = start + seconds
        for i in range(count):
            os.write(fd, data)
            written += 1
            if sync_each:
                os.fdatasync(fd)
                if time.perf_counter() > deadline:
                    break
            elif i % 4096 == 0 and time.perf_counter() > deadline:
                break
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(path)
    elapsed = time.perf_counter() - start
    return {"chunks": written, "chunks_per_s": written / elapsed, "mb_per_s": written * chunk / elapsed / MiB}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=6.0, help="measuring window per put case")
    ap.add_argument("--threads", type=int, default=4, help="writer threads")
    ap.add_argument("--dir", default=None, help="data directory parent (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = ap.parse_args(argv)
    quiet_logs()
    base = tempfile.mkdtemp(prefix="store-bench-", dir=args.dir)
    results = []
    try:
        cases = [(flush, size, args.threads) for flush in ("ASYNC_FLUSH", "SYNC_FLUSH") for size in (128, 1024)]
        cases.append(("SYNC_FLUSH", 128, args.threads * 4))  # group commit with more writers
        for flush, body_size, threads in cases:
            root = os.path.join(base, f"{flush}-{body_size}-{threads}")
            r = put_case(root, body_size, flush, threads, args.seconds)
            shutil.rmtree(root, ignore_errors=True)
            raw = raw_write(os.path.join(base, "raw.bin"), r["unit_size"], r["count"],
                            sync_each=(flush == "SYNC_FLUSH"), seconds=args.seconds)
            r.update(flush=flush, body_size=body_size, threads=threads, raw=raw,
                     ratio=r["msgs_per_s"] / raw["chunks_per_s"] if raw["chunks_per_s"] else 0.0)
            results.append(r)
            print(f"put {flush:11s} body={body_size:5d}B threads={threads:2d}: "
                  f"{r['msgs_per_s']:10.0f} msg/s {r['body_mb_per_s']:7.2f} MB/s body "
                  f"({r['unit_mb_per_s']:6.2f} MB/s stored) | raw {raw['chunks_per_s']:10.0f} writes/s "
                  f"{raw['mb_per_s']:8.2f} MB/s | ratio {r['ratio']:.3f} | "
                  f"get {r['get_msgs_per_s']:9.0f} msg/s {r['get_mb_per_s']:7.2f} MB/s"
                  + (f" | errors {r['errors']}" if r["errors"] else ""), flush=True)
        root = os.path.join(base, "batches")
        b = batch_case(root, 100, 128, args.threads, args.seconds / 2)
        shutil.rmtree(root, ignore_errors=True)
        raw = raw_write(os.path.join(base, "raw.bin"), b["batch_bytes"], max(b["batches"], 1), False, args.seconds / 2)
        b["ratio"] = b["mb_per_s"] / raw["mb_per_s"] if raw["mb_per_s"] else 0.0
        b["raw"] = raw
        print(f"put_record_batch ASYNC_FLUSH 100 x 128B records, threads={args.threads}: "
              f"{b['records_per_s']:10.0f} records/s {b['mb_per_s']:7.2f} MB/s | raw {raw['mb_per_s']:8.2f} MB/s "
              f"| ratio {b['ratio']:.3f}", flush=True)
        results.append({"case": "record_batch", **b})
        if args.json:
            print(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
