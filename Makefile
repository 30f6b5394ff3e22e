# Two commands do all set-up on a fresh machine:
#   make serve   - create .venv, install Rockafka, run `rockafka serve` with data in ./data
#   make test    - create .venv with test extras, install every test dependency, run the suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=
# test files run in this many pytest processes (pytest-xdist; a file's tests stay in one process).
# Three on a 2-core machine: with two the cores sat 29% idle (tests waiting on timers, sessions and
# JVMs) and the suite took 33 min; with three, 28.5 min
PYTEST_WORKERS ?= 3
HTMX   := rockafka/console/static/htmx.min.js

ARGS   ?=

.PHONY: serve test test-deps bench bench-cluster bench-quick bench-tls chaos clean grpc compat-peer compat-librdkafka

$(BIN)/rockafka: pyproject.toml setup.py engine/_recordwalk.c gateway_native/remoting/_framecodec.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.test-extras: pyproject.toml $(BIN)/rockafka
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# regenerate the committed gRPC code of the RocketMQ 5 front (gateway_grpc/proto) after a change
# of the pinned client version in gateway_grpc/build_proto.py; needs the test extras (grpcio-tools)
grpc: $(VENV)/.test-extras
	$(BIN)/python -m gateway_grpc.build_proto

$(HTMX): deploy/dev/vendor-htmx.sh
	bash deploy/dev/vendor-htmx.sh

# ports and flags of `rockafka serve`: make serve ARGS="--kafka-port 19092 --grpc-port 18081"
serve: $(HTMX)
	$(BIN)/rockafka serve --data-dir ./data $(ARGS)

test-deps: $(VENV)/.test-extras $(HTMX)
	bash deploy/dev/install-test-deps.sh

test: test-deps
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# Long fault loops outside `make test` (which runs a few cycles of each), each exits non-zero
# on any loss: kill -9 of a SYNC_MASTER master under load (CHAOS_ARGS="--cycles 50 --seed 7" to
# change); kill -9 / restart cycles on a small memory-backed disk (CHAOS_CYCLES); automatic
# failover under a controller quorum, 52 faults (kill -9, SIGSTOP past the lease, controller
# leader kill, and as root a network partition in namespaces; FAILOVER_ARGS); no election under a
# CPU hog on every core for 60 s (HOG_ARGS)
CHAOS_ARGS ?= --cycles 20
CHAOS_CYCLES ?= 30
FAILOVER_ARGS ?= --cycles 52 $(if $(filter 0,$(shell id -u)),--netns,)
HOG_ARGS ?= --hog 60 --hog-procs 4
chaos: test-deps
	$(BIN)/python compat/chaos/ha_kill.py $(CHAOS_ARGS)
	CHAOS_CYCLES=$(CHAOS_CYCLES) $(BIN)/python -m pytest tests/engine/test_tmpfs_crash_restart.py $(PYTEST_ARGS)
	$(BIN)/python compat/chaos/failover.py $(FAILOVER_ARGS)
	$(BIN)/python compat/chaos/failover.py $(HOG_ARGS)

bench: test-deps
	$(BIN)/pip install --quiet py-spy
	$(BIN)/python compat/bench/run_all.py

# aggregate produce throughput with 1, 2 and 3 broker groups (Kafka and native), results in
# compat/bench/results/<date>-cluster.md
bench-cluster: test-deps
	$(BIN)/python compat/bench/cluster_bench.py

# regression benchmark for a hot-path change (< 3 min): Rockafka, Apache Kafka and Apache RocketMQ
# side by side, compared with compat/bench/results/quick-baseline.json; QUICK_ARGS=--peers none, --profile fetch
bench-quick: test-deps
	$(BIN)/pip install --quiet py-spy
	$(BIN)/python compat/bench/quick.py $(QUICK_ARGS)

# Kafka protocol over TLS next to plaintext, Rockafka and Apache Kafka side by side
bench-tls: test-deps
	$(BIN)/python compat/bench/tls_bench.py --out compat/bench/results/$$(date -u +%F)-tls

# the client scenarios against Apache RocketMQ 5.5 (NameServer, broker, gRPC proxy from Maven
# Central) in a private network namespace; not part of `make test`
compat-peer: test-deps
	$(BIN)/python -m tests.compat.peer_scenarios

# librdkafka's own tests (2.12.1, from the rdkafka-sys 4.10.0 crate, fetched and built once under
# ~/.cache/rockafka/librdkafka) against a fresh Rockafka node and Apache Kafka 4.4 side by side;
# TESTS="0041 0018" by default; not part of `make test`
compat-librdkafka: test-deps
	PYTHON=$(BIN)/python bash compat/librdkafka/run.sh

clean:
	rm -rf $(VENV) build *.egg-info
