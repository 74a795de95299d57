# Every target sets up what it needs: a fresh clone runs `make demo` or `make test` directly.
PYTHON ?= python3
UV := $(PYTHON) -m uv
# uv itself where it is missing: the release uv.lock pins, checked against its hashes (uv-requirements.txt).
INSTALL_UV := $(PYTHON) -m pip install --quiet --require-hashes -r uv-requirements.txt
VENV := .venv
RUN := $(UV) run --frozen --extra testing
# The SageMaker Python SDK is kept out of .venv on every Python: on Python >= 3.12 it cannot share it with
# apache-airflow 3.3 (sagemaker-core pins importlib-metadata<7, airflow-core needs >=7 there). It gets its own
# venv, pinned and hashed by tests/sdk/requirements.txt (compiled from tests/sdk/requirements.in: `make sdk-lock`).
SDK_VENV := build/sdk-venv
# Extra pytest options of the non-e2e suites (make test, make compat-<minor>).
PYTEST_ARGS ?=

.PHONY: help install sdk-venv sdk-lock perf-doc test compat compat-oldest e2e-core lint demo bench bench-credentials bench-credentials-airflow bench-page bench-preflight airflow airflow-history e2e e2e-affected e2e-ha soak soak-short chaos chaos-short latency reliability-doc postgres browser redis clean

help:
	@echo "make install  - create .venv from uv.lock (installs uv with pip if missing: uv-requirements.txt, pinned and hashed)"
	@echo "make test     - install, then run every test not marked e2e (make e2e runs those)"
	@echo "make sdk-venv - the SageMaker Python SDK in build/sdk-venv (make test runs its flows against the offline SageMaker)"
	@echo "make sdk-lock - compile tests/sdk/requirements.in into tests/sdk/requirements.txt (pins and hashes)"
	@echo "make compat   - the version matrix: the whole non-e2e suite on Airflow 3.0, 3.1, 3.2 and 3.3, and the core e2e scenarios on 3.0 and 3.3"
	@echo "make compat-oldest - the matrix's oldest cell (Airflow 3.0 on Python 3.10, lowest dependency bounds): suite and core e2e"
	@echo "make compat-3.1 - the non-e2e suite in compat/airflow-3.1's locked environment (likewise 3.0, 3.2)"
	@echo "make lint     - ruff and mypy"
	@echo "make docs     - the documentation site (MkDocs, API reference from docstrings) into build/site, strict"
	@echo "make demo     - start the offline SageMaker and run the nightly DAG against it"
	@echo "make bench    - run the benchmarks behind docs/performance.md (about 100 min; not part of make test)"
	@echo "make bench-credentials - 1,000 capacity waits pending 12 emulated hours on a role with 15-minute sessions: AssumeRole and web identity, poll and event mode (about 12 min)"
	@echo "make bench-credentials-airflow - the same in a real Airflow (LocalExecutor, PostgreSQL, one airflow triggerer): 1,000 mapped capacity sensors, 12 emulated hours, poll and event mode, loop lag measured inside the triggerer (about 65 min)"
	@echo "make bench-page - time the capacity page and its API with 10,000 records in a local Airflow"
	@echo "make perf-doc - publish the last make bench, make latency and make bench-page results (docs/data/) and write docs/performance.md's tables"
	@echo "make bench-preflight - time and AWS calls the guardrails add per task, cold and warm cache"
	@echo "make airflow  - a local Airflow (UI on :8080) against the offline SageMaker, example DAGs loaded (EXECUTOR=celery: the Celery topology)"
	@echo "make airflow-history - make airflow with a login and 60 seeded runs for the capacity page (/sm-prefs/)"
	@echo "make e2e      - end-to-end tests against a running Airflow (scheduler, triggerer, API server)"
	@echo "make e2e-affected - the e2e scenarios covering the files changed since BASE (default origin/main, else the merge-base with main; uncommitted and untracked files included), by area marker (tests/e2e/affected.py); run it before a change to operators, triggers, the reconciler or the harness lands"
	@echo "make e2e-ha   - the triggerer HA scenario alone at full size: 200 tasks waiting, one of two triggerers killed"
	@echo "make soak     - a week of nights (nightly DAG + 50 mapped tasks) under faults; not in CI (SOAK_NIGHTS, SOAK_FLEET, SOAK_SEED, SOAK_BUDGET)"
	@echo "make soak-short - the soak as a test: 2 nights x 10 mapped tasks under every fault kind"
	@echo "make chaos    - the Celery topology (2 workers, 2 schedulers, 2 triggerers, Redis) under 20+ kill -9 at random instants, 50 mapped tasks; not in CI (CHAOS_FLEET, CHAOS_KILLS, CHAOS_SEED)"
	@echo "make latency  - selection -> next task running, p50/p95/max per part, poll and event mode, on the Celery topology"
	@echo "make chaos-short - the chaos run as a test: 10 tasks, one kill of each component kind (in make e2e and CI)"
	@echo "make reliability-doc - publish the last e2e run's reliability table and soak report (build/reliability) into docs/"

$(VENV)/.installed: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(INSTALL_UV)
	$(UV) sync --frozen --extra testing
	@touch $@

install: $(VENV)/.installed

$(SDK_VENV)/.installed: tests/sdk/requirements.txt
	@$(UV) --version >/dev/null 2>&1 || $(INSTALL_UV)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(SDK_VENV)
	$(UV) pip install --quiet --require-hashes --python $(SDK_VENV)/bin/python -r tests/sdk/requirements.txt
	@touch $@

sdk-venv: $(SDK_VENV)/.installed

# The SDK venv's lock: every pin of tests/sdk/requirements.in resolved, with the hashes of its files.
sdk-lock: install
	$(UV) pip compile --quiet --python-version 3.11 --generate-hashes tests/sdk/requirements.in -o tests/sdk/requirements.txt

# The suite runs in worker processes, one test file per worker at a time (its module fixtures are set up
# once) in the order they are collected (the long DAG-run files come early, not last); every worker has its
# own offline SageMaker, Airflow home and metadata database (tests/conftest.py). Most of a test's time is
# spent waiting on the emulated clock, so there are more workers than cores.
# Bytecode, pytest's rewritten test modules included, is cached in build/pycache, outside the source tree:
# no worker or subprocess compiles the same modules again, even where PYTHONDONTWRITEBYTECODE is set.
# Tests marked "realclock" run the offline SageMaker's clock in real time (credentials that expire every
# second or two): they run after the others, one at a time, so that parallel workers do not slow the
# task they time.
TEST_WORKERS ?= 4
test: install sdk-venv
	PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/build/pycache \
		$(RUN) pytest -m "not e2e and not realclock" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
	PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/build/pycache \
		$(RUN) pytest -m "realclock and not e2e"

# The version matrix. The newest minor (3.3) is the project's own .venv (uv.lock); every older one has its
# own locked environment under compat/airflow-<minor>/ (pyproject.toml, uv.lock, .python-version) with the
# provider installed from this checkout.
COMPAT_MINORS := 3.0 3.1 3.2
OLDEST_MINOR := 3.0
# The e2e scenarios every minor must pass: REST trigger -> submit -> defer -> XCom, a kill stops the job,
# a retry reattaches, the capacity page behind a login
# (marker "core"). The slowest steps are listed at the end: where a run's time went, in CI's log too.
E2E_CORE := -m "e2e and core" --durations=15 tests/e2e

compat/airflow-%/.venv/.installed: compat/airflow-%/pyproject.toml compat/airflow-%/uv.lock compat/airflow-%/.python-version pyproject.toml | install
	cd compat/airflow-$* && $(abspath $(VENV))/bin/uv sync --frozen
	@touch $@

.PRECIOUS: compat/airflow-%/.venv/.installed

compat-env-%: compat/airflow-%/.venv/.installed
	@true

# What no Airflow minor changes is left out of an older minor's run (make test runs it on the newest): the
# SageMaker SDK's flows (their own venv, no Airflow), the benchmarks and the soak/chaos accounting (they
# measure on the newest minor), and the packaging checks (the wheel and its metadata). COMPAT_IGNORE= runs all.
COMPAT_IGNORE ?= --ignore=tests/sdk --ignore=tests/benchmarks --ignore=tests/test_package.py \
	--ignore=tests/test_supply_chain.py --ignore=tests/test_chaos_accounting.py \
	--ignore=tests/test_soak_accounting.py
compat-%: compat/airflow-%/.venv/.installed
	PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/build/pycache-$* \
		compat/airflow-$*/.venv/bin/python -m pytest -m "not e2e and not realclock" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(COMPAT_IGNORE) $(PYTEST_ARGS)
	PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/build/pycache-$* \
		compat/airflow-$*/.venv/bin/python -m pytest -m "realclock and not e2e" $(PYTEST_ARGS) || [ $$? -eq 5 ]

compat-e2e-%: compat/airflow-%/.venv/.installed postgres browser
	compat/airflow-$*/.venv/bin/python -m pytest $(E2E_CORE)

e2e-core: install postgres browser
	$(RUN) pytest $(E2E_CORE)

compat-oldest: compat-$(OLDEST_MINOR) compat-e2e-$(OLDEST_MINOR)

compat: $(addprefix compat-,$(COMPAT_MINORS)) test compat-e2e-$(OLDEST_MINOR) e2e-core

# The documentation site: docs/ and the API reference from the docstrings, built into build/site. Strict:
# a broken link or anchor, a page missing from the nav or a docstring problem fails the build.
.PHONY: docs
docs: install
	$(RUN) mkdocs build --strict

postgres:
	.ci/postgres.sh

browser:
	.ci/chromium.sh

redis:
	.ci/redis.sh

# The slowest steps are listed at the end, as in e2e-core: where a run's time went.
e2e: install postgres browser redis
	$(RUN) pytest -m e2e --durations=25 tests/e2e

# CI's e2e-core runs the core scenarios only; this runs the non-core ones a change can break: the files changed
# since BASE mapped to the suite's areas (markers), each area's scenarios (tests/e2e/affected.py has the map;
# `python tests/e2e/affected.py --list` prints the selection without running it).
BASE ?=
e2e-affected: install postgres browser redis
	$(RUN) python tests/e2e/affected.py $(if $(BASE),--base $(BASE))

# make e2e runs it with fewer tasks (SM_PREFS_E2E_HA_TASKS, default in the test module) to stay quick.
e2e-ha: install postgres
	SM_PREFS_E2E_HA_TASKS=200 $(RUN) pytest -m e2e tests/e2e/test_triggerer_ha.py

# A week of nights under faults in one local deployment (harness/soak.py); writes build/reliability/soak.json
# and soak.md, exits non-zero on a duplicate job, a job left running or a task failed for another reason
# than the injected capacity shortage. SOAK_BUDGET=seconds stops starting nights after that long.
SOAK_NIGHTS ?= 7
SOAK_FLEET ?= 50
SOAK_SEED ?= 1
SOAK_BUDGET ?=
soak: install postgres
	$(RUN) python -m harness.soak --nights $(SOAK_NIGHTS) --fleet $(SOAK_FLEET) --seed $(SOAK_SEED) $(if $(SOAK_BUDGET),--budget $(SOAK_BUDGET))

# Chaos at any instant in the Celery topology (harness/chaos.py): CHAOS_FLEET mapped tasks with retries
# while CHAOS_KILLS components are killed with kill -9 at seeded random instants and restarted; writes
# build/reliability/chaos.json and chaos.md, exits non-zero unless every invariant holds. Not in CI.
CHAOS_FLEET ?= 50
CHAOS_KILLS ?= 20
CHAOS_SEED ?= 1
# CHAOS_DEPLOYMENTS=2: a second deployment (LocalExecutor, its own database) shares the offline SageMaker.
CHAOS_DEPLOYMENTS ?= 1
chaos: install postgres redis
	$(RUN) python -m harness.chaos --fleet $(CHAOS_FLEET) --kills $(CHAOS_KILLS) --seed $(CHAOS_SEED) --deployments $(CHAOS_DEPLOYMENTS)

# From SageMaker selecting an entry to the next task running, poll and event mode, on the Celery topology
# (harness/latency.py); prints the table of docs/performance.md. About 10 minutes; not in CI.
latency: install postgres redis
	$(RUN) python -m harness.latency

# The short chaos run as a test (10 tasks, one kill of each kind of component); make e2e and CI run it.
chaos-short: install postgres redis
	$(RUN) pytest -m chaos tests/e2e/test_chaos.py

soak-short: install postgres
	$(RUN) pytest -m soak tests/e2e/test_soak.py

# make e2e and make soak write to build/reliability/ only; this publishes them (docs/reliability.md, docs/soak.json).
reliability-doc: install
	$(RUN) python tests/e2e/e2e_reliability.py

# EXECUTOR=celery: the production topology (CeleryExecutor on Redis, two workers, two schedulers, two
# triggerers) instead of the LocalExecutor.
EXECUTOR ?= local
airflow: install postgres $(if $(filter celery,$(EXECUTOR)),redis)
	$(RUN) python -m harness.deployment up --port 8080 --executor $(EXECUTOR)

# The capacity page with something to show: a login, and 60 runs over the last 30 nights.
airflow-history: install postgres
	$(RUN) python -m harness.deployment up --port 8080 --scenario capacity-history --login admin --seed-history 60

lint: install
	$(RUN) ruff check airflow_provider_sm_prefs offline-sagemaker harness tests dags_examples benchmarks
	$(RUN) ruff format --check airflow_provider_sm_prefs offline-sagemaker harness tests dags_examples benchmarks
	$(RUN) mypy

demo: install
	$(RUN) python -m harness.demo

# Every figure of docs/performance.md: others' jobs in the account (ours, stock, naive, event mode with
# event details as data and as hints at N = 100/1,000/3,000, throttled, DAG parse), event mode both ways
# at 10,000 waits, and the earlier workload without others' jobs; and the retry budget under throttling
# (docs/data/retry-budget.json, under a minute). About 100 minutes on 2 cores.
bench: install
	$(RUN) python -m benchmarks.retry_budget
	$(RUN) python -m benchmarks.run
	$(RUN) python -m benchmarks.run --sizes 10000 --variants events,events-hint --no-throttled --no-parse
	$(RUN) python -m benchmarks.run --no-churn --variants ours,stock,naive --no-parse

# 1,000 concurrent capacity waits in one trigger process, pending 12 emulated hours on a connection that
# assumes a role with 15-minute sessions: AssumeRole and AssumeRoleWithWebIdentity, poll and event mode.
# Failed and undetected waits, STS sessions issued and requests refused, event-loop lag (benchmarks/credentials.py).
# About 12 minutes on 2 cores; writes benchmarks/results/credentials-<ts>.json (make perf-doc publishes it).
bench-credentials: install
	$(RUN) python -m benchmarks.credentials --waits 1000 --hours 12 --modes poll,events --auth assume-role,web-identity

# The same waits in a real Airflow deployment (harness/deployment.py: LocalExecutor, PostgreSQL, one airflow
# triggerer): 1,000 mapped SageMakerCapacitySensor tasks, half AssumeRole, half web identity, each in the
# triggerer for 12 emulated hours before capacity arrives, poll and event mode; the triggerer's event-loop
# lag measured from inside it (benchmarks/credentials_airflow.py). About 32 minutes per mode on 2 cores;
# writes benchmarks/results/credentials-airflow-<ts>.json.
bench-credentials-airflow: install postgres
	$(RUN) python -m benchmarks.credentials_airflow --waits 1000 --hours 12 --modes poll,events

# RECORDS=2000 for a quicker run; writes build/capacity-page/ only.
RECORDS ?= 10000
bench-page: install postgres browser
	$(RUN) python -m benchmarks.capacity_page --records $(RECORDS)

# Publishes the newest make bench result (BENCH_RESULTS= to choose files), make latency's and make bench-page's
# into docs/data/ without their raw samples, then writes docs/performance.md's tables from docs/data/ only.
BENCH_RESULTS ?=
perf-doc: install
	$(RUN) python -m benchmarks.publish $(BENCH_RESULTS)

bench-preflight: install
	$(RUN) python -m benchmarks.preflight

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist
