# Planwatch: `make run` serves the dashboard, `make test` runs every test.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
HOST ?= 127.0.0.1
PORT ?= 8000
PG_URL ?= postgres://postgres@127.0.0.1:5432/planwatch
REDIS_TEST_URL ?= redis://127.0.0.1:6379/0
PYTEST_ARGS ?=
# Both cores: a module's tests stay on one worker (its fixtures and order), each worker on a
# database of its own (pytest-django's _gw0, _gw1); XDIST= runs in one process. The browser
# tests run in a process of their own: Playwright's sync API leaves an event loop running in
# its thread, which every asyncio test after it on that worker trips over.
XDIST ?= -n 2 --dist loadfile
# The browser tests share no module fixture: each goes to whichever worker is free (three
# workers were slower than two: 8:13 against 7:51 for the same tests).
XDIST_BROWSER ?= $(if $(XDIST),-n 2 --dist load,)
# The second pass runs, on PostgreSQL + Redis, the tests marked `pg` (a module's
# `pytestmark`; `postgres` and `redis` tests count too): those whose code takes another path
# there. That is the engine (dashboard/runs/: claims and locks, the run store's SQL fast
# paths, savers, pools, recovery), the checkpoint reads (dashboard/checkpoints.py: admin,
# debugging, forks, the interrupts API), filtering, search and sums in SQL (runs list and
# API, model calls), the channel layer (consumers, sockets, streams), the LangGraph API's
# state, store, crons, deletes and races, and the faults of a server going away. Pages
# built from the event log, request parsing, permissions and the browser tests take the
# same path on both databases and run in the first pass; a `pg` test runs only here, but
# the engine's (tests/dashboard/runs/, `both`), whose SQLite SQL and saver are its own, run
# in both. A new test of such code: mark it.
SECOND_PASS ?= -m "pg and not browser and not long"
# The first pass: the rest, and the engine's pg tests again (SQLite's SQL and saver: `both`)
FIRST_PASS ?= -m "not browser and not long and (not pg or both)"

# The fast layer: no server, no browser, no PostgreSQL or Redis (run before each commit).
FAST := -m "not server and not browser and not postgres and not redis"

.PHONY: run test test-all test-fast lint typecheck bench mutants migrate install install-dev install-js clean

$(PY):
	@python=$$(scripts/find-python) || exit 1; \
	echo "Creating $(VENV) with $$python"; \
	"$$python" -m venv $(VENV) && $(PY) -m pip install -q --upgrade pip

# PIP_FLAGS=--no-compile (CI): no bytecode compiled for every installed module up front
PIP_FLAGS ?=

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q $(PIP_FLAGS) -e .
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PY) -m pip install -q $(PIP_FLAGS) -e '.[dev]'
	@touch $(VENV)/.installed $@

# LangGraph's official JS client for the browser tests of /langgraph (npm's lock file)
JS := tests/lgserver/js
$(JS)/node_modules/.installed: $(JS)/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: apt-get install nodejs npm"; exit 1; }
	npm ci --prefix $(JS) --no-audit --no-fund --loglevel=error
	@touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev
install-js: $(JS)/node_modules/.installed

migrate: install
	$(PY) manage.py migrate --no-input -v0

## run: install, migrate, create the first operator, serve on http://$(HOST):$(PORT)
run: migrate
	$(PY) manage.py ensure_operator
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

lint: install-dev
	$(BIN)/ruff check .

## typecheck: mypy (strict on planner/ and the run engine, the default level elsewhere)
typecheck: install-dev
	$(BIN)/mypy planner dashboard config

## test-fast: lint and the tests that start no process (SQLite, in-memory layer), on both cores
test-fast: install-dev lint
	$(PY) -m pytest -q $(XDIST) $(FAST) $(PYTEST_ARGS)

## test: lint, types, then each test once where its code path differs: on SQLite + the
## in-memory layer (FIRST_PASS), the browser tests, then on PostgreSQL + Redis (SECOND_PASS);
## not the long fault and load tests (`long`: make test-all). CI runs this (15 minutes).
test: install-dev install-js lint
	@mkdir -p var; ( $(BIN)/mypy planner dashboard config > var/typecheck.log 2>&1; \
	  echo $$? > var/typecheck.rc ) & \
	$(PY) -m pytest --durations=10 $(XDIST) $(FIRST_PASS) $(PYTEST_ARGS); rc=$$?; \
	wait; echo "== typecheck (beside the first pass)"; cat var/typecheck.log; \
	[ $$rc = 0 ] && [ "$$(cat var/typecheck.rc)" = 0 ]
	$(PY) -m pytest --durations=10 $(XDIST_BROWSER) -m "browser and not long" $(PYTEST_ARGS)
	@scripts/check-services; rc=$$?; \
	if [ $$rc = 0 ]; then \
	  echo "== second pass: PostgreSQL ($(PG_URL)) and Redis ($(REDIS_TEST_URL)) =="; \
	  DATABASE_URL=$(PG_URL) REDIS_URL=$(REDIS_TEST_URL) $(PY) -m pytest --durations=10 \
	    $(XDIST) $(SECOND_PASS) $(PYTEST_ARGS); \
	elif [ $$rc = 2 ]; then exit 1; \
	else echo "PostgreSQL or Redis unreachable: skipped the second pass (install and start them)"; \
	fi

## test-all: make test, then the long tests (`long`: daphne, Redis and the database killed
## under streams, 200 streams at once, workers killed, several web processes, drains,
## Phoenix, and the browser tests outside tests.conftest.BROWSER_GATE) on SQLite and on
## PostgreSQL + Redis (about 15 minutes more)
test-all: test
	$(PY) -m pytest --durations=10 $(XDIST) -m "long and not browser" $(PYTEST_ARGS)
	$(PY) -m pytest --durations=10 $(XDIST_BROWSER) -m "long and browser" $(PYTEST_ARGS)
	DATABASE_URL=$(PG_URL) REDIS_URL=$(REDIS_TEST_URL) $(PY) -m pytest --durations=10 \
	  $(XDIST) -m "long and pg" $(PYTEST_ARGS)

bench: install-dev
	$(PY) -m benchmarks

## mutants: mutation testing (mutmut 3) of planner/ with tests/planner, then the score; slow,
## not in CI. MUTATE="planner/acquisition/policy.py" (path globs) mutates only those files
## (generating all of planner/ takes minutes); MUTANTS="planner.decomposition.tasks*" runs
## only those mutants. The score counts the MUTATE files' results kept in mutants/.
MUTATE ?=
MUTANTS ?=
mutants: install-dev
	MUTMUT_ONLY="$(MUTATE)" $(PY) scripts/mutmut-run run $(MUTANTS) || true
	MUTMUT_ONLY="$(MUTATE)" $(PY) scripts/mutmut-run export-cicd-stats
	$(PY) scripts/mutation-score mutants/mutmut-cicd-stats.json

clean:
	rm -rf $(VENV) var/test.sqlite3* .pytest_cache $(JS)/node_modules
