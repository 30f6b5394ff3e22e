"""Micro-benchmark of the codec's hot paths: ``python -m gateway_kafka.protocol.bench``.

Prints per-call costs of Produce request decoding, Fetch response encoding (chunked, records
passed through) and the batch header work the produce path does. Not a test: numbers only;
on a shared machine expect run-to-run variation of 2x.
"""

from __future__ import annotations

import os
import time

from engine import record_batch as rb
from gateway_kafka.protocol import ApiKey, decode_request, encode_request, encode_response_chunks


def _per_call(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main() -> None:
    batch = rb.build_batch([rb.Record(i, i, None, os.urandom(1024), []) for i in range(16)],
                           base_timestamp=0)
    many = {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": f"t{t}", "partition_data": [{"index": p, "records": batch} for p in range(8)]}
        for t in range(4)]}
    one = {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}
    frame_many = encode_request(ApiKey.PRODUCE, 9, 1, many, client_id="bench")[4:]
    frame_one = encode_request(ApiKey.PRODUCE, 9, 1, one, client_id="bench")[4:]
    n = 20000
    cost = _per_call(lambda: decode_request(frame_one), n)
    print(f"produce v9 decode, 1 partition: {cost * 1e6:.1f} us/request")
    cost = _per_call(lambda: decode_request(frame_many), n)
    print(f"produce v9 decode, 32 partitions ({len(frame_many)} B): {cost * 1e6:.1f} us/request")

    fetch = {"responses": [{"topic": f"t{t}", "partitions": [
        {"partition_index": p, "high_watermark": 100, "last_stable_offset": 100,
         "log_start_offset": 0, "aborted_transactions": [], "records": batch}
        for p in range(8)]} for t in range(4)]}
    for version in (11, 12, 16):
        cost = _per_call(lambda: encode_response_chunks(ApiKey.FETCH, version, 1, fetch), n)
        rate = 32 * len(batch) / cost / 1e9
        print(f"fetch v{version} encode_response_chunks, 32 partitions x {len(batch)} B: "
              f"{cost * 1e6:.1f} us/response ({rate:.2f} GB/s of records)")

    cost = _per_call(lambda: rb.validate_batch(batch), n)
    print(f"validate_batch ({len(batch)} B, CRC-32C): {cost * 1e6:.1f} us")
    eight = batch * 8
    cost = _per_call(lambda: list(rb.iter_batches(eight)), n // 10)
    print(f"iter_batches, 8 batches: {cost * 1e6:.1f} us")
    cost = _per_call(lambda: rb.decode_records(batch), 2000)
    print(f"decode_records, 16 x 1 KiB records: {cost * 1e6:.1f} us")


if __name__ == "__main__":
    main()
