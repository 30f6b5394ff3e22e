# Two commands do all set-up on a fresh machine:
#   make serve   - create .venv, install Rockafka, run `rockafka serve` with data in ./data
#   make test    - create .venv with test extras, install every test dependency, run the suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: serve test test-deps bench clean grpc compat-peer

$(BIN)/rockafka: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.test-extras: pyproject.toml $(BIN)/rockafka
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# gRPC messages for the RocketMQ 5 front, generated from the published definitions (never committed)
grpc: $(BIN)/rockafka
	$(BIN)/python -m gateway_grpc.build_proto

serve: grpc
	$(BIN)/rockafka serve --data-dir ./data

test-deps: $(VENV)/.test-extras grpc
	bash deploy/dev/install-test-deps.sh

test: test-deps
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: test-deps
	$(BIN)/pip install --quiet py-spy
	$(BIN)/python compat/bench/run_all.py

# the client scenarios against Apache RocketMQ 5.5 (NameServer, broker, gRPC proxy from Maven
# Central) in a private network namespace; not part of `make test`
compat-peer: test-deps
	$(BIN)/python -m tests.compat.peer_scenarios

clean:
	rm -rf $(VENV) build *.egg-info
