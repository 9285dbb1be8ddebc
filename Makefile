# Two entry points, both from a fresh machine with Python 3.11 and pip:
#   make run   -> installs everything and runs every ready method on the default profile
#   make test  -> installs everything plus the test tools and runs the test suite
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install install-test run test lint clean

$(BIN)/python:
	# Debian's WordNet (poes' tier-2 scorer); optional: without it those parts skip
	-(command -v apt-get >/dev/null && apt-get update -qq && apt-get install -y -qq wordnet-base >/dev/null)
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	# The CPU wheel first: the package's torch range then installs nothing more.
	$(BIN)/pip install torch==2.13.0

# Stamps: the package is (re)installed only when pyproject.toml changed, not on every `make run`.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[all]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[all,test]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

# Writes runs/default; an interrupted `make run` resumes there (cells already saved are not recomputed).
run: install
	$(BIN)/neurips26 run

test: install-test
	$(BIN)/python -m pytest -n 2 --durations=25

lint: install-test
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
