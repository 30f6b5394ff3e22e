"""Physical references for the benchmark results: what this machine can do at all.

- sequential write bandwidth to the data directory's disk, into the page cache (no fsync) and
  made durable (fdatasync every 64 MiB and at the end), 1 MiB writes;
- loopback TCP copy bandwidth: one sender thread, one receiving thread, 1 MiB sends, the
  receiver reading into a reused buffer (what a broker serving fetches over 127.0.0.1 could
  reach at best), and the same with ``os.sendfile`` from a file in the page cache.

Prints one JSON object (MiB/s). Nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import threading
import time
from pathlib import Path

MiB = 1 << 20


def write_bandwidth(directory: Path, total_mib: int, sync_every_mib: int | None) -> float:
    block = os.urandom(MiB)
    fd, path = tempfile.mkstemp(prefix="physical-", dir=directory)
    try:
        t0 = time.perf_counter()
        for i in range(total_mib):
            os.write(fd, block)
            if sync_every_mib and (i + 1) % sync_every_mib == 0:
                os.fdatasync(fd)
        if sync_every_mib:
            os.fdatasync(fd)
        return total_mib / (time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.unlink(path)


def loopback_bandwidth(total_mib: int, source: Path | None = None) -> float:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    got = [0]

    def receive() -> None:
        conn, _ = server.accept()
        buf = bytearray(MiB)
        with conn:
            while True:
                n = conn.recv_into(buf)
                if not n:
                    return
                got[0] += n

    t = threading.Thread(target=receive)
    t.start()
    out = socket.create_connection(("127.0.0.1", port))
    block = os.urandom(MiB)
    t0 = time.perf_counter()
    if source is None:
        for _ in range(total_mib):
            out.sendall(block)
    else:
        with open(source, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            for _ in range(total_mib * MiB // size):
                out.sendfile(f, 0, size)
    out.close()
    t.join()
    elapsed = time.perf_counter() - t0
    server.close()
    return got[0] / MiB / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / "results" / "tmp")
    ap.add_argument("--mib", type=int, default=1024)
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    src = args.dir / "physical-sendfile-source"
    src.write_bytes(os.urandom(64 * MiB))
    try:
        result = {
            "write_no_fsync_mib_s": round(write_bandwidth(args.dir, args.mib, None)),
            "write_fdatasync_mib_s": round(write_bandwidth(args.dir, args.mib, 64)),
            "loopback_send_recv_mib_s": round(loopback_bandwidth(args.mib * 2)),
            "loopback_sendfile_mib_s": round(loopback_bandwidth(args.mib * 2, src)),
            "load_average_at_end": round(os.getloadavg()[0], 2),
        }
    finally:
        src.unlink()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
