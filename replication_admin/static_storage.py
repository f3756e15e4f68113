"""Where production keeps its static files: whitenoise's storage (each file under a name carrying a hash of its
content, with compressed copies, listed in a manifest the `static` tag reads), made tolerant of one thing. A
stylesheet or script naming a file that is not shipped (a vendored bundle's `sourceMappingURL`, a font a third-party
stylesheet points at) would fail the whole collectstatic; here that one reference stays as written, so the browser
misses only that file and the console still starts."""

from __future__ import annotations

import re
from collections.abc import Callable

from whitenoise.storage import CompressedManifestStaticFilesStorage


class ConsoleStaticFilesStorage(CompressedManifestStaticFilesStorage):
    def url_converter(self, name: str, hashed_files: dict, template: str | None = None) -> Callable[[re.Match], str]:
        convert = super().url_converter(name, hashed_files, template)

        def converter(match: re.Match) -> str:
            try:
                return convert(match)
            except ValueError:  # the file it names is not among the static files
                return match["matched"]

        return converter
