"""An import-linter contract of our own: features reach each other only through their public surface.

The layers contract orders the features (servers < snapshots < bidir < transactional < conflicts <
console / wizard); this one says through which modules: another feature's `actions` (do_* functions),
`selectors` (read queries for pages and jobs) and `forms` (the setup wizard embeds the server form).
Entry points (urls, tasks, management commands) may reach any module; they sit on top of the house.
"""

from __future__ import annotations

from typing import cast

import grimp
from importlinter import Contract, ContractCheck, fields, output


class PublicSurfaceContract(Contract):
    type_name = "public_surface"

    containers = fields.ListField(subfield=fields.StringField())  # e.g. replication_admin
    features = fields.ListField(subfield=fields.StringField())  # e.g. servers, snapshots, ...
    public = fields.ListField(subfield=fields.StringField())  # e.g. actions, selectors, forms

    # Read from the configuration, each field holds a list of strings.
    def _strings(self, field: object) -> list[str]:
        return cast("list[str]", field)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        features = {f"{c}.{f}" for c in self._strings(self.containers) for f in self._strings(self.features)}
        public = set(self._strings(self.public))

        def feature_of(module: str) -> str | None:
            return next((f for f in features if module == f or module.startswith(f + ".")), None)

        broken = []
        for importer in sorted(graph.modules):
            mine = feature_of(importer)
            if mine is None:
                continue
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                theirs = feature_of(imported)
                if theirs is None or theirs == mine:
                    continue
                leaf = imported[len(theirs) + 1 :].split(".")[0]
                if leaf not in public:
                    details = graph.get_import_details(importer=importer, imported=imported)
                    line = details[0]["line_number"] if details else "?"
                    broken.append(f"{importer} -> {imported} (l. {line})")
        return ContractCheck(kept=not broken, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["broken"]:
            output.print_error(f"- {line}: not one of {', '.join(self._strings(self.public))}")
            output.new_line()
