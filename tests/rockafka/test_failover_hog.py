"""No false failover under a CPU hog (docs/design/failover.md, "Failure cases"): a controller
quorum and a SYNC_MASTER group of two, real processes, native and Kafka writers running, then
four busy processes at normal priority on the 2-core machine for 15 s (``make chaos`` runs 60 s:
``compat/chaos/failover.py --hog 60``). The controller must elect nobody (same master, same
epoch, no ``controller_elected_master`` event, no broker changing role) and nothing acknowledged
may be lost."""

from __future__ import annotations

import pytest

from compat.chaos import failover

pytestmark = pytest.mark.timeout(300)


def test_a_cpu_hog_on_every_core_causes_no_election_and_no_loss(tmp_path):
    report = failover.run_hog(tmp_path, seconds=15, procs=4, seed=27, log=lambda *_: None)
    hog = report["hog"]
    print(f"\nhog {hog['hog_s']} s x{hog['hog_procs']}: controller {hog['controller_before']} -> "
          f"{hog['controller_after']}; broker events {hog['broker_events']}; acknowledged during the hog "
          f"{hog['acked_during']}")
    assert hog["elections"] == [], hog["elections"]
    before, after = hog["controller_before"], hog["controller_after"]
    assert before["masterBrokerId"] is not None and before["masterBrokerId"] == after["masterBrokerId"], hog
    assert before["masterEpoch"] == after["masterEpoch"], hog
    # one master and one slave since the start, no role change since
    assert hog["broker_events"].get("failover_became_master") == 1, hog["broker_events"]
    assert hog["broker_events"].get("failover_became_slave", 0) <= 1, hog["broker_events"]
    assert hog["acked_during"]["native"] > 0 and hog["acked_during"]["kafka"] > 0, hog
    assert report["problems"] == [], report["problems"][:20]
    assert report["kafka_fatal"] is None
    assert report["duplicates"] == {"native": 0, "kafka": 0}, report["duplicates"]
