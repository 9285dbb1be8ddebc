# Two entry points, both from a fresh machine with Python 3.11 and pip:
#   make run   -> installs everything and runs every ready method on the default profile
#   make test  -> installs everything plus the test tools and runs the test suite
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install install-test run test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	# The CPU wheel first: the package's torch range then installs nothing more.
	$(BIN)/pip install torch==2.13.0

install: $(BIN)/python
	$(BIN)/pip install -e '.[all]'

install-test: $(BIN)/python
	$(BIN)/pip install -e '.[all,test]'

run: install
	$(BIN)/neurips26 run

test: install-test
	$(BIN)/python -m pytest -n 2 --durations=25

lint: install-test
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
