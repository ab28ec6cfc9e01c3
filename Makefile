# Everything starts here: `make demo` and `make test` set up a fresh Debian machine themselves.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEMO_DIR ?= .sandbox/demo
# busybox, gawk and original-awk let the tests run the broker inventory under several awks.
# chromium and chromium-driver render the run report in a headless browser in its test.
# docker-compose (Debian's, no engine needed) validates docker-compose.yml; shellcheck, lab/.
# sudo: the tests of `sudo: true` log in as an unprivileged account whose rule sudo reads.
APT_PACKAGES := zookeeper openssh-server busybox gawk original-awk chromium chromium-driver \
	docker-compose shellcheck sudo

.PHONY: help setup system venv spark-archive kafka-jars lint typecheck unit test fault-table duck-sql demo bench dist clean matrix

help:
	@echo "make setup   install system packages, .venv, Spark's class-data archive and real Kafka's jars (idempotent)"
	@echo "make demo    start the sandbox, reproduce the incident, scan, plan, fix, check"
	@echo "make test    setup, ruff, mypy (strict) and the whole test suite, side by side (TEST_WORKERS=3)"
	@echo "make bench   run the benchmarks in bench/"
	@echo "make dist    build the wheel and the source archive into dist/ (pip install 'dist/kafka_topicid_remediate-*.whl[spark]')"
	@echo "make fault-table  run the fault tests and write their table into docs/faults.md"
	@echo "make duck-sql     write the embedded engine's queries transpiled from the rules"
	@echo "make matrix  the incident and the repair on all 13 ZooKeeper-mode releases: docs/compatibility.md"

setup: system venv spark-archive kafka-jars

# zookeeper and openssh-server from Debian; a Java runtime, Maven and python3-venv only if missing.
system:
	@missing=""; \
	for pkg in $(APT_PACKAGES); do dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	command -v java >/dev/null 2>&1 || missing="$$missing default-jre-headless"; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	$(PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

venv: $(BIN)/.installed

# Spark's class-data archive: scans on Spark start in half the time. Built once per Java and
# PySpark install (half a minute to a minute); a no-op when it is there.
spark-archive: venv
	@$(BIN)/remediate prepare-spark

# Real Apache Kafka 2.8.2, 3.4.1, 3.6.2 and 3.9.2 (the releases make test runs) and Kafka 1.0.2's
# tools, from Maven Central (remediate/sandbox/real/releases.py), into lab/kafka/jars/: fetched
# once, a no-op while the cache is complete.
kafka-jars: venv
	@$(BIN)/remediate sandbox fetch-kafka

$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $@

LINT_PATHS := remediate tests stubs $(wildcard bench) lab

lint: venv
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	shellcheck lab/*.sh
	docker-compose -f docker-compose.yml config -q

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -p no:xdist -m "not slow"

# The fault table in docs/faults.md is generated from the @fault tests (make fault-table).
FAULT_TABLE := docs/faults.md

# The suite runs side by side on TEST_WORKERS workers (pytest-xdist), at most two real-Kafka
# groups at a time (tests/suite_parts.py); TEST_WORKERS=0 runs it in one process. It ends with
# each part's test time and budget (docs/development.md), then this recipe's wall times.
# --fault-table-check: the fault table must be the one the @fault tests declare.
TEST_WORKERS ?= 3
PYTEST_SIDE_BY_SIDE = $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadgroup)
test:
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory setup lint typecheck || exit $$?; \
	checked=$$(date +%s); \
	$(BIN)/pytest $(PYTEST_SIDE_BY_SIDE) --fault-table-check=$(FAULT_TABLE) --durations=20; \
	status=$$?; end=$$(date +%s); \
	echo "make test: setup, lint and types $$((checked - start)) s, the suite $$((end - checked)) s, in all $$((end - start)) s (budget: 2400 s)"; \
	exit $$status

# Writes the embedded engine's queries transpiled from the rules (remediate/scan/duck_sql.py):
# after a change of remediate/scan/rules.py or of sqlglot (tests/scan/test_duck_sql.py says so).
duck-sql: setup
	$(BIN)/python -m remediate.scan.duck

# Runs the @fault tests and, when every one passes, rewrites the fault table.
fault-table: setup
	$(BIN)/pytest -m fault --fault-table=$(FAULT_TABLE)

# The demo runs the 2.8 emulation, the incident as it happens in the field: with two log dirs
# per broker the repair needs no restart (the replicas of one id move to the other log dir of
# their broker, then take the id the cluster keeps from the LeaderAndIsr that follows).
# DEMO_KAFKA=3.4: every replica keeps the old id there, and the repair is a restore.
# DEMO_KAFKA=real-<version> (any of `remediate sandbox fetch-kafka --help`'s, e.g. real-3.9.2):
# the same on real Apache Kafka brokers, fetched first if they are not.
DEMO_KAFKA ?= 2.8
DEMO_BROKERS = $(if $(filter real-%,$(DEMO_KAFKA)),--kafka $(DEMO_KAFKA),--kafka-version $(DEMO_KAFKA))
demo: setup
	-@$(BIN)/remediate sandbox down --dir $(DEMO_DIR) >/dev/null 2>&1
	rm -rf $(DEMO_DIR)
	$(if $(filter real-%,$(DEMO_KAFKA)),$(BIN)/remediate sandbox fetch-kafka $(patsubst real-%,%,$(DEMO_KAFKA)))
	$(BIN)/remediate sandbox up --dir $(DEMO_DIR) $(DEMO_BROKERS)
	$(BIN)/remediate sandbox reproduce --dir $(DEMO_DIR)
	@$(BIN)/remediate scan -c $(DEMO_DIR)/cluster.yaml 2>/dev/null; echo "scan exit code: $$? (2 = CRITICAL)"
	@$(BIN)/remediate plan -c $(DEMO_DIR)/cluster.yaml --format markdown -o $(DEMO_DIR)/plan.json 2>/dev/null; \
	  echo "plan exit code: $$? (0 = ready, 4 = refused, 6 = needs acceptance)"
	@$(BIN)/remediate fix -c $(DEMO_DIR)/cluster.yaml --yes 2>&1 | grep -v -e WARNING -e 'log level' -e setLogLevel; \
	  echo "fix exit code: $${PIPESTATUS[0]} (0 = healed)"
	@$(BIN)/remediate check -c $(DEMO_DIR)/cluster.yaml 2>/dev/null; echo "check exit code: $$? (0 = OK)"
	@$(BIN)/remediate status -c $(DEMO_DIR)/cluster.yaml
	@if [ -z "$(KEEP)" ]; then $(BIN)/remediate sandbox down --dir $(DEMO_DIR); \
	else echo "sandbox left running: $(BIN)/remediate sandbox down --dir $(DEMO_DIR)"; fi

bench: setup
	@for script in bench/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# The wheel an operator installs (README.md, "Install"), and the source archive it is built
# from; `build` (a dev extra) builds both, each in a fresh environment.
# The wheel and the source archive, built in a small venv of their own (.build-venv: the
# `build` frontend alone), not the development environment.
BUILD_VENV = .build-venv
dist:
	test -x $(BUILD_VENV)/bin/python || $(PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/pip install -q --disable-pip-version-check -c constraints.txt build
	rm -rf dist
	$(BUILD_VENV)/bin/python -m build --outdir dist .
	@ls dist

clean:
	-@for dir in .sandbox/*/; do [ -f "$$dir/sandbox.json" ] && $(BIN)/remediate sandbox down --dir "$$dir"; done
	rm -rf .sandbox .pytest_cache .mypy_cache .ruff_cache dist build $(BUILD_VENV)

# The compatibility matrix: every ZooKeeper-mode release, one and two log dirs, on real brokers
# (lab/compatibility.py); writes docs/compatibility.md.
matrix: setup
	$(BIN)/remediate sandbox fetch-kafka --all
	rm -f .sandbox/matrix.jsonl
	$(BIN)/python lab/compatibility.py --out docs/compatibility.md --results .sandbox/matrix.jsonl
