"""Property test: random puts, batches, reads, clean restarts and crashes against a simple model.

The model is, per queue, the list of (logical offset -> body). Whatever the sequence, the store
must hand back exactly the model: contiguous offsets, identical bodies, batches spanning their
record count. Crashes are process kills or (under SYNC_FLUSH) power losses on the in-memory
file system; neither may lose an acknowledged message.
"""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.file_io import MemoryFileIO
from engine.message import Message, decode_message
from engine.record_batch import Record, build_batch, decode_records
from engine.store import GetMessageStatus, MessageStore
from engine_support import small_config

ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 2), st.binary(max_size=300)),
        st.tuples(st.just("batch"), st.integers(0, 2), st.integers(1, 12)),
        st.tuples(st.just("restart"), st.booleans(), st.none()),
        st.tuples(st.just("crash"), st.booleans(), st.none()),
    ),
    min_size=1, max_size=60)


def read_all(store, qid):
    out = []
    offset = store.get_min_offset_in_queue("M", qid)
    end = store.get_max_offset_in_queue("M", qid)
    while offset < end:
        got = store.get_message("g", "M", qid, offset, 7)
        assert got.status is GetMessageStatus.FOUND
        for raw, ref in zip(got.messages, got.units):
            assert ref.queue_offset == offset
            m = decode_message(raw, check_crc=True)
            if m.is_inner_batch:
                out.extend(r.value for r in decode_records(m.body))
            else:
                out.append(m.body)
            offset += ref.record_count
        assert got.next_begin_offset == offset
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.booleans())
def test_store_matches_model(operations, sync):
    root = tempfile.mkdtemp(prefix="store-model-")
    fio = MemoryFileIO()
    cfg = small_config(root, mapped_file_size_commit_log=2048, flush_disk_type="SYNC_FLUSH" if sync else "ASYNC_FLUSH")
    model: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    store = MessageStore(cfg, file_io=fio)
    store.start()
    try:
        for n, (op, a, b) in enumerate(operations):
            if op == "put":
                r = store.put_message(Message("M", b, queue_id=a))
                assert r.ok and r.queue_offset == len(model[a])
                model[a].append(b)
            elif op == "batch":
                values = [b"%d-%d" % (n, i) for i in range(b)]
                r = store.put_record_batch("M", a, build_batch([Record(i, 0, None, v, []) for i, v in enumerate(values)]))
                assert r.ok and (r.queue_offset, r.record_count) == (len(model[a]), b)
                model[a].extend(values)
            elif op == "restart":
                store.shutdown()
                store = MessageStore(cfg, file_io=fio)
                store.start()
            else:  # crash: a kill, or a power loss where SYNC_FLUSH promised durability
                power_loss = a and sync
                after = fio.crash(power_loss=power_loss)
                store.shutdown()  # stops the old threads; they only touch the old files
                fio = after
                store = MessageStore(cfg, file_io=fio)
                store.start()
            for qid in range(3):
                assert store.get_max_offset_in_queue("M", qid) == len(model[qid])
        for qid in range(3):
            assert read_all(store, qid) == model[qid]
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
