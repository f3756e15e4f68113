"""Publication images (REPL_PUB_INIT_IMAGE): a publication's tables at one level, written to files a
subscriber's REPL_INIT_COPY can load instead of copying from the publisher.

An image is UTF-8 text in one or more parts (`name`, `name.1`, `name.2` ...), each at most `bytes_per_file`
long (a part holds at least one row). A part starts with a header line (`#` and JSON: the publication, its
level, its tables' definitions with constraints and indexes); every row is a line `"<table>"<TAB><row image>`,
the row image being what the capture logs (engine.transactional_sql.load_image reads both); the last part
ends with `#{"end": true, "rows": N}`, so a missing or cut part is noticed before anything is loaded.
Rows are read after the publisher's count, as REPL_INIT_COPY does: a change made meanwhile is in the image
and replayed again by the next sync, which is harmless (replays are idempotent).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from django.conf import settings

from replication_admin.core import connections
from replication_admin.core.introspection import with_constraints
from replication_admin.engine import levels
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.compare import family_of
from replication_admin.models import ReplAccount
from replication_admin.transactional.capture import oldest_count, publisher_count
from replication_admin.transactional.lookups import TrxError, _d, describe, item_table, server_named, table_items

MAGIC = "replication_admin publication image"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$")
MIN_PART_BYTES = 1024


def image_path(name: str) -> Path:
    """The file an image name stands for, inside IMAGE_DIR (a plain name: no folders, no '..')."""
    if not _NAME.match(name or "") or ".." in name:
        raise TrxError(
            f"image name {name!r}: use letters, digits, '_', '-' and '.' only (it is a file in the image folder)"
        )
    return Path(settings.IMAGE_DIR) / name


def _part(path: Path, n: int) -> Path:
    return path if n == 0 else path.with_name(f"{path.name}.{n}")


class _Parts:
    """Writes lines into parts of at most `limit` bytes, each opening with the header."""

    def __init__(self, path: Path, limit: int, header: dict[str, Any]) -> None:
        self.path, self.limit, self.header = path, limit, header
        self.files: list[str] = []
        self.out: IO[str] | None = None
        self.size = self.rows_in_part = 0

    def _open(self) -> None:
        if self.out is not None:
            self.out.close()
        target = _part(self.path, len(self.files))
        self.files.append(target.name)
        self.out = target.open("w", encoding="utf-8", newline="\n")
        head = "#" + json.dumps({**self.header, "part": len(self.files) - 1}) + "\n"
        self.out.write(head)
        self.size, self.rows_in_part = len(head.encode()), 0

    def write(self, line: str) -> None:
        size = len(line.encode()) + 1
        if self.out is None or (self.rows_in_part and self.size + size > self.limit):
            self._open()
        assert self.out is not None
        self.out.write(line + "\n")
        self.size += size
        self.rows_in_part += 1

    def close(self, rows: int) -> None:
        if self.out is None:
            self._open()
        assert self.out is not None
        self.out.write("#" + json.dumps({"end": True, "rows": rows}) + "\n")
        self.out.close()


def write_image(account: ReplAccount, name: str, bytes_per_file: int | None = None) -> dict[str, Any]:
    """Write the publication's tables to the image `name`; returns its files, rows and level."""
    path = image_path(name)
    limit = max(int(bytes_per_file or 0), MIN_PART_BYTES) if bytes_per_file else 2**62
    pub = server_named(account.server)
    d = _d(pub)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f"{path.name}.*"):  # parts of an older image of that name
        if stale.name[len(path.name) + 1 :].isdigit():
            stale.unlink()
    count = publisher_count(pub, account.account)
    tables = [with_constraints(pub, describe(pub, item_table(i.item))) for i in table_items(account)]
    header = {
        "image": MAGIC, "version": 1, "publisher": account.server, "account": account.account, "count": count,
        "level": levels.level_of(count), "tables": [json.loads(sql.table_definition(t)) for t in tables],
    }  # fmt: skip
    parts = _Parts(path, limit, header)
    rows = 0
    with connections.connect(pub, readonly=True) as conn:
        cursor = conn.cursor()
        for table in tables:
            image = d.row_image_sql("t", [(c.name, family_of(c.logical)) for c in table.columns])
            cursor.execute(f"SELECT {image} FROM {d.qualify(table.name, table.schema)} t")
            label = json.dumps(table.name)
            while batch := cursor.fetchmany(1000):
                for (text,) in batch:
                    parts.write(f"{label}\t{text}")
                    rows += 1
    parts.close(rows)
    return {"files": parts.files, "rows": rows, "level": levels.level_of(count), "count": count}


def read_header(name: str) -> dict[str, Any]:
    path = image_path(name)
    if not path.exists():
        raise TrxError(f"no image {name!r} in {settings.IMAGE_DIR}")
    with path.open(encoding="utf-8") as first:
        line = first.readline()
    try:
        header = json.loads(line[1:]) if line.startswith("#") else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("image") != MAGIC or header.get("part") != 0:
        raise TrxError(f"{name!r} is not the first part of a publication image")
    return header


def check_image(name: str, publisher: str, account: str) -> dict[str, Any]:
    """The image's header, after checking it is whole and of this publication, and that the publisher's log
    still holds every transaction after its level (else the sync could not continue from it)."""
    header = read_header(name)
    if (header["publisher"], header["account"]) != (publisher, account):
        raise TrxError(f"image {name!r} is of {header['publisher']}/{header['account']}, not {publisher}/{account}")
    end: dict[str, Any] = {}
    counted = sum(1 for _ in rows_of(name, end))
    if counted != end["rows"]:
        raise TrxError(f"image {name!r} holds {counted} row(s) but its end says {end['rows']}")
    oldest = oldest_count(server_named(publisher), account)
    if oldest is not None and oldest > header["count"] + 1:
        raise TrxError(
            f"{publisher}/{account}'s log starts after the image's level {header['level']} (purged up to "
            f"{levels.level_of(oldest - 1)}): make a new image"
        )
    return header


def rows_of(name: str, end: dict[str, Any] | None = None) -> Iterator[tuple[str, str]]:
    """(table, row image text) of every row of the image, part after part (`end` receives the end line); a
    missing part is an error, and so is a last part without its end (cut short)."""
    path = image_path(name)
    n = 0
    while True:
        part = _part(path, n)
        if not part.exists():
            raise TrxError(f"image {name!r} is incomplete: it ends without its end line before {part.name}")
        with part.open(encoding="utf-8") as lines:
            for line in lines:
                line = line.rstrip("\n")
                if line.startswith("#"):
                    meta = json.loads(line[1:])
                    if meta.get("end"):
                        if end is not None:
                            end.update(meta)
                        return
                    continue
                table, _, image = line.partition("\t")
                yield json.loads(table), image
        n += 1


def row_image(text: str) -> dict[str, Any]:
    """One row line's image, as the capture's images are read."""
    image = sql.load_image(text)
    if not isinstance(image, dict):
        raise TrxError(f"an image line holds {type(image).__name__}, not a row")
    return image
