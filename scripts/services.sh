#!/usr/bin/env bash
# Starts the local PostgreSQL, MariaDB and Redis when they are installed but not running.
set -uo pipefail
if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  if [ -d /etc/postgresql ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
  fi
fi
if [ -x /usr/sbin/mariadbd ] && ! mysqladmin -h 127.0.0.1 -uroot ping >/dev/null 2>&1; then
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd || true
  for _ in $(seq 1 30); do mysqladmin -h 127.0.0.1 -uroot ping >/dev/null 2>&1 && break; sleep 1; done
fi
if command -v redis-server >/dev/null 2>&1 && ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || true
fi
exit 0
