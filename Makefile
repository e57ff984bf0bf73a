# The two commands a newcomer needs:
#   make run    start a single-node broker on localhost:9092 (data in ./kbroker-data)
#   make test   install everything the tests need, then run the whole test suite
VENV ?= .venv
PYTHON ?= python3

.PHONY: run test test-long test-fast compat install regenerate clean

# Python writes and reuses its bytecode caches here: with PYTHONDONTWRITEBYTECODE set, every broker,
# driver and CLI process the tests start compiled kbroker's sources again (0.3 s of CPU each).
unexport PYTHONDONTWRITEBYTECODE

# The suite runs in parallel: workers chosen from the machine (tests/parallel.py), each test
# module whole on one worker, modules in the order of tests/durations.json (longest first).
PARALLEL ?= -n auto --dist loadfile --no-loadscope-reorder
# The unit tests of make test-fast start no broker: they are spread test by test.
FAST_PARALLEL ?= -n auto --dist load

# The whole product: the extras that need no system library (client telemetry's decoder, signed
# OAuth tokens, PKCS12 stores). Kerberos (kbroker[kerberos]) needs libkrb5-dev: see the README.
RUN_EXTRAS ?= telemetry,oauth,tls,registry
# The checkout on sys.path through a plain .pth line: setuptools' default editable finder costs
# every Python process ~30 ms of imports at start, before kbroker's own.
EDITABLE ?= --config-settings editable_mode=compat

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q $(EDITABLE) -e ".[$(RUN_EXTRAS)]"
	$(VENV)/bin/python -m compileall -q kbroker >/dev/null
	touch $@

install: $(VENV)/.installed

run: $(VENV)/.installed
	$(VENV)/bin/kbroker serve $(ARGS)

test:
	bash scripts/install-test-deps.sh
	$(VENV)/bin/python -m pytest $(PARALLEL) $(PYTEST_ARGS)

# Scenarios too long for `make test` (ignored there, see tests/conftest.py): the whole CDC
# pipeline, PostgreSQL -> Debezium -> kbroker -> the PySpark example -> kbroker
# (docs/pipeline.md), the PySpark example's restart, issue 21's exactly-once chains on three
# brokers, the fault runs (the fault matrix's short schedule on Kafka and kbroker, the exactly-once
# copier across kills), MirrorMaker 2 between Kafka 4.4.0 and kbroker, and the Faust agent.
test-long:
	bash scripts/install-test-deps.sh
	KBROKER_LONG_TESTS=1 $(VENV)/bin/python -m pytest tests/long tests/cluster/test_eos_chains.py \
		tests/test_pyspark_example.py tests/cluster/test_fault_matrix.py \
		tests/integration/test_eos_faults.py compat_tests/pipeline/test_mirror_maker_kafka.py \
		compat_tests/pipeline/test_faust.py $(PYTEST_ARGS)

# Protocol and unit tests only: no client installs beyond the Python ones.
test-fast:
	bash scripts/install-test-deps.sh --python-only
	$(VENV)/bin/python -m pytest $(FAST_PARALLEL) tests/protocol tests/log $(PYTEST_ARGS)

# The cross-client compatibility matrix alone (also part of `make test`); writes COMPATIBILITY.md.
# A subset for local iteration: make compat COMPAT_CLIENTS=confluent,java COMPAT_CODECS=none
compat:
	bash scripts/install-test-deps.sh
	$(VENV)/bin/python -m pytest $(PARALLEL) compat_tests $(PYTEST_ARGS)

# kbroker/protocol/messages/ from the schemas in Apache Kafka's jars (schemas/pin.json; the jars
# are downloaded once into ~/.cache/kbroker/schemas-<version>/ and checked against their sha256).
regenerate: $(VENV)/.installed
	$(VENV)/bin/python tools/gen_messages.py

clean:
	rm -rf $(VENV) kbroker-data
