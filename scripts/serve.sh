#!/usr/bin/env bash
# The console in production: gunicorn serving replication_admin (static files included, through whitenoise).
# Every setting comes from the environment (docs/deploy.md lists them); gunicorn's own from REPLADMIN_WEB_BIND,
# REPLADMIN_WEB_WORKERS, REPLADMIN_WEB_THREADS and REPLADMIN_WEB_TIMEOUT (scripts/gunicorn.conf.py).
# Before it starts: Django's deployment checklist (warnings are printed, errors stop it), a check that the
# catalog has every migration (apply them with `manage.py migrate` first: with several hosts, once, on purpose),
# and collectstatic into REPLADMIN_STATIC_ROOT.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${REPLADMIN_PYTHON:-.venv/bin/python}"
"$PYTHON" manage.py check --deploy
if ! "$PYTHON" manage.py migrate --check >/dev/null; then
  echo "the catalog lacks migrations: run manage.py migrate (manage.py showmigrations lists them)" >&2
  exit 1
fi
"$PYTHON" manage.py collectstatic --noinput --verbosity 0
exec "$PYTHON" -m gunicorn --config scripts/gunicorn.conf.py
