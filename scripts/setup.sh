#!/usr/bin/env bash
# Sets up replication_admin on this machine; idempotent, safe to re-run.
#   1. Debian packages: a Java runtime, JDBC jars, unixODBC and the ODBC drivers, Chromium for browser tests,
#      iproute2 for the test on separate hosts (network namespaces)
#   2. the virtualenv in .venv with requirements.txt (reinstalled only when the file changes)
#   3. var/dev.env with a development secret key and Fernet key (outside git, mode 600)
#   4. database migrations of the console's own catalog
set -euo pipefail
cd "$(dirname "$0")/.."
# The development settings in var/dev.env are read only when this names them (see replication_admin/settings.py).
export REPLADMIN_ENV_FILE="${REPLADMIN_ENV_FILE:-$PWD/var/dev.env}"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

# --- 1. Debian packages ---------------------------------------------------------------------------------
packages=(libpostgresql-jdbc-java libmariadb-java libxerial-sqlite-jdbc-java unixodbc unixodbc-dev
          odbc-postgresql odbc-mariadb libsqliteodbc chromium)
missing=()
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
# iproute2 (`ip netns`): the test on separate hosts builds network namespaces (tests/netns.py)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
for driver in "PostgreSQL Unicode" "MariaDB Unicode" "SQLite3"; do
  if ! odbcinst -q -d | grep -qx "\[$driver\]"; then
    echo "ODBC driver [$driver] is not registered in /etc/odbcinst.ini" >&2
    exit 1
  fi
done
for jar in /usr/share/java/postgresql.jar /usr/share/java/mariadb-java-client.jar /usr/share/java/sqlite-jdbc.jar; do
  [ -f "$jar" ] || { echo "JDBC jar $jar is missing" >&2; exit 1; }
done

# --- 2. virtualenv ----------------------------------------------------------------------------------------
PYTHON=""
for candidate in python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))'; then
    PYTHON="$candidate"; break
  fi
done
[ -n "$PYTHON" ] || { echo "Python 3.11 or newer is required" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PYTHON" -m venv .venv
fi
want=$(sha256sum requirements.txt | cut -d' ' -f1)
have=$(cat .venv/.requirements.sha256 2>/dev/null || true)
if [ "$want" != "$have" ]; then
  say "installing Python requirements"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  echo "$want" > .venv/.requirements.sha256
fi

# --- 3. development keys (never committed) ------------------------------------------------------------------
mkdir -p var
if [ ! -f var/dev.env ]; then
  say "writing development keys to var/dev.env"
  umask 077
  .venv/bin/python - <<'PY'
import secrets
from cryptography.fernet import Fernet
with open("var/dev.env", "w") as out:
    out.write("# Development settings written by scripts/setup.sh; not for production.\n")
    out.write("REPLADMIN_DEBUG=1\n")
    out.write(f"REPLADMIN_SECRET_KEY={secrets.token_urlsafe(50)}\n")
    out.write(f"REPLADMIN_FERNET_KEYS={Fernet.generate_key().decode()}\n")
PY
fi

# --- 4. migrations ------------------------------------------------------------------------------------------
.venv/bin/python manage.py migrate --no-input -v 0
say "setup complete"
