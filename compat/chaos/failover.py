"""Automatic failover under load from both protocols, with real faults; a checker then proves
that nothing acknowledged was lost (``docs/design/failover.md``).

Set-up: a 3-node controller quorum (``rockafka namesrv`` with ``enableControllerInNamesrv``,
also serving routes) and a broker group of three ``rockafka serve`` in controller mode,
``brokerRole=SYNC_MASTER``. Two writers run through every fault and never stop on an error:

- the Python SDK sends to ``FailoverNative`` (sync sends, 2 retries; a SEND_OK is an
  acknowledgement, other statuses and errors are not);
- confluent-kafka, idempotent (``enable.idempotence``, ``acks=all``), produces to
  ``FailoverKafka`` (3 partitions, ``min.insync.replicas=2``); a delivery report without error
  is an acknowledgement.

Faults (``--faults``, one per cycle, in turn):
- ``kill``: SIGKILL of the master's process group, restarted after a new master is elected;
- ``stop``: SIGSTOP of the master until a new master acknowledged writes (well past its
  lease), then SIGCONT: the zombie must not acknowledge anything (its lease expired), steps
  down and truncates what only it had;
- ``controller``: SIGKILL of the controller leader, restarted after another peer leads;
- ``partition``: the master's network namespace loses its routes to the controllers and
  the slaves while clients still reach it (``--netns``; needs root and iproute2): it must stop
  acknowledging within its lease, a slave is elected, the partition heals.

Per cycle the harness records when the fault hit and when the first write after it was
acknowledged (the failover time, for master faults). After the last cycle the writers stop,
the group settles, every broker is stopped cleanly and the checker opens the final master's
store through the engine: per queue / partition, every acknowledged record must be at its
offset with its bytes, no offset acknowledged twice with different records, acknowledged
offsets ascending in the order the writer got them; records present more than once are counted
as duplicates (native resends after a lost answer; zero expected from the idempotent Kafka
producer). The slaves' logs must hold the same bytes for every acknowledged record.

``python compat/chaos/failover.py --cycles 50`` (``make chaos``) prints a JSON report and exits
non-zero on any loss; ``--faults kill`` with ``--cycles 10`` gives the failover-time median.
The suite (``tests/rockafka/test_failover.py``) runs a few cycles. A ``stop`` cycle also counts
from the end of the stopped master's lease (its last heartbeat the controller received + its
lease, from the controller's ``controller_electing`` event) to each protocol's first
acknowledgement, and the native acknowledgements its store gave after that end (must be none).

``--hog SECONDS`` runs no fault: a group of two under the same load, and ``--hog-procs`` busy
processes (normal priority, bounded, always killed) on every core for SECONDS; it exits non-zero
on any election (controller master or epoch changed, a ``controller_elected_master`` event) or
loss (``make chaos`` runs 60 s; ``tests/rockafka/test_failover_hog.py`` 15 s).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.failover import FailoverGroup  # noqa: E402
from tests.support.group import wait_until  # noqa: E402

NATIVE_TOPIC = "FailoverNative"
KAFKA_TOPIC = "FailoverKafka"
KAFKA_PARTITIONS = 3
FAULTS = ("kill", "stop", "controller", "partition")


class NativeWriter(threading.Thread):
    def __init__(self, namesrv: str):
        super().__init__(name="native-writer", daemon=True)
        self.namesrv = namesrv
        self.stop_event = threading.Event()
        self.acked: list[tuple[float, int, int, bytes]] = []  # ack time, queue id, queue offset, body
        self.statuses: Counter[str] = Counter()
        self.acked_by: list[tuple[float, int]] = []  # ack time, port of the store that acknowledged

    def run(self) -> None:
        from gateway_native.client import Message, Producer
        from gateway_native.remoting.message_codec import decode_offset_msg_id

        i = 0
        # no resend after a lost answer (the send may have been stored: a resend would store it
        # twice); the SDK itself waits out a failover when nothing was sent (docs/design/failover.md)
        with Producer("failover-native", self.namesrv, retry_times_when_send_failed=0, send_msg_timeout=10000) as p:
            while not self.stop_event.is_set():
                body = f"native-{i:08d}".encode() * 3
                i += 1
                try:
                    r = p.send(Message(NATIVE_TOPIC, body, keys=[f"n{i}"]))
                except Exception as exc:  # no master reachable right now: not acknowledged
                    self.statuses[f"error:{type(exc).__name__}"] += 1
                    self.stop_event.wait(0.05)  # pace attempts against a group without a master
                    continue
                self.statuses[r.status.name] += 1
                if r.status.name == "SEND_OK":
                    now = time.monotonic()
                    self.acked.append((now, r.message_queue.queue_id, r.queue_offset, body))
                    try:
                        self.acked_by.append((now, decode_offset_msg_id(r.offset_msg_id)[1]))
                    except Exception:
                        self.acked_by.append((now, -1))
                else:
                    self.stop_event.wait(0.02)


class KafkaWriter(threading.Thread):
    def __init__(self, bootstrap: str):
        super().__init__(name="kafka-writer", daemon=True)
        self.bootstrap = bootstrap
        self.stop_event = threading.Event()
        self.acked: list[tuple[float, int, int, bytes]] = []  # ack time, partition, offset, value
        self.statuses: Counter[str] = Counter()
        self.fatal: str | None = None

    def run(self) -> None:
        from confluent_kafka import KafkaException, Producer

        extra = {"debug": "eos,msg,broker", "log_level": 7} if os.environ.get("FAILOVER_RDKAFKA_DEBUG") else {}
        p = Producer({**extra, "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "message.timeout.ms": 60000, "linger.ms": 5, "socket.timeout.ms": 3000,
                      "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 100,
                      "max.in.flight.requests.per.connection": 5})

        def report(err, msg) -> None:
            if err is not None:
                self.statuses[err.name()] += 1
                if err.fatal():
                    self.fatal = f"{err.name()}: {err.str()}"
            else:
                self.statuses["OK"] += 1
                self.acked.append((time.monotonic(), msg.partition(), msg.offset(), msg.value()))
        i = 0
        try:
            while not self.stop_event.is_set() and self.fatal is None:
                value = f"kafka-{i:08d}".encode() * 3
                try:
                    p.produce(KAFKA_TOPIC, value, partition=i % KAFKA_PARTITIONS, on_delivery=report)
                    i += 1
                except BufferError:
                    p.poll(0.05)
                except KafkaException as exc:
                    self.fatal = str(exc)
                p.poll(0.001)
            p.flush(60)
        except KafkaException as exc:
            self.fatal = str(exc)


# -- faults ----------------------------------------------------------------------------------------
def _signal_group(proc: Any, sig: int) -> None:
    os.killpg(proc.pid, sig)


def _log_time(line: str) -> float | None:
    m = re.search(r"timestamp='?([0-9:.T-]+)Z?'?", line)
    if m is None:
        return None
    return datetime.fromisoformat(m.group(1)).replace(tzinfo=timezone.utc).timestamp()


def controller_events(group: FailoverGroup, event: str) -> list[str]:
    out: list[str] = []
    for n in group.quorum.nodes:
        if n.path.exists():
            out += [line for line in n.path.read_text("utf-8", "replace").splitlines() if f"event='{event}'" in line]
    return out


def lease_end(group: FailoverGroup, broker_id: int, after_wall: float) -> float | None:
    """Wall-clock end (at the latest) of the lease of master ``broker_id``, from the first
    ``controller_electing`` event about it after ``after_wall``: the last heartbeat the
    controller received from it + its lease (a lease runs from the heartbeat's sending, so it
    ended no later than this)."""
    for line in sorted(controller_events(group, "controller_electing"), key=lambda x: _log_time(x) or 0):
        at = _log_time(line)
        ago = re.search(r"last_heartbeat_ago_s=([0-9.]+)", line)
        lease = re.search(r"lease_s=([0-9.]+)", line)
        if (at is None or at < after_wall or ago is None or lease is None
                or not re.search(rf"\bmaster={broker_id}\b", line)):
            continue
        return at - float(ago.group(1)) + float(lease.group(1))
    return None


def _busy(seconds: float) -> None:  # a hog process: spins at normal priority until its deadline
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def hog(h: "Harness", seconds: float, procs: int = 4) -> dict[str, Any]:
    """Runs ``procs`` busy processes (normal priority, bounded by ``seconds``, always killed)
    while the writers keep writing; returns the controller's view before and after and what the
    logs say about elections and leases in that window."""
    import multiprocessing

    g = h.group
    master = g.wait_settled(120)
    before = g.quorum.replicas_info(g.name)
    acks_before = (len(h.native.acked) if h.native else 0, len(h.kafka.acked) if h.kafka else 0)
    elected_before = len(controller_events(g, "controller_elected_master"))
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_busy, args=(seconds,), daemon=True) for _ in range(procs)]
    t0 = time.monotonic()
    try:
        for w in workers:
            w.start()
        deadline = t0 + seconds
        while time.monotonic() < deadline and any(w.is_alive() for w in workers):
            time.sleep(0.5)  # the hog's duration (injection, not synchronisation)
    finally:
        for w in workers:
            if w.is_alive():
                w.kill()
        for w in workers:
            w.join(10)
    hogged = round(time.monotonic() - t0, 1)
    after = g.quorum.replicas_info(g.name)
    elections = controller_events(g, "controller_elected_master")[elected_before:]
    broker_events: Counter[str] = Counter()
    for b in g.brokers:
        broker_events.update(e for e in b.log_events()
                             if e in ("failover_became_master", "failover_became_slave", "failover_lease_expired"))
    def view(info: dict[str, Any] | None) -> dict[str, Any]:
        info = info or {}
        return {"masterBrokerId": info.get("masterBrokerId"), "masterEpoch": info.get("masterEpoch"),
                "inSyncReplicas": sorted(r.get("brokerId") for r in info.get("inSyncReplicas") or [])}
    return {"hog_s": hogged, "hog_procs": procs, "master": master.data_dir.name,
            "controller_before": view(before), "controller_after": view(after),
            "elections": elections, "broker_events": dict(broker_events),
            "acked_during": {"native": (len(h.native.acked) if h.native else 0) - acks_before[0],
                             "kafka": (len(h.kafka.acked) if h.kafka else 0) - acks_before[1]}}


class Harness:
    def __init__(self, work: Path, seed: int | None, log=print, netns: bool = False, fast: bool = True,
                 members: int = 3):
        self.work = Path(work)
        self.rng = random.Random(seed)
        self.log = log
        self.net = None
        if netns:
            from compat.chaos.netns import Network

            self.net = Network(members=3)
        self.members = members
        self.group = FailoverGroup(self.work, network=self.net, fast=fast, members=members)
        self.wall_offset = time.time() - time.monotonic()  # monotonic ack times -> the logs' wall clock
        self.native: NativeWriter | None = None
        self.kafka: KafkaWriter | None = None
        self.cycles: list[dict[str, Any]] = []

    def all_acks(self) -> list[float]:
        out = [a[0] for a in (self.native.acked if self.native else [])]
        out += [a[0] for a in (self.kafka.acked if self.kafka else [])]
        return out

    def resumed_after(self, t0: float, timeout: float = 60.0, after: float | None = None) -> dict[str, float | None]:
        """Per protocol: seconds from ``t0`` (the fault) to its first acknowledgement after
        ``after`` (default ``t0``; the moment the new master was known, so that answers the old
        master sent just before it died do not count as the new master's)."""
        out: dict[str, float | None] = {}
        since = t0 if after is None else after
        for label, writer in (("native", self.native), ("kafka", self.kafka)):
            def first(writer=writer) -> float | None:
                later = [a[0] for a in (writer.acked if writer else []) if a[0] > since]
                return min(later) if later else None
            try:
                out[label] = round(wait_until(first, timeout, 0.05, f"a {label} write acknowledged") - t0, 3)
            except AssertionError:
                out[label] = None
        return out

    def first_ack_after(self, t0: float, timeout: float = 60.0) -> float | None:
        def first() -> float | None:
            later = [t for t in self.all_acks() if t > t0]
            return min(later) if later else None
        try:
            return wait_until(first, timeout, 0.05, "a write acknowledged after the fault")
        except AssertionError:
            return None

    def start(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        self.group.start()
        bootstrap = ",".join(b.kafka_bootstrap for b in self.group.brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        fut = admin.create_topics([NewTopic(KAFKA_TOPIC, KAFKA_PARTITIONS, min(3, self.members),
                                            config={"min.insync.replicas": "2"})],
                                  request_timeout=15)[KAFKA_TOPIC]
        fut.result(30)
        self.native = NativeWriter(self.group.namesrv_addr)
        self.kafka = KafkaWriter(bootstrap)
        self.native.start()
        self.kafka.start()
        wait_until(lambda: self.native.acked and self.kafka.acked, 60, what="both writers acknowledged")

    def cycle(self, n: int, fault: str) -> dict[str, Any]:
        g = self.group
        self.rng.random()
        time.sleep(self.rng.uniform(0.5, 2.0))  # the random moment of the fault (injection, not synchronisation)
        master = g.wait_master()
        rec: dict[str, Any] = {"cycle": n, "fault": fault, "master": master.data_dir.name}
        t0 = time.monotonic()
        # failover time: from the fault to the first write acknowledged once the new master is
        # known (a partitioned master may still complete writes that were in flight at the fault)
        if fault == "kill":
            master.kill()
            new = g.wait_master(not_=master)
            known_at = time.monotonic()
            ack = self.first_ack_after(known_at)
            master.start()  # comes back as a slave, truncates, follows
        elif fault == "stop":
            assert master.proc is not None
            stop_wall = time.time()
            _signal_group(master.proc, signal.SIGSTOP)
            try:
                new = g.wait_master(not_=master)
                known_at = time.monotonic()
                ack = self.first_ack_after(known_at)
            finally:
                _signal_group(master.proc, signal.SIGCONT)
        elif fault == "partition":
            assert self.net is not None
            self.net.isolate(master)
            try:
                new = g.wait_master(not_=master)
                known_at = time.monotonic()
                ack = self.first_ack_after(known_at)
            finally:
                self.net.heal(master)
        elif fault == "controller":
            leader = g.quorum.wait_leader()
            rec["controller"] = leader.name
            leader.kill()
            g.quorum.wait_leader(not_=leader)
            new = None
            known_at = t0
            ack = self.first_ack_after(t0)
            leader.start()
        else:
            raise ValueError(f"unknown fault {fault!r}")
        if new is not None:
            rec["new_master"] = new.data_dir.name
        rec["first_ack_after_s"] = round(ack - t0, 3) if ack is not None else None
        rec["resumed_s"] = self.resumed_after(t0, after=known_at)
        g.wait_settled(120)
        if fault == "stop":
            rec.update(self._after_lease(master, stop_wall, known_at))
        self.log(f"cycle {n}: {fault} of {rec.get('controller') or rec['master']} -> "
                 f"{rec.get('new_master', 'same master')}, first ack after {rec['first_ack_after_s']} s")
        self.cycles.append(rec)
        return rec

    def _after_lease(self, stopped: Any, stop_wall: float, known_at: float) -> dict[str, Any]:
        """For a SIGSTOP: when the stopped master's lease ended at the latest (its last heartbeat
        the controller received + its lease, from the controller's ``controller_electing`` event),
        per protocol the seconds from then to the first acknowledgement once the new master was
        known, and the native acknowledgements the stopped master's store gave after that end."""
        end = lease_end(self.group, stopped.settings["brokerId"], stop_wall)
        if end is None:
            return {"lease_end_wall": None, "after_lease_s": {}, "zombie_acks_after_lease": None}
        out: dict[str, float | None] = {}
        for label, writer in (("native", self.native), ("kafka", self.kafka)):
            later = [a[0] for a in (writer.acked if writer else []) if a[0] > known_at]
            out[label] = round(min(later) + self.wall_offset - end, 3) if later else None
        port = int(stopped.broker_port)
        zombie = [t for t, p in (self.native.acked_by if self.native else [])
                  if p == port and t + self.wall_offset > end]
        return {"lease_end_wall": round(end, 3), "after_lease_s": out, "zombie_acks_after_lease": len(zombie)}

    def finish(self) -> dict[str, Any]:
        assert self.native is not None and self.kafka is not None
        self.native.stop_event.set()
        self.kafka.stop_event.set()
        self.native.join(60)
        self.kafka.join(90)
        master = self.group.wait_settled(120)
        wait_until(lambda: self._caught_up(master), 60, what="every slave caught up")
        for b in self.group.brokers:
            b.stop()
        problems, dupes = check(master.data_dir, [b.data_dir for b in self.group.brokers if b is not master],
                                self.native.acked, self.kafka.acked)
        times = [c["first_ack_after_s"] for c in self.cycles
                 if c["fault"] in ("kill", "stop", "partition") and c["first_ack_after_s"] is not None]
        by_fault: dict[str, dict[str, Any]] = {}
        for fault in sorted({c["fault"] for c in self.cycles}):
            ts = [c["first_ack_after_s"] for c in self.cycles if c["fault"] == fault and c["first_ack_after_s"] is not None]
            by_fault[fault] = {"runs": len(ts), "median_s": statistics.median(ts) if ts else None,
                               "min_s": min(ts) if ts else None, "max_s": max(ts) if ts else None}
        resumed: dict[str, dict[str, Any]] = {}
        for fault in sorted({c["fault"] for c in self.cycles}):
            for label in ("native", "kafka"):
                ts = [c["resumed_s"][label] for c in self.cycles
                      if c["fault"] == fault and c["resumed_s"].get(label) is not None]
                resumed.setdefault(fault, {})[label] = {
                    "runs": len(ts), "median_s": statistics.median(ts) if ts else None,
                    "min_s": min(ts) if ts else None, "max_s": max(ts) if ts else None}
        after_lease: dict[str, dict[str, Any]] = {}
        for label in ("native", "kafka"):
            ts = [c["after_lease_s"][label] for c in self.cycles
                  if c["fault"] == "stop" and c["after_lease_s"].get(label) is not None]
            after_lease[label] = {"runs": len(ts), "median_s": statistics.median(ts) if ts else None,
                                  "min_s": min(ts) if ts else None, "max_s": max(ts) if ts else None}
        return {"cycles": len(self.cycles), "faults": dict(Counter(c["fault"] for c in self.cycles)),
                "stop_resumed_after_lease": after_lease,
                "zombie_acks_after_lease": sum(c.get("zombie_acks_after_lease") or 0 for c in self.cycles),
                "first_ack_by_fault": by_fault, "resumed_by_fault": resumed,
                "native_acked": len(self.native.acked), "kafka_acked": len(self.kafka.acked),
                "native_statuses": dict(self.native.statuses), "kafka_statuses": dict(self.kafka.statuses),
                "kafka_fatal": self.kafka.fatal, "duplicates": dupes, "problems": problems,
                "failover_s": times, "failover_median_s": statistics.median(times) if times else None,
                "failover_max_s": max(times) if times else None, "cycle_log": self.cycles}

    def _caught_up(self, master: Any) -> bool:
        end = self.group.ha(master)["commitLogMaxOffset"]
        return all(self.group.ha(b)["commitLogMaxOffset"] == end for b in self.group.brokers if b.running())

    def stop(self) -> None:
        for w in (self.native, self.kafka):
            if w is not None:
                w.stop_event.set()
        self.group.stop()
        if self.net is not None:
            self.net.close()


# -- the checker -----------------------------------------------------------------------------------
def _open(data_dir: Path):
    from engine.config import BrokerConfig, MessageStoreConfig
    from engine.store import MessageStore

    store = MessageStore(MessageStoreConfig(store_path_root_dir=str(data_dir), broker_role="SLAVE"),
                         broker_config=BrokerConfig(broker_id=1, ha_listen_port=0))
    store.start()
    return store


def _scan(store, topic: str, queues: int, kafka: bool) -> dict[tuple[int, int], bytes]:
    """(queue, offset) -> record value / message body, for the whole topic (each batch decoded once)."""
    from engine.message import decode_message
    from engine.record_batch import decode_batch

    out: dict[tuple[int, int], bytes] = {}
    for q in range(queues):
        off = store.get_min_offset_in_queue(topic, q)
        hi = store.get_max_offset_in_queue(topic, q)
        while off < hi:
            got = store.get_message("check", topic, q, off, 1024)
            if not got.messages or got.next_begin_offset <= off:
                break
            for unit in got.messages:
                m = decode_message(bytes(unit))
                if kafka:
                    h, records = decode_batch(m.body)
                    for r in records:
                        out[(q, h.base_offset + r.offset_delta)] = r.value
                else:
                    out[(q, m.queue_offset)] = m.body
            off = got.next_begin_offset
    return out


def check(master_dir: Path, slave_dirs: list[Path], native_acked: list, kafka_acked: list) -> tuple[list[str], dict]:
    """(problems, duplicate counts): see the module docstring."""
    problems: list[str] = []
    for label, acked in (("native", native_acked), ("kafka", kafka_acked)):
        by_offset: dict[tuple[int, int], bytes] = {}
        last: dict[int, int] = defaultdict(lambda: -1)
        for _t, q, off, body in acked:
            prev = by_offset.setdefault((q, off), body)
            if prev != body:
                problems.append(f"{label} {q}@{off}: acknowledged for two different records")
            if off <= last[q]:
                problems.append(f"{label} {q}@{off}: acknowledged after offset {last[q]} (order)")
            last[q] = off
    dupes: dict[str, int] = {}
    for i, d in enumerate([master_dir, *slave_dirs]):
        store = _open(d)
        try:
            where = "master" if i == 0 else f"replica {Path(d).name}"
            qn = store.topic_config.get(NATIVE_TOPIC)
            native = _scan(store, NATIVE_TOPIC, qn.write_queue_nums if qn else 8, False)
            kafka = _scan(store, KAFKA_TOPIC, KAFKA_PARTITIONS, True)
            for label, acked, log in (("native", native_acked, native), ("kafka", kafka_acked, kafka)):
                for _t, q, off, body in acked:
                    got = log.get((q, off))
                    if got != body:
                        problems.append(f"{label} {q}@{off} on the {where}: {got[:24] if got else None!r}, "
                                        f"acknowledged {body[:24]!r}")
            if i == 0:
                dupes = {"native": sum(n - 1 for n in Counter(native.values()).values() if n > 1),
                         "kafka": sum(n - 1 for n in Counter(kafka.values()).values() if n > 1)}
        finally:
            store.shutdown()
    return problems, dupes


def run(work: Path, cycles: int, faults: list[str], seed: int | None = None, log=print,
        netns: bool = False, fast: bool = True) -> dict[str, Any]:
    h = Harness(work, seed, log, netns=netns, fast=fast)
    try:
        h.start()
        for n in range(cycles):
            h.cycle(n, faults[n % len(faults)])
        return h.finish()
    finally:
        h.stop()


def run_hog(work: Path, seconds: float, procs: int = 4, seed: int | None = None, log=print,
            fast: bool = True) -> dict[str, Any]:
    """No fault, only a CPU hog on every core for ``seconds`` under load on a SYNC_MASTER group of
    two: the report's ``hog`` says whether the controller elected anybody (it must not)."""
    h = Harness(work, seed, log, fast=fast, members=2)
    try:
        h.start()
        result = hog(h, seconds, procs)
        log(f"hog {result['hog_s']} s x{procs}: controller {result['controller_before']} -> "
            f"{result['controller_after']}, {len(result['elections'])} election(s)")
        report = h.finish()
        report["hog"] = result
        return report
    finally:
        h.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=50)
    ap.add_argument("--faults", default="kill,stop,controller", help=f"comma-separated, from {', '.join(FAULTS)}")
    ap.add_argument("--netns", action="store_true", help="run every broker in its own network namespace "
                    "(root; needed by the partition fault, which it adds to --faults)")
    ap.add_argument("--default-timing", action="store_true",
                    help="the documented defaults of the failover keys (heartbeat 1 s, timeout 6 s, lease 4 s, "
                         "scan 1 s) instead of the test timings (0.5 s / 3 s / 2 s / 0.3 s)")
    ap.add_argument("--hog", type=float, default=None, metavar="SECONDS",
                    help="instead of faults: CPU hog processes on every core for SECONDS under load on a group "
                         "of two; fails on any election or loss")
    ap.add_argument("--hog-procs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--json-out", default=None, help="also write the report here")
    args = ap.parse_args(argv)
    # SIGTERM tears the group (and any namespaces) down like Ctrl-C does
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    faults = [f for f in args.faults.split(",") if f]
    if args.netns and "partition" not in faults:
        faults.append("partition")
    bad = [f for f in faults if f not in FAULTS]
    if bad or ("partition" in faults and not args.netns):
        ap.error(f"unknown faults {bad}" if bad else "the partition fault needs --netns")
    if args.hog is not None:
        with tempfile.TemporaryDirectory(prefix="rockafka-failover-hog-") as tmp:
            report = run_hog(Path(args.work_dir or tmp), args.hog, args.hog_procs, args.seed,
                             fast=not args.default_timing)
        _emit(report, args)
        hg = report["hog"]
        false_failover = (hg["elections"] or hg["controller_before"]["masterBrokerId"] != hg["controller_after"]["masterBrokerId"]
                          or hg["controller_before"]["masterEpoch"] != hg["controller_after"]["masterEpoch"])
        print(f"hog {hg['hog_s']} s x{hg['hog_procs']}: {len(hg['elections'])} election(s), controller "
              f"{hg['controller_before']} -> {hg['controller_after']}, broker events {hg['broker_events']}; "
              f"{report['native_acked']} native and {report['kafka_acked']} Kafka acknowledged records checked; "
              f"{len(report['problems'])} problem(s)")
        return 1 if false_failover or report["problems"] or report["kafka_fatal"] else 0
    with tempfile.TemporaryDirectory(prefix="rockafka-failover-") as tmp:
        report = run(Path(args.work_dir or tmp), args.cycles, faults, args.seed, netns=args.netns,
                     fast=not args.default_timing)
    _emit(report, args)
    print(f"{report['cycles']} faults {report['faults']}: {report['native_acked']} native and "
          f"{report['kafka_acked']} Kafka acknowledged records checked; duplicates {report['duplicates']}; "
          f"failover median {report['failover_median_s']} s; {len(report['problems'])} problem(s)")
    return 1 if report["problems"] or report["cycles"] < args.cycles or report["kafka_fatal"] else 0


def _emit(report: dict, args: argparse.Namespace) -> None:
    """Print the run's JSON report (and write it to ``--json-out``)."""
    report["timing"] = "defaults" if args.default_timing else "test"
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
