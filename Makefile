# `make lab` and `make test` work from a fresh clone: each first runs `make setup`,
# which builds .venv (quick no-op when it is already up to date).
# Pick the interpreter with e.g. `PYTHON=python3.12 make test`.
PYTHON ?= python3
VPY    := .venv/bin/python

# The test suite, in one place: lint, unit/kernel/browser tests, then every notebook run top to bottom.
# `make test` leaves out the tests marked slow (building a fresh Binder environment, the static site in a
# browser: minutes each) and the notebooks run again as a T4 plans; `make test-all` runs them too, and CI runs it.
# The tests run in TEST_WORKERS processes at once (pytest-xdist): one per CPU, at most 4 (each holds torch and
# Triton, about 1 GB); `make test TEST_WORKERS=0` runs them in this one. Tests go to the processes one by one
# (--dist load), notebooks whole, each one's cells in order in one process (--dist loadscope, as nbval asks).
TEST_WORKERS     ?= $(shell $(PYTHON) -c "import os; print(min(4, len(os.sched_getaffinity(0))))")
RUFF             := .venv/bin/ruff check . && .venv/bin/ruff format --check .
PYTEST_TESTS     := $(VPY) -m pytest tests -m "not slow" -n $(TEST_WORKERS) --dist load
PYTEST_ALL       := $(VPY) -m pytest tests -n $(TEST_WORKERS) --dist load
PYTEST_NOTEBOOKS := $(VPY) -m pytest --nbval-lax notebooks/ -n $(TEST_WORKERS) --dist loadscope
# every notebook again, choosing as a Colab T4 would (fp16 for bf16, pointer loads, small tiles, 16 GB sizes)
PYTEST_NOTEBOOKS_T4 := GPULAB_AS_GPU=T4 $(PYTEST_NOTEBOOKS)

# `make lab` opens JupyterLab on my-notebooks/, the learner's copy of notebooks/ (git-ignored, made on first use, never
# overwritten; tools/lab.py): localhost only with Jupyter's token, --allow-root as root, kernels over Unix sockets,
# warnings and errors only, so the last lines it prints are the URL with its token. LAB_ARGS passes JupyterLab more
# options (`make lab LAB_ARGS=--port=8890`). `make fresh LESSON=04` takes a fresh copy of one lesson into
# my-notebooks/, renaming yours to 04_....old-<date>-<time>.ipynb beside it.
LAB_ARGS ?=

.PHONY: setup lab fresh test test-all site clean gpu-check

setup:
	$(PYTHON) tools/setup_env.py

lab: setup
	$(VPY) tools/lab.py $(LAB_ARGS)

fresh:
	$(PYTHON) tools/lab.py fresh $(LESSON)

# Runs every step even if one fails; fails if any did.
test: setup
	@status=0; \
	echo "+ $(RUFF)"; $(RUFF) || status=1; \
	echo "+ $(PYTEST_TESTS)"; $(PYTEST_TESTS) || status=1; \
	echo "+ $(PYTEST_NOTEBOOKS)"; $(PYTEST_NOTEBOOKS) || status=1; \
	exit $$status

test-all: setup
	@status=0; \
	echo "+ $(RUFF)"; $(RUFF) || status=1; \
	echo "+ $(PYTEST_ALL)"; $(PYTEST_ALL) || status=1; \
	echo "+ $(PYTEST_NOTEBOOKS)"; $(PYTEST_NOTEBOOKS) || status=1; \
	echo "+ $(PYTEST_NOTEBOOKS_T4)"; $(PYTEST_NOTEBOOKS_T4) || status=1; \
	exit $$status

# Every lesson executed in Triton's interpreter, as static HTML pages with their figures, into site/ (git-ignored).
site: setup
	$(VPY) tools/build_site.py --out site

# On a GPU machine, from the project root, with gpulab's dependencies importable by $(GPU_PYTHON) (no setup, no
# .venv): `make gpu-check` runs every part in order, each only its entries not proven on the tree now (their files
# changed, they failed, never run; docs/gpu-check.md); `make gpu-check PART=notebooks` (or `make gpu-check-notebooks`)
# one part, each fits one 10-minute run. Parts: tests, notebooks, emulated, suites; also proof (tests, emulated and
# suites at once, then the notebooks alone, within --budget), status and plan (no GPU needed). ONLY=08,09 restricts
# the notebooks, emulated runs and suites to some lessons; GPU_CHECK_ARGS passes further options (--all-entries,
# --budget S, --out DIR, --jobs N, --workers N).
GPU_PYTHON ?= python3
PART       ?= all
GPU_CHECK  = $(GPU_PYTHON) tools/gpu_check.py $(1) $(if $(ONLY),--only $(ONLY)) $(GPU_CHECK_ARGS)

gpu-check:
	$(call GPU_CHECK,$(PART))

gpu-check-%:
	$(call GPU_CHECK,$*)

clean:
	rm -rf .venv build site *.egg-info .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
