# Two entry points, both from a fresh machine with Python 3.11 and pip:
#   make run   -> installs everything and runs every ready method on the default profile
#   make test  -> installs everything plus the test tools and runs the test suite
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install install-test run test lint clean

$(BIN)/python:
	# Debian packages (optional: without them those parts skip): WordNet (poes), DejaVu fonts (sast), a virtual
	# display, AT-SPI, galculator, mousepad, gnumeric, abiword, pcmanfm, xdotool and chromium (screensearch's
	# real apps), Fashion-MNIST's idx files (spcacw's fmnist profile), OpenCV's sample data with Van Gogh's Starry
	# Night (styleroute's real profile; opencv-doc, ~96 MB download), jemalloc (solexecbench's evaluation processes:
	# steady timings; without it they fall back to glibc's malloc)
	-(command -v apt-get >/dev/null && apt-get update -qq && apt-get install -y -qq --no-install-recommends \
		wordnet-base fonts-dejavu-core fonts-dejavu-extra xvfb dbus-x11 at-spi2-core python3-pyatspi gir1.2-atspi-2.0 galculator mousepad gnumeric abiword pcmanfm xdotool chromium clang-14 dataset-fashion-mnist opencv-doc libjemalloc2 >/dev/null)
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

# One numeric environment for every test run (the README's command and CI alike): a headless matplotlib and one
# BLAS/OpenMP thread per pytest worker, so no result depends on the machine's core count.
TEST_ENV := MPLBACKEND=Agg OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

test: install-test
	# pytest's exit 5 (collected nothing) is a failure, never a pass
	$(TEST_ENV) $(BIN)/python -m pytest -n 2 --durations=25; code=$$?; \
		if [ $$code -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$code

lint: install-test
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
