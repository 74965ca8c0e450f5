# One venv in the repo; every target that needs Python goes through `setup` first,
# so `make test` and `make demo` work on a fresh clone with nothing installed by hand.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# Java dependencies (Apache Kafka broker, Spark's Kafka connector): jvm/pom.xml -> jvm/lib/.
MVN ?= mvn
JVM_STAMP := jvm/lib/.resolved-stamp
JVM_POMS := jvm/pom.xml $(wildcard jvm/*/pom.xml)

.PHONY: setup test test-unit test-integration test-e2e lint demo demo-debezium chaos soak bench bench-peer peer test-real clean

# The native fast paths (native/, Rust, built by maturin through pip): common/native.py.
NATIVE_STAMP := $(VENV)/.native-stamp
NATIVE_SRC := native/Cargo.toml native/Cargo.lock native/pyproject.toml $(wildcard native/src/*.rs)

# The driver JVM's class archive for this JDK and PySpark (app/jvm_archive.py): made once,
# ~35 s; a no-op after that, and made anew when either changes.
setup: $(STAMP) $(NATIVE_STAMP) $(JVM_STAMP)
	@$(PY) -m app.jvm_archive

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(NATIVE_STAMP): $(STAMP) $(NATIVE_SRC)
	@command -v cargo >/dev/null || { echo "make setup: Rust's cargo is needed to build native/ (install it with rustup: https://rustup.rs), then run make setup again" >&2; exit 1; }
	$(PY) -m pip install -q ./native
	touch $(NATIVE_STAMP)

# Maven's own cache (~/.m2) makes a warm run a copy; the folder is rebuilt whole so a version
# change never leaves an old jar behind.
$(JVM_STAMP): $(JVM_POMS)
	rm -rf jvm/lib
	$(MVN) -q -B -f jvm/pom.xml dependency:copy-dependencies
	touch $(JVM_STAMP)

# The whole suite, then the bounded chaos schedule (every fault kind, a few minutes).
test: setup peer
	$(PY) -m pytest tests
	$(MAKE) --no-print-directory chaos

test-unit: setup
	$(PY) -m pytest tests/unit

test-integration: setup peer
	$(PY) -m pytest tests/integration

test-e2e: setup
	$(PY) -m pytest tests/e2e

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

chaos: setup
	$(PY) -m devstack.chaos --schedule named --runs 2 --parallel 2 --workdir var/chaos --json var/chaos/results.json

RUNS ?= 30
SEED ?= 1
soak: setup
	$(PY) -m devstack.chaos --schedule random --runs $(RUNS) --seed $(SEED) --faults-per-run 2 \
		--orders 40 --partitions 2 --rate 15 --max-offsets-per-trigger 200 --parallel 2 --workdir var/soak --json var/soak/results.json

# Benchmarks: numbers and ratios, never a gate (not part of `make test`).
bench: setup peer
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) -m benchmarks.run --out results/bench

# The seed's own system (Flink + flink-connector-starrocks) as a peer, docs/peer.md: the
# per-table flavour (the released connector 1.2.10) by default; PEER_FLAVOURS="per-table
# multi-table" adds the seed's multi-table transaction mode (1.2.15, not on Maven Central).
# The per-table build is stamped: `make test` runs it against the emulator and `make bench`
# side by side with ours.
PEER_DIR := benchmarks/peers/flink-starrocks
PEER_FLAVOURS ?= per-table
PEER_STAMP := $(PEER_DIR)/target/per-table/.built-stamp
PEER_SRC := $(PEER_DIR)/pom.xml $(PEER_DIR)/build.sh $(shell find $(PEER_DIR)/src -type f 2>/dev/null)
peer: $(PEER_STAMP)
ifneq ($(strip $(PEER_FLAVOURS)),per-table)
	MVN="$(MVN)" $(PEER_DIR)/build.sh $(filter-out per-table,$(PEER_FLAVOURS))
endif

$(PEER_STAMP): $(PEER_SRC)
	MVN="$(MVN)" $(PEER_DIR)/build.sh per-table
	touch $(PEER_STAMP)

# The peer and our pipeline side by side on one topic (numbers only, never a gate).
bench-peer: setup peer
	$(PY) -m benchmarks.peer --workdir var/bench-peer $(BENCH_PEER_ARGS)

demo: setup
	$(PY) -m devstack.demo $(DEMO_ARGS)

# PostgreSQL -> Debezium -> Kafka -> pipeline -> emulator, kill -9 included (docs/debezium.md).
demo-debezium: setup
	$(PY) -m devstack.demo_debezium $(DEMO_ARGS)

# Real Apache Kafka + StarRocks 4.x through testcontainers; exits non-zero without Docker.
test-real: setup
	$(PY) -m pip install -q -e '.[dev,docker]'
	CDC_REAL_STACK=1 $(PY) -m pytest tests/real

clean:
	rm -rf $(VENV) jvm/lib native/target build *.egg-info .pytest_cache .mypy_cache .ruff_cache $(PEER_DIR)/target
