# mcpd: the two commands of the README are `make run` and `make test`; everything else is
# for developers and CI.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.9
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | cksum | cut -d' ' -f1)
# The OTLP HTTP/JSON producer of the end-to-end tests (the OpenTelemetry JS SDK's exporters):
# installed for `make test` only, so that `make install` and `make run` need Python and make.
OTLP_JS := tests/e2e/otlp_js
OTLP_JS_STAMP := $(OTLP_JS)/node_modules/.installed-$(shell cksum < $(OTLP_JS)/package-lock.json | cut -d' ' -f1)

.PHONY: install test-deps run test test-fast lint proto proto-check lock bench deploy-check ci

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	@$(BIN)/uv pip sync --quiet --python $(BIN)/python requirements.lock
	@$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	@rm -f $(VENV)/.installed-* && touch $@

# npm ci starts from an empty node_modules, so the stamp inside it goes with any old tree.
$(OTLP_JS_STAMP): $(OTLP_JS)/package-lock.json $(OTLP_JS)/package.json
	@cd $(OTLP_JS) && npm ci --silent --no-audit --no-fund
	@touch $@

install: $(STAMP)

# What the tests need beyond install: the node exporters of the end-to-end tests.
test-deps: install $(OTLP_JS_STAMP)

# Readable logs for a person at a terminal; deployments keep the JSON default.
run: install
	@MCPD_LOG_FORMAT=$${MCPD_LOG_FORMAT:-text} $(BIN)/mcpd serve

# Everything, PostgreSQL included when MCPD_TEST_POSTGRES_URL is set. Test files are spread
# over TEST_WORKERS processes (pytest-xdist; a file stays on one, for its module fixtures):
# an end-to-end test spends most of its time waiting for a daemon, so on two cores four workers
# finish sooner than two.
TEST_WORKERS ?= 4
# Bytecode caches, also where PYTHONDONTWRITEBYTECODE is set: without them every worker and
# every daemon a test starts compiles each module again, and pytest rewrites the asserts of
# every test module again (collection alone takes several times as long). Git ignores them.
PYTEST = PYTHONDONTWRITEBYTECODE= $(BIN)/pytest
test: test-deps
	@$(PYTEST) -n $(TEST_WORKERS) --dist loadfile

# The edit loop: no test that starts a process of ours (the e2e marker, which
# mcpd.testing.pytest_plugin enforces), so neither daemons nor node. Everything in tests/e2e is
# e2e, and only its schemathesis test uses the property-testing plugins: neither is loaded.
# Units wait too (PostgreSQL round trips, fsyncs): on two cores three workers finish sooner.
FAST_WORKERS ?= 3
test-fast: install
	@$(PYTEST) -m "not e2e" --ignore=tests/e2e -p no:schemathesis -p no:hypothesispytest \
		-n $(FAST_WORKERS) --dist loadfile

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy libs services gateway cli tests bench scripts docs/examples

# Regenerate the Python code for protos/ after formatting them.
proto: install
	$(BIN)/buf format -w
	$(BIN)/buf lint
	$(BIN)/python scripts/gen_protos.py

# What CI proves about the protos: lint, format, no breaking change, generated code fresh.
BUF_AGAINST ?= .git\#branch=main
proto-check: install
	$(BIN)/buf lint
	$(BIN)/buf format --diff --exit-code
	$(BIN)/buf breaking --against '$(BUF_AGAINST)'
	$(BIN)/python scripts/gen_protos.py
	git diff --exit-code -- libs/mcpd
	@test -z "$$(git status --porcelain -- libs/mcpd)" || (git status --porcelain -- libs/mcpd; echo 'generated code is stale: run make proto'; exit 1)

lock:
	$(BIN)/uv pip compile --quiet pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

bench: install
	$(BIN)/python -m bench

deploy-check: install
	$(BIN)/python -m scripts.deploy_checks
