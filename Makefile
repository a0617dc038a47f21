# Every target sets up the pinned environment first; see README.md.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
CONFIG ?= configs/local.yaml
ARGS ?=

# TFX/TFT/TFMA 1.16 need Keras 2 (tf_keras); Keras 3 also has TPU problems.
export TF_USE_LEGACY_KERAS := 1
export TF_CPP_MIN_LOG_LEVEL ?= 1
export PYTHONPATH := $(CURDIR)

# A Python 3.10 that really runs: the pyenv shim named python3.10 exists but
# fails unless 3.10 is pyenv's selected version, so try it before trusting it.
PYTHON310 := $(shell \
  if python3.10 -c 'import sys' >/dev/null 2>&1; then command -v python3.10; \
  else ls -d $$HOME/.pyenv/versions/3.10.*/bin/python3.10 2>/dev/null | sort -V | tail -n 1; fi)

.PHONY: venv run test lint bench clean compile preflight submit schedule tools-venv checkov
# Row counts for the scale part of `make bench`; BENCH_SIZES= skips it.
BENCH_SIZES ?= 100000,1000000
BENCH_ARGS ?=

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.lock
	@if [ -z "$(PYTHON310)" ]; then \
	  echo "error: no working Python 3.10 found (TFX 1.16 needs Python 3.10)." >&2; \
	  echo "       install one, e.g. 'pyenv install 3.10' or 'apt-get install python3.10 python3.10-venv'." >&2; \
	  exit 1; fi
	@echo "creating $(VENV) with $(PYTHON310) from requirements.lock (first time only, ~3 GB)"
	rm -rf $(VENV)
	$(PYTHON310) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements.lock
	touch $@

# Not echoed: the run's own progress and summary are its whole output (the libraries' lines go to its log).
run: venv
	@$(PY) -m pipeline run --config $(CONFIG) $(ARGS)

# Vertex AI (docs/vertex.md) or self-hosted Kubeflow Pipelines (docs/kubeflow.md): the config's
# pipeline.target decides. compile needs no cloud access; preflight/submit/schedule use Application
# Default Credentials (Vertex) or kubeflow.host and its token (Kubeflow). The config is VERTEX_CONFIG,
# or CONFIG when given on the command line or in the environment: make submit CONFIG=configs/kubeflow.yaml.
# e.g. make schedule ACTION=create ARGS="--cron '0 3 * * 1'", make schedule ACTION=pause ID=1234
VERTEX_CONFIG ?= configs/vertex.yaml
TARGET_CONFIG = $(if $(filter command line environment,$(origin CONFIG)),$(CONFIG),$(VERTEX_CONFIG))
ACTION ?= list
ID ?=

compile: venv
	$(PY) -m pipeline compile --config $(TARGET_CONFIG) $(ARGS)

preflight: venv
	$(PY) -m pipeline preflight --config $(TARGET_CONFIG) $(ARGS)

submit: venv
	$(PY) -m pipeline submit --config $(TARGET_CONFIG) $(ARGS)

schedule: venv
	$(PY) -m pipeline schedule $(ACTION) $(ID) --config $(TARGET_CONFIG) $(ARGS)

# The spec submit would send, run on this machine as its backend runs it (docs/vertex.md, docs/kubeflow.md); offline.
.PHONY: dryrun
dryrun: venv
	$(PY) -m pipeline dryrun --config $(TARGET_CONFIG) $(ARGS)

# Dev tools whose pins conflict with TFX's (checkov) live in their own venv.
TOOLS_VENV := .venv-tools
TOOLS_PYTHON ?= python3

tools-venv: $(TOOLS_VENV)/.installed

$(TOOLS_VENV)/.installed: requirements-tools.lock
	rm -rf $(TOOLS_VENV)
	$(TOOLS_PYTHON) -m venv $(TOOLS_VENV)
	$(TOOLS_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-tools.lock
	touch $@

checkov: tools-venv
	$(TOOLS_VENV)/bin/checkov -d infra --compact --quiet --skip-download

# tools-venv: checkov, so the infra test runs its static checks instead of skipping.
# Two pytest-xdist workers; tests/conftest.py groups the tests that share runs or fixtures.
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
test: venv tools-venv lint
	$(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder) $(ARGS)

lint: venv
	$(PY) -m ruff check pipeline components trainer tests bench

# Not part of `make test`: it takes minutes (the 1M-row run up to 20) and
# measures this machine. Writes bench/results/<date>.json and .md.
bench: venv
	$(PY) -m bench.run --sizes "$(BENCH_SIZES)" $(BENCH_ARGS)

clean:
	rm -rf output

# Scheduled retraining, simulated (docs/retraining.md): six spans land one by one,
# span 4 shifted; one run per span, then the history. Starts from scratch each time.
SIM_ARGS ?= --spans 6 --drift-at 4
.PHONY: simulate
simulate: venv
	rm -rf output/simulate
	$(PY) -m pipeline simulate $(SIM_ARGS) $(ARGS)

# Custom training loop vs TFX penguin's model.fit, side by side (docs/trainer.md, Throughput).
.PHONY: bench-trainer
bench-trainer: venv
	$(PY) bench/trainer_bench.py $(ARGS)
