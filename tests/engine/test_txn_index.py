"""The Kafka transaction index: last stable offset, aborted ranges, persistence across reloads."""

from __future__ import annotations

from engine.txn_index import TransactionIndex


def test_lso_and_aborted_ranges_survive_reload(tmp_path):
    idx = TransactionIndex(tmp_path)
    idx.load()
    assert idx.last_stable_offset("t", 0, 10) == 10
    idx.begin("t", 0, 7, 3)
    idx.begin("t", 0, 7, 5)   # later batches of the same transaction keep the first offset
    idx.begin("t", 0, 8, 4)
    assert idx.last_stable_offset("t", 0, 10) == 3
    idx.complete("t", 0, 7, 9, committed=False)
    assert idx.last_stable_offset("t", 0, 12) == 4
    idx.complete("t", 0, 8, 11, committed=True)
    assert idx.last_stable_offset("t", 0, 12) == 12

    again = TransactionIndex(tmp_path)
    again.load()
    assert again.last_stable_offset("t", 0, 12) == 12
    assert again.aborted_between("t", 0, 0, 12) == [(7, 3)]
    assert again.aborted_between("t", 0, 10, 12) == []   # marker before the range
    assert again.aborted_between("t", 0, 0, 3) == []     # starts after the range
    assert again.is_aborted("t", 0, 7, 5) and not again.is_aborted("t", 0, 8, 5) and not again.is_aborted("t", 0, 7, 9)
    again.forget_before("t", 0, 10)
    assert not again.has_aborted("t", 0)


def test_open_transaction_survives_reload(tmp_path):
    idx = TransactionIndex(tmp_path)
    idx.begin("t", 1, 42, 100)
    again = TransactionIndex(tmp_path)
    again.load()
    assert again.is_open("t", 1, 42) and again.last_stable_offset("t", 1, 200) == 100


def test_forget_topic_clears_a_deleted_topic(tmp_path):
    idx = TransactionIndex(tmp_path)
    idx.begin("gone", 0, 5, 0)
    idx.complete("gone", 0, 5, 3, committed=False)
    idx.begin("gone", 1, 6, 7)
    idx.begin("kept", 0, 6, 2)
    idx.forget_topic("gone")
    again = TransactionIndex(tmp_path)
    again.load()
    assert not again.has_aborted("gone", 0) and again.last_stable_offset("gone", 1, 9) == 9
    assert again.last_stable_offset("kept", 0, 9) == 2
