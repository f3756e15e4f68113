#!/usr/bin/env bash
# Runs the demo: the Demo database and servers, a django-q2 worker (local Spark), the in-sync
# follower of transactional subscriptions and the console on http://127.0.0.1:8000. Ctrl-C stops all.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
.venv/bin/python manage.py demo_setup
.venv/bin/python manage.py qcluster &
worker=$!
.venv/bin/python manage.py replfollow &
follower=$!
trap 'kill "$worker" "$follower" 2>/dev/null || true; wait "$worker" "$follower" 2>/dev/null || true' EXIT INT TERM
.venv/bin/python manage.py runserver 127.0.0.1:8000
