"""gunicorn's settings for the console (scripts/serve.sh in production, scripts/demo.sh), from the environment:

REPLADMIN_WEB_BIND     address(es) to listen on, comma-separated (127.0.0.1:8000; behind a proxy keep loopback)
REPLADMIN_WEB_WORKERS  worker processes (2)
REPLADMIN_WEB_THREADS  threads per worker (4): pages wait on the catalog and on live reads of the servers
REPLADMIN_WEB_TIMEOUT  seconds a request may take before its worker is restarted (120)

These are read from the environment file REPLADMIN_ENV_FILE names as well (real variables win), as the settings
are: a bind address written there reaches gunicorn. Any other gunicorn option can be added with GUNICORN_CMD_ARGS
(gunicorn reads it itself)."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from replication_admin.env_file import load_env_file, named_env_file

_named = named_env_file()
if _named is not None:
    load_env_file(_named)

wsgi_app = "replication_admin.wsgi:application"
bind = [address.strip() for address in os.environ.get("REPLADMIN_WEB_BIND", "127.0.0.1:8000").split(",")]
workers = int(os.environ.get("REPLADMIN_WEB_WORKERS", "2"))
threads = int(os.environ.get("REPLADMIN_WEB_THREADS", "4"))
timeout = int(os.environ.get("REPLADMIN_WEB_TIMEOUT", "120"))
# Both logs to standard output, where systemd's journal (or the demo's terminal) picks them up.
accesslog = "-"
errorlog = "-"
# gunicorn's control socket defaults to one path per user: two consoles on one host would fight over it.
control_socket_disable = True
