#!/usr/bin/env bash
# Runs the demo: the Demo database and servers, the Spark service (one Spark driver for everything, on a
# local master), a django-q2 worker, the in-sync follower of transactional subscriptions and the console on
# http://127.0.0.1:8000 (gunicorn). Ctrl-C stops all.
set -euo pipefail
cd "$(dirname "$0")/.."
# The development settings in var/dev.env are read only when this names them (see replication_admin/settings.py).
export REPLADMIN_ENV_FILE="${REPLADMIN_ENV_FILE:-$PWD/var/dev.env}"
scripts/services.sh
export REPLADMIN_SPARK_CONNECT_PORT="${REPLADMIN_SPARK_CONNECT_PORT:-15002}"
export REPLADMIN_SPARK_REMOTE="${REPLADMIN_SPARK_REMOTE:-sc://127.0.0.1:$REPLADMIN_SPARK_CONNECT_PORT}"
# Each runs in its own session so a Ctrl-C reaches only this script, which stops them once: django-q2's
# cluster hangs when a second signal arrives while it is already exiting.
pids=()
stop() {
  trap - EXIT INT TERM
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
}
trap stop EXIT INT TERM
setsid .venv/bin/python manage.py spark_service > var/spark-service.log 2>&1 &
pids+=($!)
.venv/bin/python manage.py spark_service --ping --wait 180
.venv/bin/python manage.py demo_setup
setsid .venv/bin/python manage.py qcluster &
pids+=($!)
setsid .venv/bin/python manage.py replfollow &
pids+=($!)
# The console as production serves it (gunicorn, scripts/gunicorn.conf.py); with DEBUG on (var/dev.env) its static
# files come straight from the source folders, so no collectstatic.
setsid .venv/bin/python -m gunicorn --config scripts/gunicorn.conf.py --bind 127.0.0.1:8000 &
pids+=($!)
# The login and the token last, in a box, once the console answers (the start-up lines above would bury them).
for _ in $(seq 120); do
  .venv/bin/python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/login/', timeout=2)" \
    2>/dev/null && break
  sleep 0.5
done
if [ -f var/demo-login.txt ]; then
  width=$(awk '{ if (length > w) w = length } END { print w }' var/demo-login.txt)
  rule=$(printf '%*s' "$((width + 2))" '' | tr ' ' '-')
  printf '\n+%s+\n' "$rule"
  while IFS= read -r line; do printf '| %-*s |\n' "$width" "$line"; done < var/demo-login.txt
  printf '+%s+\n\n' "$rule"
fi
wait -n || true # the first of them to end ends the demo
