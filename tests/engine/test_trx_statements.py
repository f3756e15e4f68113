"""Statements of transactional replication (Virtuoso's REPL_* functions), verbatim from the reference, and
their errors."""

from __future__ import annotations

import pytest

from replication_admin.engine.statements import (
    FUNCTIONS,
    AddCr,
    ColumnConflicts,
    Disconnect,
    Function,
    Grant,
    InitCopy,
    Name,
    NewLog,
    PubAck,
    PubAdd,
    Publish,
    PubRemove,
    Purge,
    ReloadTable,
    RepairKeys,
    ReplServer,
    ReplText,
    Revoke,
    SetPubRowFilter,
    SetRowFilter,
    SkipTransaction,
    SnpServer,
    Stat,
    StatementError,
    Status,
    SubSchedule,
    Subscribe,
    Sync,
    SyncAll,
    SyncRepl,
    ThisServer,
    Unpublish,
    Unsubscribe,
    UpdateSnapshot,
    Validate,
    Wait,
    masked_text,
    parse,
    parse_one,
    placeholder_count,
)


def refused(text: str) -> str:
    with pytest.raises(StatementError) as info:
        parse(text)
    return str(info.value)


# --- the reference's examples, verbatim ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("REPL_PUBLISH ('tbl', 'tbl.log')", Publish(account="tbl", log_file="tbl.log")),
        ("repl_publish('foo', 'foo.log', 1, 'demo')", Publish(account="foo", log_file="foo.log", updateable=True, sync_user="demo")),
        ("repl_publish ('hits', 'hits.log')", Publish(account="hits", log_file="hits.log")),
        ("REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 2, 0, null)", PubAdd(account="tbl", item="DB.DBA.TEST", item_type=2, is_copy=0)),
        ("REPL_PUB_ADD ('tbl', 'DB.DBA.ab \"cd', 2, 0, null)", PubAdd(account="tbl", item='DB.DBA.ab "cd', item_type=2)),
        ("REPL_PUB_ADD ('proc', 'DB.DBA.t_proc', 3, 0, 3)", PubAdd(account="proc", item="DB.DBA.t_proc", item_type=3, options=3)),
        ("REPL_SERVER ('rep1', '1111', 'localhost:1111')", ReplServer(server="rep1", dsn="1111", repl_address="localhost:1111")),
        ("repl_server ('log1', 'localhost:2001')", ReplServer(server="log1", dsn="localhost:2001")),
        (
            "REPL_SUBSCRIBE ('rep1', 'tbl', null, null, 'dba', 'dba')",
            Subscribe(server="rep1", account="tbl", user="dba", password="dba"),
        ),
        ("repl_subscribe ('log1', 'hits')", Subscribe(server="log1", account="hits")),
        ("DB..REPL_INIT_COPY ('rep1', 'tbl')", InitCopy(server="rep1", account="tbl")),
        (
            "repl_text ('hits', 'wl_hit_repl (?, ?)', '10.0.0.1', 'bob')",
            ReplText(account="hits", sql_text="wl_hit_repl (?, ?)", args=("10.0.0.1", "bob")),
        ),
    ],
)  # fmt: skip
def test_the_references_transactional_statements_parse(text, expected):
    assert parse_one(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("REPL_WAIT ('tbl')", Wait(account="tbl")),
        ("repl_wait ('tbl', 8, 2.5)", Wait(account="tbl", level=8, timeout=2.5)),
        ("REPL_WAIT ('tbl', NULL, 10)", Wait(account="tbl", timeout=10.0)),
        ("REPL_PUB_ACK ('tbl', 'Quorum', 30)", PubAck(account="tbl", policy="quorum", timeout=30.0)),
        ("REPL_PUB_ACK ('tbl', 'none')", PubAck(account="tbl", policy="none")),
    ],
)
def test_the_acknowledged_commit_statements_parse(text, expected):
    assert parse_one(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("REPL_WAIT ('tbl', -1)", "the level must be a whole number from 0"),
        ("REPL_WAIT ('tbl', 1, 3601)", "the timeout must be NULL or a number of seconds"),
        ("REPL_WAIT ('tbl', 'x')", "the level must be a whole number"),
        ("REPL_PUB_ACK ('tbl', 'two')", "the policy must be one of 'none', 'one', 'quorum', 'all'"),
        ("REPL_PUB_ACK ('tbl')", "repl_pub_ack takes 2 to 3 argument(s) (account, policy, timeout), got 1"),
    ],
)
def test_bad_acknowledged_commit_statements_are_refused_with_the_reason(text, message):
    assert message in refused(text)


def test_the_transactional_replication_example_runs_as_one_script():
    script = (
        "REPL_PUBLISH ('tbl', 'tbl.log');\n"
        "REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 2, 0, null);\n"
        "REPL_PUB_ADD ('tbl', 'DB.DBA.ab \"cd', 2, 0, null);\n"
        "REPL_PUB_ADD ('proc', 'DB.DBA.t_proc', 3, 0, 3);\n"
        "REPL_SERVER ('rep1', '1111', 'localhost:1111');\n"
        "REPL_SUBSCRIBE ('rep1', 'tbl', null, null, 'dba', 'dba');\n"
        "DB..REPL_INIT_COPY ('rep1', 'tbl');\n"
    )
    statements = parse(script)
    assert [s.verb for s in statements] == [
        "Publish", "PubAdd", "PubAdd", "PubAdd", "ReplServer", "Subscribe", "InitCopy",
    ]  # fmt: skip
    assert statements[2].text == "REPL_PUB_ADD ('tbl', 'DB.DBA.ab \"cd', 2, 0, null)"
    assert statements[6].text == "DB..REPL_INIT_COPY ('rep1', 'tbl')"


def test_the_replication_logger_sample_runs_as_one_script():
    script = (
        "repl_server ('log1', 'localhost:2001');\n"
        "repl_publish ('hits', 'hits.log');\n"
        "repl_subscribe ('log1', 'hits');\n"
        "repl_text ('hits', 'wl_hit_repl (?, ?)', '10.0.0.1', 'bob');\n"
    )
    assert parse(script) == [
        ReplServer(server="log1", dsn="localhost:2001"),
        Publish(account="hits", log_file="hits.log"),
        Subscribe(server="log1", account="hits"),
        ReplText(account="hits", sql_text="wl_hit_repl (?, ?)", args=("10.0.0.1", "bob")),
    ]


# --- the publisher's functions ------------------------------------------------------------------------------


def test_repl_publish_takes_an_updateable_flag_and_a_sync_user():
    statement = parse_one("repl_publish('foo', 'foo.log', 1, 'demo')")
    assert isinstance(statement, Publish)
    assert (statement.account, statement.log_file, statement.updateable, statement.sync_user) == (
        "foo", "foo.log", True, "demo",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("REPL_PUBLISH ('acct')", Publish(account="acct")),
        ("REPL_PUBLISH ('acct', NULL, 0, NULL)", Publish(account="acct")),
        ("REPL_PUBLISH ('acct', 'a.log', 7)", Publish(account="acct", log_file="a.log", updateable=True)),
        ("REPL_PUBLISH ('acct', 'a.log', NULL)", Publish(account="acct", log_file="a.log")),
    ],
)
def test_any_non_zero_is_updateable_flag_means_an_updateable_publication(text, expected):
    assert parse_one(text) == expected


def test_the_item_of_repl_pub_add_is_kept_raw_not_read_as_a_quoted_name():
    statement = parse_one("REPL_PUB_ADD ('tbl', 'DB.DBA.ab \"cd', 2, 0, null)")
    assert isinstance(statement, PubAdd)
    assert statement.item == 'DB.DBA.ab "cd'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 2)", PubAdd(account="tbl", item="DB.DBA.TEST", item_type=2, is_copy=0)),
        ("REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 2, 1)", PubAdd(account="tbl", item="DB.DBA.TEST", item_type=2, is_copy=1)),
        ("REPL_PUB_ADD ('p', 'DB.DBA.t_proc', 3)", PubAdd(account="p", item="DB.DBA.t_proc", item_type=3, options=3)),
        ("REPL_PUB_ADD ('p', 'DB.DBA.t_proc', 3, 0, 1)", PubAdd(account="p", item="DB.DBA.t_proc", item_type=3, options=1)),
        ("REPL_PUB_ADD ('p', 'DB.DBA.t_proc', 3, 0, 2)", PubAdd(account="p", item="DB.DBA.t_proc", item_type=3, options=2)),
        ("REPL_PUB_ADD ('p', 'DB.DBA.t_proc', 3, null, null)", PubAdd(account="p", item="DB.DBA.t_proc", item_type=3, options=3)),
    ],
)  # fmt: skip
def test_repl_pub_add_defaults_mode_to_0_and_a_procedures_options_to_both(text, expected):
    assert parse_one(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("REPL_PUB_REMOVE ('tbl', 'DB.DBA.TEST', 2)", PubRemove(account="tbl", item="DB.DBA.TEST", item_type=2)),
        ("REPL_PUB_REMOVE ('tbl', 'DB.DBA.TEST', 2, 0)", PubRemove(account="tbl", item="DB.DBA.TEST", item_type=2)),
        ("REPL_PUB_REMOVE ('tbl', 'DB.DBA.TEST', 2, 1)", PubRemove(account="tbl", item="DB.DBA.TEST", drop=True)),
        ("REPL_PUB_REMOVE ('p', 'DB.DBA.t_proc', 3, 5)", PubRemove(account="p", item="DB.DBA.t_proc", item_type=3, drop=True)),
    ],
)  # fmt: skip
def test_repl_pub_remove_drops_the_subscribers_copies_only_when_mode_is_non_zero(text, expected):
    assert parse_one(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("REPL_UNPUBLISH ('tbl')", Unpublish(account="tbl")),
        ("REPL_GRANT ('tbl', 'demo')", Grant(account="tbl", grantee="demo")),
        ("REPL_REVOKE ('tbl', 'demo')", Revoke(account="tbl", grantee="demo")),
        ("REPL_NEW_LOG ('tbl', 'tbl2.log')", NewLog(account="tbl", log_file="tbl2.log")),
        ("REPL_PURGE ('rep1', 'tbl')", Purge(server="rep1", account="tbl")),
        (
            "REPL_ADD_CR ('DB.TEST', 'U', 'total', 10, 'add', 'qty')",
            AddCr(table=Name("TEST", "DB"), cr_type="U", suffix="total", order=10, cls="add", column="qty"),
        ),
        (
            "REPL_ADD_CR ('items', 'i', 'c', 1, 'Custom', NULL, 'CASE WHEN pub.price < new.price THEN 3 ELSE 1 END')",
            AddCr(
                table=Name("items"), cr_type="I", suffix="c", order=1, cls="custom",
                expression="CASE WHEN pub.price < new.price THEN 3 ELSE 1 END",
            ),
        ),
    ],
)  # fmt: skip
def test_the_other_publisher_functions_parse(text, expected):
    assert parse_one(text) == expected


@pytest.mark.parametrize("function", ["REPL_ADD_CR", "REPL_ADD_SNAPSHOT_CR"])
@pytest.mark.parametrize(
    ("args", "suffix", "cr_type"),
    [
        ("'total', 'U'", "total", "U"),  # Virtuoso's order: (table, name_suffix, type, ...)
        ("'U', 'total'", "total", "U"),  # the earlier order: (table, type, name_suffix, ...)
        ("'d', 'i'", "d", "I"),  # both could be a type: Virtuoso's order decides
        ("'u', 'D'", "u", "D"),
    ],
)
def test_a_resolver_takes_virtuosos_argument_order_and_the_earlier_one(function, args, suffix, cr_type):
    parsed = parse_one(f"{function} ('items', {args}, 10, 'max', 'price')")
    assert (parsed.suffix, parsed.cr_type, parsed.order, parsed.cls, parsed.column) == (
        suffix, cr_type, 10, "max", "price"
    )  # fmt: skip


@pytest.mark.parametrize("function", ["REPL_ADD_CR", "REPL_ADD_SNAPSHOT_CR"])
def test_a_resolver_with_no_conflict_type_in_either_place_is_refused_in_one_line(function):
    with pytest.raises(StatementError, match="the conflict type must be 'I', 'U' or 'D'"):
        parse_one(f"{function} ('items', 'total', 'sum', 10, 'max', 'price')")


# --- repl_text: any number of arguments ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("repl_text ('hits', 'wl_reset ()')", ()),
        ("repl_text ('hits', 'f (?)', NULL)", (None,)),
        ("repl_text ('hits', 'f (?, ?, ?)', 1, -2.5, 'it''s')", (1, -2.5, "it's")),
        ("repl_text ('hits', 'f (''?'', \"a?b\", ?) -- why?\n /* ? */', 3)", (3,)),
    ],
)
def test_repl_text_passes_on_any_number_of_arguments_as_a_tuple(text, args):
    statement = parse_one(text)
    assert isinstance(statement, ReplText)
    assert statement.args == args


def test_repl_text_takes_up_to_a_hundred_arguments_after_the_sql_text():
    markers = ", ".join(["?"] * 100)
    statement = parse_one(f"repl_text ('hits', 'f ({markers})', {', '.join(map(str, range(100)))})")
    assert isinstance(statement, ReplText) and statement.args == tuple(range(100))
    too_many = f"repl_text ('hits', 'f ({markers}, ?)', {', '.join(map(str, range(101)))})"
    assert "repl_text takes at most 100 argument(s) after account, sql_text, got 101" in refused(too_many)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("repl_text ('hits')", "repl_text takes at least 2 argument(s) (account, sql_text, ...), got 1"),
        ("repl_text ()", "repl_text takes at least 2 argument(s) (account, sql_text, ...), got 0"),
        ("repl_text ('hits', '')", "repl_text: sql_text must be a non-empty string"),
        ("repl_text ('hits', 'f (?, ?)', 'x')", "sql_text has 2 '?' placeholder(s) but 1 argument(s) follow it"),
        ("repl_text ('hits', 'f ()', 'x')", "sql_text has 0 '?' placeholder(s) but 1 argument(s) follow it"),
        ("repl_text ('hits', 'f (''?'')', 'x')", "sql_text has 0 '?' placeholder(s) but 1 argument(s) follow it"),
        ("repl_text ('hits', 'f (''x)')", "sql_text has a '-quoted part that is not closed"),
        ("repl_text ('hits', 'f (?)', REPL_SERVER_NAME ('x'))", "argument 3 must be a string, a number or NULL"),
        ("repl_text ('', 'f ()')", "repl_text: account must be a non-empty string"),
    ],
)
def test_malformed_repl_text_calls_are_refused_with_the_reason(text, message):
    assert message in refused(text)


@pytest.mark.parametrize(
    ("sql", "count"),
    [
        ("", 0),
        ("f (?, ?)", 2),
        ("f ('?', ?)", 1),
        ("f ('it''s ?', ?)", 1),
        ('select "a?" from t where x = ?', 1),
        ("f (?) -- and ?\n, ?", 2),
        ("f (/* ? */ ?)", 1),
    ],
)
def test_placeholders_are_counted_outside_strings_identifiers_and_comments(sql, count):
    assert placeholder_count(sql) == count


def test_a_variadic_function_takes_all_its_parameters():
    with pytest.raises(ValueError, match="variadic"):
        Function(("a", "b"), lambda a, b, rest: SyncAll(), optional=1, variadic=True)


# --- the subscriber's functions -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("REPL_SERVER ('rep1', 'localhost:1111', NULL)", ReplServer(server="rep1", dsn="localhost:1111")),
        (
            "REPL_SUBSCRIBE ('rep1', 'tbl', 'davu', 'davg', 'dba', 'pw', 'player')",
            Subscribe(
                server="rep1", account="tbl", dav_user="davu", dav_group="davg", user="dba", password="pw",
                replay_user="player",
            ),
        ),
        ("REPL_UNSUBSCRIBE ('rep1', 'tbl')", Unsubscribe(server="rep1", account="tbl")),
        ("REPL_UNSUBSCRIBE ('rep1', 'tbl', 'DB.DBA.TEST')", Unsubscribe(server="rep1", account="tbl", item="DB.DBA.TEST")),
        ("REPL_UNSUBSCRIBE ('rep1', 'tbl', NULL)", Unsubscribe(server="rep1", account="tbl")),
        ("REPL_INIT_COPY ('rep1', 'tbl')", InitCopy(server="rep1", account="tbl")),
        ("""REPL_RELOAD_TABLE ('rep1', 'tbl', 'DB.DBA.ab "cd')""",
         ReloadTable(server="rep1", account="tbl", table='DB.DBA.ab "cd')),
        ("REPL_VALIDATE ('rep1', 'tbl')", Validate(server="rep1", account="tbl")),
        ("REPL_COLUMN_CONFLICTS ('tbl', 'items')", ColumnConflicts(account="tbl", table="items", on=True)),
        ("REPL_COLUMN_CONFLICTS ('tbl', 'items', 0)", ColumnConflicts(account="tbl", table="items", on=False)),
        ("REPL_ROW_FILTER ('rep1', 'tbl', 'orders', 'Region = ''EU''; x')",
         SetRowFilter(server="rep1", account="tbl", table="orders", condition="Region = 'EU'; x")),
        ("REPL_ROW_FILTER ('rep1', 'tbl', '表😀', NULL, '\"ab \"\"cd\"')",
         SetRowFilter(server="rep1", account="tbl", table="表😀", columns='"ab ""cd"')),
        ("REPL_PUB_ROW_FILTER ('tbl', '表😀', 'Region = ''EU''', 'a, \"ab \"\"cd\"')",
         SetPubRowFilter(account="tbl", table="表😀", condition="Region = 'EU'", columns='a, "ab ""cd"')),
        ("REPL_PUB_ROW_FILTER ('tbl', 'orders', NULL)", SetPubRowFilter(account="tbl", table="orders")),
        ("REPL_VALIDATE ('rep1', 'tbl', '表😀')", Validate(server="rep1", account="tbl", table="表😀")),
        ("REPL_SYNC ('rep1', 'tbl')", Sync(server="rep1", account="tbl")),
        ("REPL_SYNC ('rep1', 'tbl', 'dba', 'dba')", Sync(server="rep1", account="tbl", user="dba", password="dba")),
        ("REPL_SYNC_ALL ()", SyncAll()),
        ("REPL_SKIP_TRANSACTION ('rep1', 'tbl')", SkipTransaction(server="rep1", account="tbl")),
        ("REPL_SKIP_TRANSACTION ('rep1', 'tbl', 'sub')", SkipTransaction(server="rep1", account="tbl", subscriber="sub")),
        ("REPL_REPAIR_KEYS ('rep1', 'tbl', NULL)", RepairKeys(server="rep1", account="tbl")),
        ("SYNC_REPL ()", SyncRepl()),
        ("REPL_DISCONNECT ('rep1')", Disconnect(server="rep1")),
        ("REPL_THIS_SERVER ()", ThisServer()),
        ("REPL_STAT ()", Stat()),
        ("REPL_STATUS ('rep1', 'tbl')", Status(server="rep1", account="tbl")),
        ("SUB_SCHEDULE ('rep1', 'tbl', 10)", SubSchedule(server="rep1", account="tbl", interval=10)),
        ("SUB_SCHEDULE ('rep1', 'tbl', 0)", SubSchedule(server="rep1", account="tbl", interval=0)),
        ("SUB_SCHEDULE ('rep1', 'tbl', 525600)", SubSchedule(server="rep1", account="tbl", interval=525_600)),
    ],
)  # fmt: skip
def test_the_subscriber_functions_parse(text, expected):
    assert parse_one(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "REPL_STATUS ('rep1', 'tbl', lvl, stat)",
        "repl_status ('rep1', 'tbl', _level, NULL)",
        "REPL_STATUS ('rep1', 'tbl', NULL, NULL)",
        "DB..REPL_STATUS ('rep1', 'tbl', lvl, stat)",
    ],
)
def test_repl_status_accepts_and_ignores_its_two_output_variables(text):
    assert parse_one(text) == Status(server="rep1", account="tbl")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("REPL_STATUS ('rep1', 'tbl', lvl)", "repl_status takes 2 or 4 argument(s) (server, account[, level, stat]), got 3"),
        ("REPL_STATUS ('rep1', 'tbl', a, b, c)", "repl_status takes 2 or 4 argument(s) (server, account[, level, stat]), got 5"),
        ("REPL_STATUS ('rep1')", "repl_status takes 2 or 4 argument(s) (server, account[, level, stat]), got 1"),
        ("REPL_STATUS ('rep1', 'tbl', 'lvl', stat)", "expected a variable name or NULL for the output argument level"),
        ("REPL_STATUS ('rep1', 'tbl', lvl, 2)", "expected a variable name or NULL for the output argument stat"),
        ("REPL_STATUS ('rep1', tbl, lvl, stat)", "expected a string, a number or NULL as an argument, found 'tbl'"),
    ],
)  # fmt: skip
def test_repl_status_refuses_anything_but_names_in_its_output_slots(text, message):
    assert message in refused(text)


# --- qualified names, prefixes, scripts ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "DB..REPL_INIT_COPY ('rep1', 'tbl')",
        "DB.DBA.REPL_INIT_COPY ('rep1', 'tbl')",
        "db..repl_init_copy('rep1','tbl')",
        "CALL DB..REPL_INIT_COPY ('rep1', 'tbl')",
        "select DB.DBA.repl_init_copy ('rep1', 'tbl')",
        "call repl_init_copy ('rep1', 'tbl')",
        "Repl_Init_Copy ('rep1', 'tbl')",
    ],
)
def test_a_qualifier_case_and_call_or_select_before_the_function_name_are_accepted(text):
    assert parse_one(text) == InitCopy(server="rep1", account="tbl")


def test_qualified_names_work_for_the_snapshot_functions_too():
    assert parse_one("DB..REPL_REFRESH_INC_SNAPSHOT ('Orders')") == UpdateSnapshot(name=Name("Orders"))


def test_transactional_and_snapshot_statements_mix_in_one_script():
    script = "REPL_SYNC_ALL (); update snapshot Orders;; SYNC_REPL ();\nREPL_STAT ()"
    assert [s.verb for s in parse(script)] == ["SyncAll", "UpdateSnapshot", "SyncRepl", "Stat"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("DB..REPL_NONSENSE ('x')", "unknown replication function 'REPL_NONSENSE'"),
        ("repl_nonsense ('x')", "unknown replication function 'repl_nonsense'"),
        ("DB.REPL_INIT_COPY ('rep1', 'tbl')", "expected a replication statement"),
        ("DB...REPL_INIT_COPY ('rep1', 'tbl')", "expected a replication statement"),
    ],
)
def test_unknown_or_badly_qualified_functions_are_still_refused(text, message):
    assert message in refused(text)


def test_the_new_functions_are_registered_under_their_reference_names():
    for name in (
        "REPL_PUBLISH", "REPL_UNPUBLISH", "REPL_PUB_ADD", "REPL_PUB_REMOVE", "REPL_GRANT", "REPL_REVOKE", "REPL_TEXT",
        "REPL_NEW_LOG", "REPL_SERVER", "REPL_SUBSCRIBE", "REPL_UNSUBSCRIBE", "REPL_INIT_COPY", "REPL_SYNC",
        "REPL_RELOAD_TABLE", "REPL_VALIDATE", "REPL_ROW_FILTER", "REPL_PUB_ROW_FILTER", "REPL_COLUMN_CONFLICTS", "REPL_SYNC_ALL", "SYNC_REPL", "REPL_DISCONNECT", "REPL_THIS_SERVER", "REPL_STATUS", "REPL_STAT", "REPL_PURGE",
        "SUB_SCHEDULE", "REPL_ADD_CR",
    ):  # fmt: skip
        assert name in FUNCTIONS


# --- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # arity
        ("REPL_PUBLISH ()", "repl_publish takes 1 to 4 argument(s) (account, log_file, is_updateable, sync_user), got 0"),
        ("REPL_PUB_ADD ('tbl', 'DB.DBA.TEST')", "repl_pub_add takes 3 to 5 argument(s) (account, item, type, mode, options), got 2"),
        ("REPL_INIT_COPY ('rep1')", "repl_init_copy takes 2 to 3 argument(s) (server, account, image), got 1"),
        ("REPL_SYNC_ALL ('rep1')", "repl_sync_all takes 0 argument(s) (), got 1"),
        ("REPL_GRANT ('tbl', 'a', 'b')", "repl_grant takes 2 argument(s) (account, grantee), got 3"),
        ("REPL_SUBSCRIBE ('rep1')", "repl_subscribe takes 2 to 7 argument(s)"),
        # item types and options
        ("REPL_PUB_ADD ('dav', '/DAV/repl/', 1, 0, null)", "WebDAV collections are not replicated by this console; use 2 for a table or 3 for a procedure"),
        ("REPL_PUB_REMOVE ('dav', '/DAV/repl/', 1)", "WebDAV collections are not replicated by this console"),
        ("REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 4)", "repl_pub_add: the item type must be 2 (a table) or 3 (a procedure)"),
        ("REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 0)", "the item type must be 2 (a table) or 3 (a procedure)"),
        ("REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', '2')", "the item type must be 2 (a table) or 3 (a procedure)"),
        ("REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 2.0)", "the item type must be 2 (a table) or 3 (a procedure)"),
        ("REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 2, 0, 3)", "options apply to procedures (type 3) only; give NULL or leave them out for a table"),
        ("REPL_PUB_ADD ('p', 'DB.DBA.t_proc', 3, 0, 4)", "options must be 1 (replicate calls), 2 (the definition) or 3 (both)"),
        ("REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 2, 2)", "mode must be a whole number from 0 to 1"),
        ("REPL_PUB_ADD ('tbl', '', 2)", "repl_pub_add: item must be a non-empty string"),
        ("REPL_PUB_REMOVE ('tbl', 'DB.DBA.TEST', 2, 'yes')", "mode must be a whole number (0 for no, 1 for yes)"),
        ("REPL_PUBLISH ('acct', 'a.log', 'yes')", "repl_publish: is_updateable must be a whole number (0 for no, 1 for yes)"),
        # accounts and servers
        ("REPL_PUBLISH ('')", "repl_publish: account must be a non-empty string"),
        ("REPL_PUBLISH ('   ')", "repl_publish: account must be a non-empty string"),
        ("REPL_PUBLISH (NULL)", "repl_publish: account must be a non-empty string"),
        ("REPL_PUBLISH (7)", "repl_publish: account must be a non-empty string"),
        (f"REPL_PUBLISH ('{'a' * 101}')", "repl_publish: account must be at most 100 characters"),
        ("REPL_SUBSCRIBE ('', 'tbl')", "repl_subscribe: server must be a non-empty string"),
        ("REPL_SERVER ('rep1', '')", "repl_server: dsn must be a non-empty string"),
        ("REPL_SERVER ('rep1', 'localhost:1111', 5)", "repl_server: address must be a string or NULL"),
        ("REPL_SYNC ('rep1', 'tbl', 'dba', 5)", "repl_sync: password must be a string or NULL"),
        ("REPL_GRANT ('tbl', NULL)", "repl_grant: grantee must be a non-empty string"),
        ("REPL_NEW_LOG ('tbl', '')", "repl_new_log: file must be a non-empty string"),
        # schedules
        ("SUB_SCHEDULE ('rep1', 'tbl', 'ten')", "sub_schedule: interval (minutes) must be a whole number from 0 to 525600"),
        ("SUB_SCHEDULE ('rep1', 'tbl', 1.5)", "interval (minutes) must be a whole number from 0 to 525600"),
        ("SUB_SCHEDULE ('rep1', 'tbl', -1)", "interval (minutes) must be a whole number from 0 to 525600"),
        ("SUB_SCHEDULE ('rep1', 'tbl', 525601)", "interval (minutes) must be a whole number from 0 to 525600"),
        # conflict resolvers
        ("REPL_ADD_CR ('items', 'X', 's', 1, 'min', 'price')", "conflict type must be 'I', 'U' or 'D'"),
        ("REPL_ADD_CR ('items', 'U', 's', 1, 'median', 'price')", "the class must be one of pub_wins, sub_wins, min, max, ave, add, manual, custom"),
        ("REPL_ADD_CR ('a.b.c', 'U', 's', 1, 'min', 'price')", "at most two parts"),
    ],
)  # fmt: skip
def test_malformed_transactional_statements_are_refused_with_the_reason(text, message):
    assert message in refused(text)


def test_an_account_of_a_hundred_characters_of_any_kind_is_accepted():
    account = "Ünï cødé; -- 'x' \"y\" " + "a" * 79
    assert len(account) == 100
    statement = parse_one("REPL_PUBLISH ('" + account.replace("'", "''") + "')")
    assert statement == Publish(account=account.strip())


def test_an_error_names_the_line_and_column_of_the_function():
    with pytest.raises(StatementError) as info:
        parse("REPL_SYNC_ALL ();\n  DB..REPL_PUB_ADD ('dav', '/DAV/repl/', 1, 0, null)")
    assert (info.value.line, info.value.column) == (2, 7)


# --- passwords ----------------------------------------------------------------------------------------------


def test_a_password_given_to_repl_subscribe_is_masked_and_not_in_the_repr():
    statement = parse_one("REPL_SUBSCRIBE ('rep1', 'tbl', null, null, 'dba', 's3cr''et')")
    assert isinstance(statement, Subscribe) and statement.password == "s3cr'et"
    assert masked_text(statement) == "REPL_SUBSCRIBE ('rep1', 'tbl', NULL, NULL, 'dba', '********')"
    assert "s3cr" not in repr(statement)


def test_the_replaying_user_follows_the_masked_password_of_repl_subscribe():
    statement = parse_one("REPL_SUBSCRIBE ('rep1', 'o''k', 'du', NULL, 'dba', 'pw', 'player')")
    assert masked_text(statement) == "REPL_SUBSCRIBE ('rep1', 'o''k', 'du', NULL, 'dba', '********', 'player')"


def test_a_password_given_to_repl_sync_is_masked_and_not_in_the_repr():
    statement = parse_one("call REPL_SYNC ('rep1', 'tbl', 'dba', 'hunter2')")
    assert masked_text(statement) == "REPL_SYNC ('rep1', 'tbl', 'dba', '********')"
    assert "hunter2" not in repr(statement)
    no_user = parse_one("REPL_SYNC ('rep1', 'tbl', NULL, '')")
    assert masked_text(no_user) == "REPL_SYNC ('rep1', 'tbl', NULL, '********')"


def test_a_password_given_to_repl_snp_server_is_masked_as_the_console_shows_it():
    statement = parse_one("REPL_SNP_SERVER ('localhost:1121', 'dba', 's3cr''et')")
    assert masked_text(statement) == "REPL_SNP_SERVER ('localhost:1121', 'dba', '********')"
    assert (
        masked_text(parse_one("REPL_SNP_SERVER ('it''s', NULL, 'x')")) == "REPL_SNP_SERVER ('it''s', NULL, '********')"
    )


@pytest.mark.parametrize(
    "text",
    [
        "REPL_SUBSCRIBE ('rep1', 'tbl', null, null, 'dba')",
        "REPL_SYNC ('rep1', 'tbl')",
        "REPL_SNP_SERVER ('lite')",
        "DB..REPL_INIT_COPY ('rep1', 'tbl')",
        "create snapshot log for Orders",
    ],
)
def test_statements_without_a_password_are_shown_as_written(text):
    assert masked_text(parse_one(text)) == text


def test_masked_text_of_a_statement_built_in_code():
    assert masked_text(Sync(server="s", account="a", password="p")) == "REPL_SYNC ('s', 'a', NULL, '********')"
    assert masked_text(SnpServer(dsn="d", password="p")) == "REPL_SNP_SERVER ('d', NULL, '********')"
