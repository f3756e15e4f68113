"""Every statement the parser makes has exactly one handler, in its feature's statement_handlers module;
`replication_admin.statements` names no statement (parse, look up, call); handlers stay small."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from replication_admin import statements
from replication_admin.core.statement_handlers import HANDLERS, Caller, Outcome, StatementFailed, handles
from replication_admin.engine import statements as st

ROOT = Path(__file__).resolve().parent.parent.parent
HANDLER_FILES = sorted((ROOT / "replication_admin").glob("*/statement_handlers.py"))


def statement_classes() -> list[type[st.Statement]]:
    """The statement dataclasses the parser makes: every subclass of Statement in engine/statements.py."""
    return [
        cls
        for _, cls in inspect.getmembers(st, inspect.isclass)
        if issubclass(cls, st.Statement) and cls is not st.Statement and cls.__module__ == st.__name__
    ]


def test_every_statement_of_the_parser_has_one_registered_handler():
    kinds = statement_classes()
    assert st.Publish in kinds and st.CreateSnapshotLog in kinds  # the enumeration finds them
    assert sorted(k.__name__ for k in kinds if k not in HANDLERS) == []
    assert sorted(k.__name__ for k in HANDLERS if k not in kinds) == []


def test_each_handler_is_registered_by_a_handler_module_that_statements_imports():
    handler_modules = {m.__name__ for m in statements.HANDLER_MODULES}
    assert {h.__module__ for h in HANDLERS.values()} == handler_modules
    assert {f"replication_admin.{p.parent.name}.statement_handlers" for p in HANDLER_FILES} == handler_modules | {
        "replication_admin.core.statement_handlers"
    }


def test_a_second_handler_for_a_statement_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^Publish has two handlers: publish, .*another_publish$"):

        @handles(st.Publish)
        def another_publish(statement: st.Publish, caller: Caller) -> Outcome:
            return Outcome(True, "")

    assert HANDLERS[st.Publish].__name__ == "publish"


@dataclass(frozen=True)
class Unheard(st.Statement):
    """A statement no feature carries out."""


def test_a_statement_without_a_handler_fails_in_one_line_naming_it():
    with pytest.raises(StatementFailed) as failed:
        statements.run_statement(None, Unheard(text="UNHEARD()"), None, wait=True)
    assert str(failed.value) == "Unheard cannot be run here: no handler carries it out"


def test_statements_py_names_no_statement_class():
    """Adding a statement touches the parser (engine/statements.py) and one feature's handler module, never the
    module that runs statements (docs/architecture.md, "Add a statement")."""
    tree = ast.parse((ROOT / "replication_admin" / "statements.py").read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert sorted(names & {k.__name__ for k in statement_classes()}) == []
    assert not any(isinstance(n, ast.Match) for n in ast.walk(tree))


def test_handlers_are_short_and_simple():
    too_long = []
    for path in [*HANDLER_FILES, ROOT / "replication_admin" / "statements.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > 25:
                too_long.append(f"{path.parent.name}/{path.name}: {node.name}")
    assert too_long == []
    ruff = [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "C901"]
    ruff += ["--config", "lint.mccabe.max-complexity=10", "--output-format", "concise"]
    done = subprocess.run([*ruff, *map(str, HANDLER_FILES)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
