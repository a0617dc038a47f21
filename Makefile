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

.PHONY: venv run test lint bench clean

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

run: venv
	$(PY) -m pipeline run --config $(CONFIG) $(ARGS)

test: venv
	$(PY) -m ruff check pipeline components trainer tests
	$(PY) -m pytest $(ARGS)

lint: venv
	$(PY) -m ruff check pipeline components trainer tests

clean:
	rm -rf output

# Custom training loop vs TFX penguin's model.fit, side by side (docs/trainer.md).
.PHONY: bench-trainer
bench-trainer: venv
	$(PY) bench/trainer_bench.py $(ARGS)
