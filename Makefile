.PHONY: setup demo serve check test test-fast test-pg lint bench

PY := .venv/bin/python
# Development settings (secret key, Fernet key, DEBUG) come from var/dev.env, written by scripts/setup.sh; the
# settings read that file only when REPLADMIN_ENV_FILE names it, which every target here (and the scripts) does.
export REPLADMIN_ENV_FILE ?= $(CURDIR)/var/dev.env

setup:
	scripts/setup.sh

## The demo: console on http://127.0.0.1:8000 + a django-q2 worker + the Spark service, on the generated Demo database.
demo: setup
	scripts/demo.sh

## The console for production (docs/deploy.md): scripts/serve.sh, gunicorn with every setting from the environment.
## var/dev.env is not read here: only an env file named by REPLADMIN_ENV_FILE in the caller's environment is.
serve:
	REPLADMIN_ENV_FILE=$(if $(filter file,$(origin REPLADMIN_ENV_FILE)),,$(REPLADMIN_ENV_FILE)) scripts/serve.sh

lint:
	$(PY) -m ruff format --check .
	$(PY) -m ruff check .
	PYTHONPATH=. .venv/bin/lint-imports
	$(PY) -m mypy
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

## The whole test suite: lint, then unit, live-database, Spark and browser tests. The Spark jobs run on a
## standalone cluster (a master and two workers on 127.0.0.1) behind the Spark service, both started by the
## suite itself (tests/spark_service.py); REPLADMIN_TEST_SPARK=service or embedded runs them without one.
## TEST_PROCESSES test processes (pytest-xdist) share that service, each with its own catalog: many tests wait
## on workers, leases and schedules, so two keep both cores busy; TEST_PROCESSES=0 runs them in this process.
TEST_PROCESSES ?= 2
PYTEST_XDIST = $(if $(filter 0,$(TEST_PROCESSES)),,-n $(TEST_PROCESSES) --dist worksteal)
test: setup lint
	REPLADMIN_TEST_SPARK=$${REPLADMIN_TEST_SPARK:-cluster} $(PY) -m pytest $(PYTEST_XDIST)

## The fast lane while editing: the pure engine's tests and the architecture rules, without setup, lint, databases or
## Spark (seconds). `make test` stays the whole truth.
## `make check`: the lint and the fast lane (under a minute), before every commit.
check: lint test-fast

test-fast:
	REPLADMIN_TEST_SPARK=embedded $(PY) -m pytest -q tests/engine tests/test_architecture.py

## The same suite on a PostgreSQL catalog (pytest-django creates and drops REPLADMIN_TEST_DB_NAME on
## REPLADMIN_DB_HOST); child processes (worker hosts, replsql) are pointed at it too.
test-pg: setup lint
	REPLADMIN_DB_ENGINE=postgresql $(PY) -m pytest $(PYTEST_XDIST)

## Benchmarks (on demand): prints ratios against native baselines and peers measured in the same run.
bench: setup
	@# The peers benchmark runs pglogical beside PostgreSQL's own logical replication (a Debian package).
	@dpkg -s postgresql-15-pglogical >/dev/null 2>&1 || apt-get install -y -q postgresql-15-pglogical >/dev/null || \
		echo "pglogical could not be installed: the peers benchmark leaves its column out"
	REPLADMIN_TEST_SPARK=$${REPLADMIN_TEST_SPARK:-cluster} $(PY) -m pytest tests/bench -p no:cacheprovider -s -m bench
