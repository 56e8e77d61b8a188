# Two commands a new user needs: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)  ## run the quickstart: a deep agent with layered memory, no API key needed
	$(PY) examples/quickstart.py

# The MCP reference memory server (pinned in tests/graph/package.json) for the graph tests'
# byte-for-byte comparisons; without npm those tests skip (and fail in CI).
GRAPH_SERVER := tests/graph/node_modules/.installed-stamp

$(GRAPH_SERVER): tests/graph/package.json tests/graph/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		(cd tests/graph && npm ci --no-audit --no-fund --loglevel=error) && touch $(GRAPH_SERVER) \
		|| echo "npm ci failed: the MCP memory server tests will skip"; \
	else echo "npm not found: the MCP memory server tests will skip"; fi

test: $(STAMP) $(GRAPH_SERVER)  ## run the whole test suite
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples benchmarks conftest.py
	$(VENV)/bin/ruff format --check src tests examples benchmarks conftest.py
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

docs: $(STAMP)  ## build the docs site into site/ (`.venv/bin/mkdocs serve` to browse it)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: $(STAMP)  ## benchmarks against deepagents' built-in MemoryMiddleware (not part of the tests)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache tests/graph/node_modules site
