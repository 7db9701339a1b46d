# Two commands on a fresh machine with only Python: `make demo` and `make test`.
# Each builds the virtual environment it needs (once; again when pyproject.toml changes).
PYTHON ?= python3
VENV := .venv
VENV_PAI1 := .venv-pai1
PAI1_SPEC := pydantic-ai-slim>=1.0,<2

.PHONY: demo test lint typecheck docs wheel-check test-main test-pai1 clean

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip uv
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(VENV)/bin/python -e ".[dev]"
	touch $@

# Pydantic AI 1.x lives in its own environment (1.x and 2.x cannot share one); it has the rest of
# the dependencies too, so every test module imports and the pydantic_ai-marked ones run.
$(VENV_PAI1)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV_PAI1)
	$(VENV_PAI1)/bin/python -m pip install --quiet --upgrade pip uv
	$(VENV_PAI1)/bin/uv pip install --quiet --compile-bytecode --python $(VENV_PAI1)/bin/python -e ".[dev]" "$(PAI1_SPEC)"
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/python -m historykit.demo

LINT_PATHS := historykit tests benchmarks .ci docs/_hooks

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

# The documentation site (mkdocs.yml) into site/; --strict fails on a broken link, a missing page or
# a docstring mkdocstrings cannot render, a README section an include no longer finds. Not --quiet:
# it hides the warnings from --strict too. NO_MKDOCS_2_WARNING silences Material's banner.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The sdist and wheel as users get them: built, installed into new environments (runtime
# dependencies only, and with [all]), every public name imported, `historykit --help` run.
wheel-check: $(VENV)/.installed
	$(VENV)/bin/python .ci/check_wheel.py

# pytest-xdist: one worker per core (PYTEST_WORKERS=0 runs in one process). --dist loadfile keeps a
# file on one worker: its module-scoped fixtures (the README blocks, the demo runs) run once, and
# its tests in order. Each worker is a test session of its own: the PostgreSQL and MySQL databases
# are created under unique names per session, the rest in tmp_path, so workers share nothing.
# --no-loadscope-reorder hands the files out in collection order, the slow ones first
# (tests/conftest.py); xdist's own order (most tests first) started them last, a long tail on one worker.
PYTEST_WORKERS ?= auto
PYTEST_XDIST = $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)

test-main: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q $(PYTEST_XDIST)

test-pai1: $(VENV_PAI1)/.installed
	$(VENV_PAI1)/bin/python -c "import pydantic_ai, importlib.metadata as m; v = m.version('pydantic-ai-slim'); assert v.startswith('1.'), v; print('pydantic-ai-slim', v)"
	$(VENV_PAI1)/bin/python -m pytest -q -m pydantic_ai $(PYTEST_XDIST)

# The four checks are independent of each other and of the tests, and each is one process: two at a
# time (CHECK_JOBS, one per core), then the tests, which take every core on their own. A failing check
# stops the run before the tests start. --output-sync (GNU make 4; macOS has 3.81) keeps each check's
# output together.
CHECK_JOBS ?= 2
OUTPUT_SYNC := $(if $(filter output-sync,$(.FEATURES)),--output-sync=target)
test: $(VENV)/.installed
	$(MAKE) --no-print-directory -j$(CHECK_JOBS) $(OUTPUT_SYNC) typecheck docs wheel-check lint
	$(MAKE) --no-print-directory test-main test-pai1

clean:
	rm -rf $(VENV) $(VENV_PAI1) .pytest_cache .mypy_cache .ruff_cache site

# The processors against pydantic-ai-harness and LangChain: speed, then the corpus replay priced as a
# prompt cache prices it. The harness gets its own environment (benchmarks/.envs/harness) on first use.
.PHONY: bench-processors
bench-processors: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_processors.py
	$(VENV)/bin/python benchmarks/bench_replay.py --json benchmarks/results/replay.json

# The LangGraph checkpointers (SQLModelSaver against the official savers) on a long agent run; about
# half an hour. Options: make bench-checkpointers BENCH_CHECKPOINTERS_ARGS="--quick" (or --steps, --savers).
.PHONY: bench-checkpointers
bench-checkpointers: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_checkpointers.py --json benchmarks/results/checkpointers.json $(BENCH_CHECKPOINTERS_ARGS)

# `historykit analyze` on the largest corpus session, end to end in a new process (target: under 2 s).
.PHONY: bench-cli
bench-cli: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_cli.py

# Token accounting: a cold count and a second count after one more turn, at 10,000 messages.
.PHONY: bench-tokens
bench-tokens: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_tokens.py

# The user's messages and the files written or edited that the model still sees at the last call,
# replayed call by call at 32k (corpus sessions with several requests, and generated ones).
.PHONY: bench-user-words
bench-user-words: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_user_words.py

# Compaction quality x cost: the probes every strategy keeps of the corpus sessions at 32k and 100k,
# historykit's presets against the anchors that need no LLM; the table, benchmarks/results/quality.json
# and the Pareto plot benchmarks/results/quality.png (about 35 minutes on 2 cores; docs/quality.md).
.PHONY: bench-quality
bench-quality: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_quality.py --markdown --write-docs --json benchmarks/results/quality.json --plot docs/assets/quality.png

# LangGraph's own test suites from the sdists of the installed langgraph, langgraph-checkpoint-sqlite
# and -postgres (downloaded into .peer/), with SQLModelSaver beside the official savers; a table per
# suite, differences in .peer/results. Needs the PostgreSQL server. PEER_WORKERS=1 runs without xdist.
PEER_WORKERS ?= 2
.PHONY: test-peer
test-peer: $(VENV)/.installed
	$(VENV)/bin/python tests/peer/run_peer.py --workers $(PEER_WORKERS) $(PEER_ARGS)

# 100 concurrent conversations x 200 agent steps on PostgreSQL (SQLModelSaver against AsyncPostgresSaver),
# then 8 processes on one SQLite file (against SqliteSaver). BENCH_LOAD_ARGS="--quick" for a short run.
.PHONY: bench-load
bench-load: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_load.py --json benchmarks/results/load.json $(BENCH_LOAD_ARGS)

# The latency a background summary takes off the call that triggers a compaction (same views).
.PHONY: bench-background-summary
bench-background-summary: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_background_summary.py

# Cold resume: the first model call after loading a stored 1,000- and 10,000-message conversation
# in a new process, against harness TieredCompaction on the same history (target: 5x).
.PHONY: bench-resume
bench-resume: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_resume.py --json benchmarks/results/resume.json
