# The README's two commands: `make lab` and `make test`. Both work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LAB_STAMP := $(VENV)/.lab-installed
HOST ?= 127.0.0.1
PORT ?= 8000
LINTED := $(wildcard src tests bench examples scripts)

.PHONY: help lab test unit fmt check bench verify mutants venv deps services clean dist

help:  ## what each target does
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 10

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[all,dev,bench]'
	$(BIN)/python -m compileall -q src/cronlab
	touch $(STAMP)

venv: $(STAMP)

# The page needs only the lab extra (no test or benchmark tools): a first `make lab` installs
# that, and a full install (`make deps`) already holds it.
$(LAB_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	[ $(STAMP) -nt pyproject.toml ] || $(BIN)/python -m pip install -q -e '.[lab]'
	touch $(LAB_STAMP)

deps: $(STAMP)
	bash scripts/setup.sh

lab: $(LAB_STAMP)  ## the lab page at http://127.0.0.1:8000 (installs only what it needs)
	bash scripts/setup.sh --web
	$(BIN)/cronlab lab --host $(HOST) --port $(PORT)

check: $(STAMP)  ## ruff, mypy --strict and the import contracts (pyproject.toml)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy
	$(BIN)/lint-imports

test: deps  ## every test: installs and starts what they need (Chromium, etcd, servers)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --durations=50 tests

# The inner loop: unit and contract tests on the memory store and SQLite; no root, no servers.
unit: $(STAMP)  ## the fast loop: unit and contract tests, memory and SQLite only
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 tests/unit tests/contract \
	  -m "not postgres and not redis and not etcd and not browser and not integration and not acceptance"

fmt: $(STAMP)  ## ruff format and ruff --fix
	$(BIN)/ruff format $(LINTED)
	$(BIN)/ruff check --fix $(LINTED)

# The PostgreSQL server the simulator and the mutation gate run on (a scratch database each).
PG_URL ?= postgresql://postgres@127.0.0.1:5432/test

# Nightly size: the deterministic simulator over every fault kind, on SQLite and on
# PostgreSQL (docs/engine.md, Guarantees).
verify: deps  ## the nightly simulator sizes on both stores
	$(BIN)/cronlab verify --seeds 100000 --jobs 2
	CRONLAB_VERIFY_STORE=$(PG_URL) $(BIN)/cronlab verify --seeds 20000 --jobs 2

# The mutation gate: every deliberate bug of tests/mutants/mutations.py caught, on both
# stores, within 2,000 seeds; the catching seeds recorded for CI's quick run.
mutants: deps  ## the mutation gate on both stores
	$(BIN)/python scripts/mutants.py --seeds 2000 --record
	$(BIN)/python scripts/mutants.py --seeds 2000 --record --store $(PG_URL)

bench: $(STAMP)  ## every benchmark
	for f in bench/*.py; do $(BIN)/python $$f || exit 1; done

# A wheel of the package, to install where there is no clone: pip install dist/cronlab-*.whl
dist:  ## a wheel in dist/
	$(PY) -m pip wheel -q --no-deps --wheel-dir dist .

clean:
	rm -rf $(VENV) build dist src/*.egg-info
