# Every target sets up what it needs: a fresh clone runs `make demo` or `make test` directly.
PYTHON ?= python3
UV := $(PYTHON) -m uv
VENV := .venv
RUN := $(UV) run --frozen --extra testing

.PHONY: help install test lint demo bench clean

help:
	@echo "make install  - create .venv from uv.lock (installs uv with pip if missing)"
	@echo "make test     - install, then run the whole test suite"
	@echo "make lint     - ruff and mypy"
	@echo "make demo     - start the offline SageMaker and run the nightly DAG against it"
	@echo "make bench    - run the benchmarks (not part of make test)"

$(VENV)/.installed: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet "uv>=0.5"
	$(UV) sync --frozen --extra testing
	@touch $@

install: $(VENV)/.installed

test: install
	$(RUN) pytest

lint: install
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy

demo: install
	$(RUN) python -m airflow_provider_sm_prefs.testing.demo

bench: install
	$(RUN) python -m benchmarks.run

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist
