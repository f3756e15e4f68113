"""Production settings from the environment pass Django's deployment checklist, and the production server
command (`make serve`: gunicorn, static files through whitenoise) serves the console."""

from __future__ import annotations

import gzip
import http.client
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from cryptography.fernet import Fernet
from django.contrib.staticfiles import finders
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith("REPLADMIN_") and k != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    environ.update(env)
    argv = [sys.executable, "manage.py", *args]
    return subprocess.run(argv, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)


PRODUCTION = {
    "REPLADMIN_DEBUG": "0",
    "REPLADMIN_VAR_DIR": "/nonexistent-var-dir",  # no dev.env: everything comes from the environment
    "REPLADMIN_SECRET_KEY": secrets.token_urlsafe(64),
    "REPLADMIN_FERNET_KEYS": Fernet.generate_key().decode(),
    "REPLADMIN_ALLOWED_HOSTS": "replication.example.com",
}


def test_check_deploy_passes_with_production_settings_from_the_environment():
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_without_keys_in_the_environment_the_console_refuses_to_start():
    env = {k: v for k, v in PRODUCTION.items() if k != "REPLADMIN_FERNET_KEYS"}
    result = run_manage("check", **env)
    assert result.returncode != 0
    assert "REPLADMIN_FERNET_KEYS is not set" in result.stderr


def test_debug_settings_fail_the_deployment_checklist():
    debug = {**PRODUCTION, "REPLADMIN_DEBUG": "1"}
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", **debug)
    assert result.returncode != 0 and "DEBUG" in result.stdout + result.stderr


# --- the production server: `make serve` (scripts/serve.sh: checks, collectstatic, gunicorn) ---------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fetch(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """GET, without following redirects: (status, headers, body)."""
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.netloc, timeout=30)
    try:
        connection.request("GET", address.path, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.fixture
def production_server(tmp_path) -> Iterator[str]:
    """`make serve` with production settings from the environment (DEBUG off, keys, allowed hosts, behind a TLS
    proxy), gunicorn's bind address and workers from the file REPLADMIN_ENV_FILE names, a fresh SQLite catalog and
    static root in tmp_path, on a free port; stopped however the test ends."""
    port = free_port()
    # gunicorn's own settings come from the environment file, as an operator writes them there.
    env_file = tmp_path / "console.env"
    env_file.write_text(f"REPLADMIN_WEB_BIND=127.0.0.1:{port}\nREPLADMIN_WEB_WORKERS=1\nREPLADMIN_WEB_THREADS=2\n")
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith("REPLADMIN_") and k != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    environ.update(PRODUCTION)
    environ.update({
        "REPLADMIN_ALLOWED_HOSTS": "127.0.0.1",
        "REPLADMIN_BEHIND_PROXY": "1",
        "REPLADMIN_DB_ENGINE": "sqlite",
        "REPLADMIN_DB_PATH": str(tmp_path / "console.sqlite3"),
        "REPLADMIN_STATIC_ROOT": str(tmp_path / "static"),
        "REPLADMIN_PYTHON": sys.executable,
        "REPLADMIN_ENV_FILE": str(env_file),
    })  # fmt: skip
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=environ,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(["make", "--no-print-directory", "serve"], cwd=ROOT, env=environ, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, f"make serve ended ({server.returncode}):\n{log.read_text()}"
            assert time.monotonic() < deadline, f"nothing listens on port {port}:\n{log.read_text()}"
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        print(log.read_text())


def test_make_serve_runs_gunicorn_serving_the_login_page_and_static_files_under_hashed_names(
    production_server, tmp_path
):
    proxied = {"X-Forwarded-Proto": "https"}  # as the TLS proxy in front of it says (REPLADMIN_BEHIND_PROXY)

    status, headers, _ = fetch(production_server + "/login/")
    assert status == 301 and headers["Location"] == production_server.replace("http:", "https:") + "/login/"

    status, headers, body = fetch(production_server + "/login/", **proxied)
    page = body.decode()
    assert status == 200 and headers["Server"] == "gunicorn"
    assert '<form method="post"' in page and 'name="username"' in page and 'name="password"' in page
    assert "Strict-Transport-Security" in headers and "debug-banner" not in page

    stylesheet = re.search(r'href="(/static/css/console\.[0-9a-f]{12}\.css)"', page)
    assert stylesheet, "the page links the stylesheet under a name carrying its hash"
    status, headers, body = fetch(production_server + stylesheet[1], **proxied)
    assert status == 200 and headers["Content-Type"].startswith("text/css")
    assert body == (ROOT / "static" / "css" / "console.css").read_bytes()
    assert headers["Cache-Control"] == "max-age=315360000, public, immutable"

    status, headers, body = fetch(production_server + stylesheet[1], **proxied, **{"Accept-Encoding": "gzip"})
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body) == (ROOT / "static" / "css" / "console.css").read_bytes()
    # The name without a hash is served too, but only briefly cached: it changes with every version.
    status, headers, _ = fetch(production_server + "/static/css/console.css", **proxied)
    assert status == 200 and "immutable" not in headers["Cache-Control"]
    assert fetch(production_server + "/static/css/nothing.css", **proxied)[0] == 404
    # gunicorn's access log goes to standard output (the journal under systemd).
    assert '"GET /login/ HTTP/1.1" 200' in (tmp_path / "serve.log").read_text()


def test_collectstatic_keeps_a_reference_to_a_file_that_is_not_shipped_instead_of_failing(tmp_path, settings):
    """A vendored script's source map or a stylesheet's font that is not among the static files stays as written;
    references to files that are there get their hashed names."""
    source = tmp_path / "source"
    (source / "vendor").mkdir(parents=True)
    (source / "vendor" / "bundle.min.js").write_text("var x = 1;\n//# sourceMappingURL=bundle.min.js.map\n")
    (source / "vendor" / "look.css").write_text(
        '@font-face { src: url("fonts/gone.woff2"); }\n.logo { background: url("logo.svg"); }\n'
    )
    (source / "vendor" / "logo.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    settings.STATICFILES_DIRS = [source]
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
    settings.STATIC_ROOT = tmp_path / "collected"
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "replication_admin.static_storage.ConsoleStaticFilesStorage"},
    }

    call_command("collectstatic", "--noinput", verbosity=0)

    manifest = json.loads((tmp_path / "collected" / "staticfiles.json").read_text())["paths"]
    css = (tmp_path / "collected" / manifest["vendor/look.css"]).read_text()
    assert 'url("fonts/gone.woff2")' in css
    assert f'url("{manifest["vendor/logo.svg"].removeprefix("vendor/")}")' in css
    script = (tmp_path / "collected" / manifest["vendor/bundle.min.js"]).read_text()
    assert script.endswith("//# sourceMappingURL=bundle.min.js.map\n")


def test_every_static_file_a_template_names_is_among_the_static_files(settings):
    """In production a page naming a static file that collectstatic did not gather fails (the manifest has no
    hashed name for it), so every name a template gives `{% static %}` must be found."""
    named = set()
    for template in Path(settings.BASE_DIR, "templates").rglob("*.html"):
        named |= set(re.findall(r"""{%\s*static\s+['"]([^'"]+)['"]\s*%}""", template.read_text(encoding="utf-8")))
    assert "css/console.css" in named
    assert [name for name in sorted(named) if finders.find(name) is None] == []


def test_the_deployment_guide_names_every_variable_the_settings_read():
    read = set(re.findall(r"\"(REPLADMIN_[A-Z_]+)\"", (ROOT / "replication_admin" / "settings.py").read_text()))
    read |= set(re.findall(r"\b(REPLADMIN_WEB_[A-Z_]+)\b", (ROOT / "scripts" / "gunicorn.conf.py").read_text()))
    guide = (ROOT / "docs" / "deploy.md").read_text()
    assert {"REPLADMIN_SECRET_KEY", "REPLADMIN_BEHIND_PROXY", "REPLADMIN_WEB_BIND"} <= read
    assert sorted(name for name in read if name not in guide) == []
