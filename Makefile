# Two commands do everything on a fresh clone (Python 3.11 and Java 17 are all they need):
#   make quickstart   set up, then run the quickstart pit stop end to end
#   make test         set up, then lint and run the whole test suite
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: quickstart test lint clean bi-demo cluster-test chains prepare kafka-brokers

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Spark's JVM classes recorded once per machine (pitstop prepare): each later start of Spark takes
# about a third less CPU. A no-op once made.
prepare: $(STAMP)
	$(VENV)/bin/pitstop prepare

quickstart: prepare
	bash examples/quickstart.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples bench
	$(VENV)/bin/ruff format --check src tests examples bench
	$(VENV)/bin/mypy src bench
	$(VENV)/bin/lint-imports

# The suite runs in WORKERS processes side by side (pytest-xdist), each file's tests in one of
# them: a Spark test waits on triggers and processes much of its time, so two share two cores.
WORKERS ?= 2
test: lint prepare
	bash tests/tools/install.sh
	$(VENV)/bin/pytest -q -n $(WORKERS) --dist loadfile

# A Spark standalone master and two workers on 127.0.0.1 (ports 17077-17118; PITSTOP_CLUSTER_PORT
# moves them), the pit stop and a lost worker on them; the cluster is torn down by PID.
cluster-test: prepare
	PITSTOP_CLUSTER_TEST=1 $(VENV)/bin/pytest -q -m cluster tests/test_cluster.py

# The Kafka tests (-k kafka: every test of the test_kafka* files, and the Kafka tests of the others)
# against each broker tests/kafka_helpers.py knows, one after the other: Tansu, then noida-db.
# `make test` runs each test on one of them (the marker kafka_broker; Tansu when unmarked).
KAFKA_TESTS := tests/test_kafka.py tests/test_kafka_sink.py tests/test_kafka_alignment.py \
	tests/test_replay.py tests/test_update_chains.py
kafka-brokers: prepare
	bash tests/tools/install.sh
	status=0; for kind in tansu noida; do \
		echo "== the Kafka tests on $$kind"; \
		PITSTOP_KAFKA_BROKER=$$kind $(VENV)/bin/pytest -q -k kafka $(KAFKA_TESTS) || status=1; \
	done; exit $$status

# Many generated update chains (tests/chains/), each checked against the model after every
# step; a failure is shrunk and printed as a chain to keep as a test. N chains from seed SEED.
N ?= 20
SEED ?= 1
STEPS ?= 8
JOBS ?= 2
chains: prepare
	bash tests/tools/install.sh
	PITSTOP_SLOW_CHAINS=1 $(VENV)/bin/pytest -q tests/test_update_chains.py -k "through_the_server_and_the_cli"
	$(VENV)/bin/python tests/tools/run_chains.py --n $(N) --seed $(SEED) --steps $(STEPS) --jobs $(JOBS)

bi-demo: $(STAMP)
	bash examples/bi/demo.sh

clean:
	rm -rf $(VENV) examples/work pitstop-home
