# Rillet's two entry points: `make demo` and `make test`. Both set everything up from nothing
# but Python 3.11, Go, a JDK and Maven (which the machines ship); built tools are cached under
# ~/.cache/rillet (outside the repository) and reused.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup lock demo test lint unit integration test-repeat test-stack-down stack down crds clean

# Two xdist workers: most integration tests wait on Kafka, the API server or pods, so a second
# worker uses the CPU the first leaves idle. The tests that run pods on the node form one group,
# run by one worker at a time (tests/conftest.py).
PARALLEL := -n 2 --dist loadgroup

# The dependencies as requirements/dev.txt pins them, each checked against its hash; then Rillet
# itself (without dependencies: all are pinned there).
$(STAMP): pyproject.toml requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes -r requirements/dev.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

# The lock files, after a change of pyproject.toml's dependencies: the development one, and the
# images' (their extras), constrained by it so that every pin agrees (tests/unit/test_locks.py).
UV_COMPILE := $(BIN)/uv pip compile pyproject.toml --python-version 3.11 \
	--python-platform x86_64-unknown-linux-gnu --generate-hashes --custom-compile-command "make lock" -q
lock: setup
	$(UV_COMPILE) --extra dev -o requirements/dev.txt
	$(UV_COMPILE) --extra protoc -c requirements/dev.txt -o images/operator/requirements.txt
	$(UV_COMPILE) --extra spark -c requirements/dev.txt -o images/runtime/requirements.txt

# The tests' stack has the object store (checkpoints on S3) and the schema registry (as
# tests/conftest.py starts it); the demo's needs neither (faster).
STACK_FLAGS ?=
test-repeat: STACK_FLAGS := --object-store --schema-registry

stack: setup
	$(BIN)/rillet dev up $(STACK_FLAGS)

down: setup
	$(BIN)/rillet dev down

demo: stack
	$(BIN)/rillet dev smoke
	$(BIN)/rillet dev demo

lint: setup
	$(BIN)/ruff check operator tests bench examples
	$(BIN)/ruff format --check operator tests bench examples
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: setup
	$(BIN)/pytest -m unit

integration: setup
	$(BIN)/pytest -m integration $(PARALLEL)

# The flakiness gate, run before any change to tests/ or the stack is submitted: the integration
# suite twice on one stack (started once, or the running one), each run in a new random order
# (pytest-randomly prints the seed; `--randomly-seed=N` replays an order). Each run fails on
# anything its tests left behind (the session check in tests/integration/stackfixtures.py).
test-repeat: stack
	$(BIN)/pytest -m integration $(PARALLEL)
	$(BIN)/pytest -m integration $(PARALLEL)

# That `rillet dev down` leaves nothing of a stack with two nodes on the host: a stack of its own,
# started and stopped by the test, so never inside `make test` (it would stop the shared stack
# under the other tests). It stops a running stack first.
test-stack-down: setup
	$(BIN)/rillet dev down
	$(BIN)/pytest -p no:randomly tests/integration/check_stack_down.py

test: lint
	$(BIN)/pytest $(PARALLEL)

crds: setup
	$(BIN)/rillet crds generate

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
