"""How soon writes are acknowledged again after kill -9 of a master, on both protocols
(docs/design/failover.md, "Measured"): five kills under native (SDK, no resend after a lost
answer) and Kafka (confluent-kafka, idempotent, acks=all) load on a SYNC_MASTER group of three
under a 3-node controller quorum. The medians are printed, not asserted; what is asserted is
what a user relies on: every acknowledged record is on every replica, none is stored twice,
and both protocols were acknowledged again after every kill."""

from __future__ import annotations

import pytest

from compat.chaos import failover

pytestmark = pytest.mark.timeout(300)


def test_writes_resume_after_kill_9_of_the_master_without_loss_or_duplicates(tmp_path):
    report = failover.run(tmp_path, cycles=5, faults=["kill"], seed=27, log=lambda *_: None)
    resumed = report["resumed_by_fault"]["kill"]
    print(f"\nkill -9 of the master, 5 runs: native SEND_OK again after median {resumed['native']['median_s']} s "
          f"(max {resumed['native']['max_s']}), Kafka acks=all after median {resumed['kafka']['median_s']} s "
          f"(max {resumed['kafka']['max_s']})")
    assert report["problems"] == [], report["problems"][:20]
    assert report["kafka_fatal"] is None
    assert report["duplicates"] == {"native": 0, "kafka": 0}, report["duplicates"]
    assert all(c["new_master"] != c["master"] for c in report["cycle_log"])
    assert resumed["native"]["runs"] == 5 and resumed["kafka"]["runs"] == 5, report["cycle_log"]
