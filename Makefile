# simfl: `make demo` sets everything up and runs the quickstart; `make test` sets up and runs the tests.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.simfl-installed
# The PyTorch build to install; override for another platform, e.g. make TORCH="torch torchvision".
TORCH ?= torch==2.14.1 torchvision==0.29.1
EXTRAS ?= dev,text,ray,hf,tb,mlflow,wandb,flower,tune
PYTEST_ARGS ?= -q -n 2
# Data folder of scenarios without data.root (tests, benchmarks): $SIMFL_DATA, else ../shared/datasets when present.
ifneq ($(wildcard ../shared/datasets),)
export SIMFL_DATA ?= $(abspath ../shared/datasets)
endif

.PHONY: setup demo test test-fast lint bench reference docs clean

setup: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/simfl run scenarios/quickstart.yaml --out runs/quickstart --force

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS) tests

# the rules' tests alone (marker `fast`): the contributors' quick loop (380 tests in 39 s on 2 cores)
test-fast: $(STAMP)
	$(PY) -m pytest -q -n 2 -m fast tests

lint: $(STAMP)
	$(VENV)/bin/ruff check --line-length 130 --target-version py311 --select E,F,W,I,UP,B simfl tests benchmarks
	$(VENV)/bin/mypy simfl

bench: $(STAMP)
	$(PY) -m benchmarks.aggregation
	$(PY) -m benchmarks.engine
	$(PY) -m benchmarks.events
	$(PY) -m benchmarks.fleet
	$(PY) -m benchmarks.population
	$(PY) -m benchmarks.runs
	$(PY) -m benchmarks.numerics
	$(PY) -m benchmarks.imports
	$(PY) -m benchmarks.train_step
	$(PY) -m benchmarks.selection
	$(PY) -m benchmarks.estimate
	$(PY) -m benchmarks.population_setup
	$(PY) -m benchmarks.flower_engine
	$(PY) -m benchmarks.checkpoints
	$(PY) -m benchmarks.local_cost

reference: $(STAMP)
	$(VENV)/bin/simfl reference > scenarios/REFERENCE.md

docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict

clean:
	rm -rf runs build site *.egg-info .pytest_cache .mypy_cache .ruff_cache
