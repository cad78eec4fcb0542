# Two entry points that work on a fresh machine: `make demo` and `make test`.
# Each installs what it needs on first use (.venv, Python packages, anvil) and is fast the second time.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ANVIL_STAMP := .tools/node_modules/.bin/anvil

.PHONY: demo test test-fast lint bench bench-pooler install anvil browser pgbouncer ha-tools clean schema

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# anvil (Foundry's local node) for chain tests and the demo; an anvil already on PATH is used as is.
$(ANVIL_STAMP):
	@if command -v anvil >/dev/null 2>&1; then mkdir -p .tools/node_modules/.bin && ln -sf "$$(command -v anvil)" $(ANVIL_STAMP); \
	else mkdir -p .tools && cd .tools && npm install --silent --no-audit --no-fund @foundry-rs/anvil@1.7.1 >/dev/null; fi

anvil: $(ANVIL_STAMP)

# Chromium for the browser test of the HTML report (tests/reserves/test_html.py, through
# Playwright): a chromium already on PATH is used as is, otherwise Debian's is installed with
# apt-get (as root, or through sudo without a password). `playwright install` is not used: its
# download is not reachable from every machine.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; \
	  else echo "make browser: chromium is not on PATH and installing it needs root" >&2; exit 1; fi; \
	  command -v apt-get >/dev/null 2>&1 || { echo "make browser: chromium is not on PATH and apt-get is missing: install Chromium (a binary named chromium on PATH)" >&2; exit 1; }; \
	  echo "make browser: installing Debian's chromium with apt-get" >&2; \
	  { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium; } >/dev/null || \
	    { echo "make browser: apt-get could not install chromium (see above); the HTML report's test needs it" >&2; exit 1; }; \
	  command -v chromium >/dev/null 2>&1 || { echo "make browser: chromium installed but not on PATH" >&2; exit 1; }; }

# PgBouncer 1.18 (Debian's) for the tests and the benchmark that run the engine behind a
# transaction pooler (devtools/pgbouncer.py): installed with apt-get like chromium above.
pgbouncer:
	@test -x /usr/sbin/pgbouncer || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; \
	  else echo "make pgbouncer: /usr/sbin/pgbouncer is missing and installing it needs root" >&2; exit 1; fi; \
	  command -v apt-get >/dev/null 2>&1 || { echo "make pgbouncer: /usr/sbin/pgbouncer is missing and apt-get is missing: install PgBouncer there" >&2; exit 1; }; \
	  echo "make pgbouncer: installing Debian's pgbouncer with apt-get" >&2; \
	  { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq pgbouncer; } >/dev/null || \
	    { echo "make pgbouncer: apt-get could not install pgbouncer (see above); the pooler tests need it" >&2; exit 1; }; \
	  test -x /usr/sbin/pgbouncer || { echo "make pgbouncer: pgbouncer installed but /usr/sbin/pgbouncer is missing" >&2; exit 1; }; }

# The high-availability tools for the cluster tests (tests/cluster/: etcd, Patroni, two PostgreSQL
# 15 servers, pgBackRest) and PgBouncer for the pooler's: Debian's packages, installed with
# apt-get (as root, or through sudo without a password) unless each command is already there.
# Debian's postgresql-15 is installed without creating its default cluster: the tests make their own.
HA_PACKAGES := etcd-server patroni pgbouncer pgbackrest postgresql-15
HA_COMMANDS := etcd patroni pgbouncer pgbackrest /usr/lib/postgresql/15/bin/postgres
ha-tools:
	@missing=; for c in $(HA_COMMANDS); do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	[ -z "$$missing" ] || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; \
	  else echo "make ha-tools:$$missing not installed and installing them needs root" >&2; exit 1; fi; \
	  command -v apt-get >/dev/null 2>&1 || { echo "make ha-tools:$$missing not installed and apt-get is missing: install $(HA_PACKAGES)" >&2; exit 1; }; \
	  echo "make ha-tools: installing Debian's $(HA_PACKAGES) with apt-get (missing:$$missing)" >&2; \
	  { $$sudo apt-get update -qq && echo "create_main_cluster = false" | $$sudo sh -c 'mkdir -p /etc/postgresql-common/createcluster.d && cat > /etc/postgresql-common/createcluster.d/50-custody-no-main.conf' && \
	    DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $(HA_PACKAGES); } >/dev/null || \
	    { echo "make ha-tools: apt-get could not install $(HA_PACKAGES) (see above); the cluster tests need them" >&2; exit 1; }; \
	  for c in $(HA_COMMANDS); do command -v $$c >/dev/null 2>&1 || { echo "make ha-tools: $$c installed but not found" >&2; exit 1; }; done; }

demo: install anvil
	$(BIN)/custody demo

# Lint first: a broken architecture contract or type error fails `make test` (and so CI) early.
# Three workers on the two cores: the suite waits on nodes, subprocesses and the network for a
# third of its time (13 min 14 s against 16 min 48 s with two workers, 2026-12-03).
test: lint anvil browser pgbouncer ha-tools
	$(BIN)/pytest -n 3 --dist loadgroup -q

test-fast: install browser pgbouncer
	$(BIN)/pytest -q -m "not slow"

# ruff, strict mypy, and the import contracts of pyproject.toml's [tool.importlinter].
lint: install
	$(BIN)/ruff check . && $(BIN)/mypy ledger config api chains deposits withdrawals outgoing \
		sweeps reconcile reserves migrations devtools tests
	$(BIN)/lint-imports

bench: install
	$(BIN)/python -m bench.ledger_bench

# Ledger posts and withdrawal reserves direct and through PgBouncer, with and without
# CUSTODY_DATABASE_POOLER=transaction (bench/RESULTS.md, "Behind PgBouncer in transaction mode").
bench-pooler: install pgbouncer
	$(BIN)/python -m bench.pooler_bench

clean:
	rm -rf $(VENV) .tools var .pytest_cache

# Rewrite migrations/schema.sql from a freshly migrated database (commit it with the change).
schema: install
	$(BIN)/python -m migrations.snapshot
