"""The uploader (engine/tiered/uploader.py) against a real S3 server (s3proxy): closed data of
a tiered partition is uploaded and recorded, the retention guard holds back everything not yet
recorded, a store that is down fails the pass without losing anything, and the orphan of the
failed upload is swept before its range is uploaded again."""

from __future__ import annotations

import asyncio
import time

from engine.record_batch import Record, build_batch
from engine.tiered.manifest import Manifest
from engine.tiered.object_store import S3ObjectStore
from engine.tiered.segment import SegmentIndex, read_units
from engine.topic_config import TopicConfig
from tests.support.s3_server import ACCESS_KEY, SECRET_KEY, S3Server


def test_upload_survives_a_stopped_store_and_the_guard_holds_until_recorded(make_store, tmp_path):
    store = make_store()       # 64 KiB commitlog segments
    store.topic_config.create_or_update(TopicConfig("orders", read_queue_nums=1, write_queue_nums=1,
                                                    attributes={"remote.storage.enable": "true"}))
    for b in range(80):        # ~170 KiB: the data spans three closed segments and the active one
        store.put_record_batch("orders", 0, build_batch(
            [Record(i, i, b"k%d" % (b * 10 + i), b"v" * 200, []) for i in range(10)]))
        store.put_record_batch("plain", 0, build_batch([Record(0, 0, b"p", b"p" * 50, [])]))
    active_start = store.commitlog.mfq.files[-1].file_from_offset
    assert active_start > 0

    server = S3Server(tmp_path / "s3")
    server.make_bucket("tier")
    objects = S3ObjectStore(endpoint=server.endpoint, bucket="tier", access_key=ACCESS_KEY,
                            secret_key=SECRET_KEY, op_timeout_s=5.0, max_retries=0)
    manifest = Manifest(store)
    manifest.load()
    from engine.tiered.uploader import Uploader
    uploader = Uploader(store, manifest, objects, segment_bytes=32 * 1024)
    first_phy = store.get_message("", "orders", 0, 0, 1).units[0].commitlog_offset
    assert uploader.retention_floor() == first_phy
    store.add_retention_guard(uploader.retention_floor)
    local_units, o = {}, 0            # what the disk serves before anything is deleted
    while o < store.get_max_offset_in_queue("orders", 0):
        res = store.get_message("", "orders", 0, o, 1)
        local_units[o] = bytes(res.messages[0])
        o = res.next_begin_offset
    later = (time.time() + 100 * 3600) * 1000  # every closed segment past fileReservedTime

    # the store is not running: nothing committed, nothing released, one orphan recorded
    assert asyncio.run(uploader.upload_pass()) == 0
    assert uploader.retention_floor() == first_phy
    assert manifest.remote_end("orders", 0) is None and len(manifest.orphans()) == 1
    store.clean_expired_files(force=True, now_ms=later)
    assert store.commitlog.min_offset == 0    # expired, but not uploaded: kept

    server.start()
    try:
        async def upload_and_read():
            n = await uploader.upload_pass()
            assert manifest.orphans() == []
            segs = manifest.segments("orders", 0)
            assert n == len(segs) >= 3 and segs[0].base == 0
            end = segs[-1].end
            # everything below the active segment is remote, nothing past it
            unit_at_end = store.get_message("", "orders", 0, end, 1).units[0]
            assert unit_at_end.commitlog_offset + unit_at_end.size > active_start
            assert uploader.retention_floor() == unit_at_end.commitlog_offset
            o = 0
            while o < end:   # the remote bytes are the local bytes
                seg = manifest.segment_for("orders", 0, o)
                index = SegmentIndex.parse(await objects.get(seg.idx_key, expected_crc32c=seg.idx_crc32c))
                remote = await read_units(objects, seg.log_key, index, o, 1)
                local = store.get_message("", "orders", 0, o, 1)
                assert bytes(remote[0]) == bytes(local.messages[0])
                o = local.next_begin_offset
            keys = {i.key for i in await objects.list("orders/0/") if i.etag is not None}
            assert keys == {k for s in segs for k in (s.log_key, s.idx_key, s.keys_key)}   # no orphan left
            return segs

        segs = asyncio.run(upload_and_read())
        store.clean_expired_files(force=True, now_ms=later)
        assert 0 < store.commitlog.min_offset <= uploader.retention_floor()   # uploaded: deleted
        assert store.get_min_offset_in_queue("orders", 0) > 0

        async def read_offloaded():   # offsets that left the disk, from the object store
            for o, data in local_units.items():
                if o >= segs[-1].end:
                    break
                seg = manifest.segment_for("orders", 0, o)
                index = SegmentIndex.parse(await objects.get(seg.idx_key))
                assert bytes((await read_units(objects, seg.log_key, index, o, 1))[0]) == data
            await objects.close()
        asyncio.run(read_offloaded())
    finally:
        server.stop()
