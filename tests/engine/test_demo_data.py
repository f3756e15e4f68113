"""The Northwind-like Demo database (replication_admin.demo): schema, consistency, formats, determinism.

Plain SQLite files under tmp_path; no Django database is needed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from replication_admin.demo import HOT_PRODUCTS, create_demo_database, reprice

NORTHWIND_COLUMNS = {
    "Categories": ["CategoryID", "CategoryName", "Description"],
    "Suppliers": [
        "SupplierID", "CompanyName", "ContactName", "ContactTitle", "Address", "City", "Region",
        "PostalCode", "Country", "Phone",
    ],
    "Products": [
        "ProductID", "ProductName", "SupplierID", "CategoryID", "QuantityPerUnit", "UnitPrice",
        "UnitsInStock", "UnitsOnOrder", "ReorderLevel", "Discontinued",
    ],
    "Customers": [
        "CustomerID", "CompanyName", "ContactName", "ContactTitle", "Address", "City", "Region",
        "PostalCode", "Country", "Phone", "Fax",
    ],
    "Employees": [
        "EmployeeID", "LastName", "FirstName", "Title", "TitleOfCourtesy", "BirthDate", "HireDate",
        "Address", "City", "Region", "PostalCode", "Country", "HomePhone", "ReportsTo",
    ],
    "Shippers": ["ShipperID", "CompanyName", "Phone"],
    "Orders": [
        "OrderID", "CustomerID", "EmployeeID", "OrderDate", "RequiredDate", "ShippedDate", "ShipVia",
        "Freight", "ShipName", "ShipAddress", "ShipCity", "ShipRegion", "ShipPostalCode", "ShipCountry",
    ],
    "Order Details": ["OrderID", "ProductID", "UnitPrice", "Quantity", "Discount"],
}  # fmt: skip
PRIMARY_KEYS = {
    "Categories": ["CategoryID"],
    "Suppliers": ["SupplierID"],
    "Products": ["ProductID"],
    "Customers": ["CustomerID"],
    "Employees": ["EmployeeID"],
    "Shippers": ["ShipperID"],
    "Orders": ["OrderID"],
    "Order Details": ["OrderID", "ProductID"],
}
MONEY_COLUMNS = {"Products": ["UnitPrice"], "Orders": ["Freight"], "Order Details": ["UnitPrice"]}
TIMESTAMP_COLUMNS = {
    "Employees": ["BirthDate", "HireDate"],
    "Orders": ["OrderDate", "RequiredDate", "ShippedDate"],
}
MONEY = re.compile(r"^\d+\.\d{2}$")
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}$")
VARCHAR = re.compile(r"^VARCHAR\((\d+)\)$")


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def table_info(connection: sqlite3.Connection, table: str) -> list[tuple]:
    """(cid, name, type, notnull, default, pk) for each column."""
    return connection.execute("SELECT * FROM pragma_table_info(?) ORDER BY cid", [table]).fetchall()


def content_hash(path: Path) -> str:
    """A digest of every table's declared schema and rows, in primary key order."""
    digest = hashlib.sha256()
    with connect(path) as connection:
        for table in PRIMARY_KEYS:
            digest.update(repr(table_info(connection, table)).encode())
            order = ", ".join(q(column) for column in PRIMARY_KEYS[table])
            for row in connection.execute(f"SELECT * FROM {q(table)} ORDER BY {order}"):
                digest.update(repr(row).encode())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, int]]]:
    """The default Demo database (3000 orders, seed 7), built once for the module."""
    path = tmp_path_factory.mktemp("demo") / "demo.sqlite3"
    counts = create_demo_database(str(path))
    yield path, counts


@pytest.fixture
def db(demo: tuple[Path, dict[str, int]]) -> Iterator[sqlite3.Connection]:
    connection = connect(demo[0])
    try:
        yield connection
    finally:
        connection.close()


def test_demo_database_has_every_northwind_table_with_a_primary_key(db: sqlite3.Connection) -> None:
    tables = {
        name
        for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite!_%' ESCAPE '!'"
        )
    }
    assert tables == set(NORTHWIND_COLUMNS)
    for table, columns in NORTHWIND_COLUMNS.items():
        info = table_info(db, table)
        assert [column[1] for column in info] == columns, table
        key = sorted((column[5], column[1]) for column in info if column[5] > 0)
        assert [name for _position, name in key] == PRIMARY_KEYS[table], table
        assert all(column[3] == 1 for column in info if column[5] > 0), f"{table} key columns are NOT NULL"


def test_northwind_statements_work_as_written_against_the_demo_database(db: sqlite3.Connection) -> None:
    rows = db.execute("select * from Orders where OrderID < 10251").fetchall()
    assert [row[0] for row in rows] == [10248, 10249, 10250]
    lines = db.execute('select count(*) from "Order Details" where OrderID = 10248').fetchone()[0]
    assert 1 <= lines <= 5
    assert db.execute("select CompanyName from Customers where CustomerID = 'ALFKI'").fetchone() == (
        "Alfreds Futterkiste",
    )
    assert db.execute("select ProductName from Products where ProductID in (1, 2) order by 1").fetchall() == [
        ("Chai",),
        ("Chang",),
    ]
    shippers = {name for (name,) in db.execute("select CompanyName from Shippers")}
    assert "Speedy Express" in shippers


def test_demo_sizes_match_northwind(demo: tuple[Path, dict[str, int]], db: sqlite3.Connection) -> None:
    _path, counts = demo
    assert counts == {table: db.execute(f"SELECT count(*) FROM {q(table)}").fetchone()[0] for table in counts}
    assert list(counts) == list(NORTHWIND_COLUMNS)
    assert counts["Categories"] == 8
    assert counts["Suppliers"] == 29
    assert counts["Products"] == 77
    assert counts["Customers"] == 91
    assert counts["Employees"] == 9
    assert counts["Shippers"] == 3
    assert counts["Orders"] == 3000
    assert 3000 <= counts["Order Details"] <= 5 * 3000


def test_demo_declares_the_foreign_keys_and_every_row_satisfies_them(db: sqlite3.Connection) -> None:
    references = {
        (table, row[3], row[2], row[4])
        for table in NORTHWIND_COLUMNS
        for row in db.execute("SELECT * FROM pragma_foreign_key_list(?)", [table])
    }
    assert references == {
        ("Products", "SupplierID", "Suppliers", "SupplierID"),
        ("Products", "CategoryID", "Categories", "CategoryID"),
        ("Employees", "ReportsTo", "Employees", "EmployeeID"),
        ("Orders", "CustomerID", "Customers", "CustomerID"),
        ("Orders", "EmployeeID", "Employees", "EmployeeID"),
        ("Orders", "ShipVia", "Shippers", "ShipperID"),
        ("Order Details", "OrderID", "Orders", "OrderID"),
        ("Order Details", "ProductID", "Products", "ProductID"),
    }
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []


def test_demo_orders_reference_existing_customers_employees_and_shippers(db: sqlite3.Connection) -> None:
    orphans = db.execute(
        """
        SELECT count(*) FROM Orders o
        LEFT JOIN Customers c ON c.CustomerID = o.CustomerID
        LEFT JOIN Employees e ON e.EmployeeID = o.EmployeeID
        LEFT JOIN Shippers s ON s.ShipperID = o.ShipVia
        WHERE c.CustomerID IS NULL OR e.EmployeeID IS NULL OR s.ShipperID IS NULL
        """
    ).fetchone()[0]
    assert orphans == 0
    assert db.execute("SELECT count(*) FROM Orders WHERE CustomerID IS NULL OR EmployeeID IS NULL").fetchone() == (0,)
    detail_orphans = db.execute(
        """
        SELECT count(*) FROM "Order Details" d
        LEFT JOIN Orders o ON o.OrderID = d.OrderID
        LEFT JOIN Products p ON p.ProductID = d.ProductID
        WHERE o.OrderID IS NULL OR p.ProductID IS NULL
        """
    ).fetchone()[0]
    assert detail_orphans == 0
    # Orders are shipped to the ordering customer's own name and city.
    mismatched = db.execute(
        """
        SELECT count(*) FROM Orders o JOIN Customers c ON c.CustomerID = o.CustomerID
        WHERE o.ShipName IS NOT c.CompanyName OR o.ShipCity IS NOT c.City OR o.ShipCountry IS NOT c.Country
        """
    ).fetchone()[0]
    assert mismatched == 0


def test_each_demo_order_has_one_to_five_distinct_products(db: sqlite3.Connection) -> None:
    sizes = db.execute(
        """
        SELECT o.OrderID, count(d.ProductID), count(DISTINCT d.ProductID)
        FROM Orders o LEFT JOIN "Order Details" d ON d.OrderID = o.OrderID
        GROUP BY o.OrderID
        """
    ).fetchall()
    assert len(sizes) == 3000
    assert all(1 <= lines <= 5 and lines == distinct for _order, lines, distinct in sizes)
    assert {lines for _order, lines, _distinct in sizes} == {1, 2, 3, 4, 5}


def test_demo_employees_report_to_a_single_top_manager(db: sqlite3.Connection) -> None:
    reports_to = dict(db.execute("SELECT EmployeeID, ReportsTo FROM Employees").fetchall())
    top = [employee for employee, manager in reports_to.items() if manager is None]
    assert len(top) == 1
    for employee in reports_to:
        seen = set()
        while reports_to[employee] is not None:
            assert employee not in seen, "ReportsTo has a cycle"
            seen.add(employee)
            employee = reports_to[employee]
        assert employee == top[0]


def test_demo_money_and_timestamps_use_the_documented_text_formats(db: sqlite3.Connection) -> None:
    for table, columns in MONEY_COLUMNS.items():
        declared = {column[1]: column[2] for column in table_info(db, table)}
        for column in columns:
            assert declared[column] == "DECIMAL_TEXT(10, 2)", (table, column)
            values = db.execute(f"SELECT typeof({q(column)}), {q(column)} FROM {q(table)}").fetchall()
            assert values
            bad = [value for kind, value in values if kind != "text" or not MONEY.match(value)]
            assert bad == [], (table, column, bad[:5])

    for table, columns in TIMESTAMP_COLUMNS.items():
        declared = {column[1]: column[2] for column in table_info(db, table)}
        for column in columns:
            assert declared[column] == "TIMESTAMP", (table, column)
            values = db.execute(f"SELECT typeof({q(column)}), {q(column)} FROM {q(table)}").fetchall()
            present = [(kind, value) for kind, value in values if value is not None]
            assert present
            bad = [value for kind, value in present if kind != "text" or not TIMESTAMP.match(value)]
            assert bad == [], (table, column, bad[:5])

    nulls = {
        column: db.execute(f"SELECT count(*) FROM Orders WHERE {q(column)} IS NULL").fetchone()[0]
        for column in TIMESTAMP_COLUMNS["Orders"]
    }
    assert nulls["OrderDate"] == 0 and nulls["RequiredDate"] == 0
    assert 0 < nulls["ShippedDate"] < 300, "only recent orders are unshipped"
    last_shipped = db.execute("SELECT max(OrderDate) FROM Orders WHERE ShippedDate IS NOT NULL").fetchone()[0]
    first_unshipped = db.execute("SELECT min(OrderDate) FROM Orders WHERE ShippedDate IS NULL").fetchone()[0]
    assert first_unshipped > "1998-01-01"
    assert db.execute(
        "SELECT count(*) FROM Orders WHERE ShippedDate < OrderDate OR RequiredDate < OrderDate"
    ).fetchone() == (0,)
    assert last_shipped is not None

    discounts = db.execute('SELECT DISTINCT typeof(Discount), Discount FROM "Order Details"').fetchall()
    assert {kind for kind, _value in discounts} == {"real"}
    assert {value for _kind, value in discounts} <= {0.0, 0.05, 0.1, 0.15, 0.2, 0.25}
    quantities = db.execute('SELECT DISTINCT typeof(Quantity) FROM "Order Details"').fetchall()
    assert quantities == [("integer",)]
    assert db.execute('SELECT min(Quantity) > 0 FROM "Order Details"').fetchone() == (1,)
    flags = db.execute("SELECT DISTINCT typeof(Discontinued), Discontinued FROM Products").fetchall()
    assert set(flags) == {("integer", 0), ("integer", 1)}


def test_demo_declared_types_follow_the_sqlite_dialect(db: sqlite3.Connection) -> None:
    allowed = re.compile(r"^(INTEGER|SMALLINT|REAL|BOOLEAN|TEXT|TIMESTAMP|DECIMAL_TEXT\(10, 2\)|VARCHAR\(\d+\))$")
    for table in NORTHWIND_COLUMNS:
        for _cid, name, declared, *_rest in table_info(db, table):
            assert allowed.match(declared), (table, name, declared)
            if name.endswith("ID") and not (table == "Customers" or name == "CustomerID"):
                assert declared == "INTEGER", (table, name, declared)
    customer_keys = db.execute("SELECT DISTINCT typeof(CustomerID), length(CustomerID) FROM Customers").fetchall()
    assert customer_keys == [("text", 5)]
    assert db.execute("SELECT count(*) FROM Customers WHERE CustomerID GLOB '*[^A-Z]*'").fetchone() == (0,)
    assert table_info(db, "Order Details")[3][2] == "SMALLINT"
    assert table_info(db, "Categories")[2][2] == "TEXT"


def test_demo_text_values_fit_their_declared_varchar_lengths(db: sqlite3.Connection) -> None:
    for table in NORTHWIND_COLUMNS:
        for _cid, name, declared, *_rest in table_info(db, table):
            match = VARCHAR.match(declared)
            if not match:
                continue
            longest = db.execute(f"SELECT max(length({q(name)})) FROM {q(table)}").fetchone()[0]
            assert longest is None or longest <= int(match.group(1)), (table, name, declared, longest)


def test_demo_includes_non_ascii_text_and_both_empty_and_null_regions(db: sqlite3.Connection) -> None:
    companies = {name for (name,) in db.execute("SELECT CompanyName FROM Customers")}
    assert {"Alfreds Futterkiste", "Königlich Essen"} <= companies
    cities = {city for (city,) in db.execute("SELECT City FROM Customers UNION SELECT City FROM Suppliers")}
    assert "São Paulo" in cities
    contacts = [name for (name,) in db.execute("SELECT ContactName FROM Suppliers")]
    assert any(name.startswith("Håkan") for name in contacts)
    for table in ("Customers", "Suppliers", "Employees"):
        empty, null = db.execute(f"SELECT sum(Region = ''), sum(Region IS NULL) FROM {q(table)}").fetchone()
        assert empty > 0 and null > 0, table
    ship_regions = db.execute("SELECT sum(ShipRegion = ''), sum(ShipRegion IS NULL) FROM Orders").fetchone()
    assert ship_regions[0] > 0 and ship_regions[1] > 0


def test_demo_generation_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    first, again, other = tmp_path / "first.sqlite3", tmp_path / "again.sqlite3", tmp_path / "other.sqlite3"
    assert create_demo_database(str(first), orders=400, seed=11) == create_demo_database(
        str(again), orders=400, seed=11
    )
    create_demo_database(str(other), orders=400, seed=12)
    assert content_hash(first) == content_hash(again)
    assert content_hash(first) != content_hash(other)


def test_demo_order_ids_start_at_10248_and_orders_count_matches(tmp_path: Path) -> None:
    path = tmp_path / "small.sqlite3"
    counts = create_demo_database(str(path), orders=250, seed=3)
    assert counts["Orders"] == 250
    with connect(path) as connection:
        first, last, count = connection.execute("SELECT min(OrderID), max(OrderID), count(*) FROM Orders").fetchone()
        details = connection.execute('SELECT count(*) FROM "Order Details"').fetchone()[0]
        dates = [date for (date,) in connection.execute("SELECT OrderDate FROM Orders ORDER BY OrderID")]
    connection.close()
    assert (first, last, count) == (10248, 10248 + 249, 250)
    assert details == counts["Order Details"]
    assert dates == sorted(dates), "order ids follow order dates"


def test_demo_with_no_orders_still_has_the_reference_tables(tmp_path: Path) -> None:
    counts = create_demo_database(str(tmp_path / "empty.sqlite3"), orders=0)
    assert counts["Orders"] == 0 and counts["Order Details"] == 0
    assert counts["Products"] == 77 and counts["Customers"] == 91
    with pytest.raises(ValueError, match="orders"):
        create_demo_database(str(tmp_path / "negative.sqlite3"), orders=-1)
    assert sorted(os.listdir(tmp_path)) == ["empty.sqlite3"]


def test_demo_replaces_an_existing_file_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "demo.sqlite3"
    create_demo_database(str(path), orders=50, seed=1)
    reader = connect(path)
    try:
        assert reader.execute("SELECT count(*) FROM Orders").fetchone() == (50,)
        create_demo_database(str(path), orders=60, seed=1)
        # A connection opened before the replacement still reads the old, complete file.
        assert reader.execute("SELECT count(*) FROM Orders").fetchone() == (50,)
    finally:
        reader.close()
    with connect(path) as fresh:
        assert fresh.execute("SELECT count(*) FROM Orders").fetchone() == (60,)
    fresh.close()
    assert os.listdir(path.parent) == ["demo.sqlite3"]


def test_the_publisher_and_a_copy_reprice_the_same_few_products_so_the_demo_meets_conflicts(tmp_path):
    publisher, branch = str(tmp_path / "demo.sqlite3"), str(tmp_path / "branch.sqlite3")
    create_demo_database(publisher, orders=10)
    shutil.copy(publisher, branch)

    def prices(path: str) -> dict[int, object]:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            return dict(conn.execute("SELECT ProductID, UnitPrice FROM Products").fetchall())

    before = prices(publisher)
    both = set()
    for minute in range(10):
        assert reprice(publisher, seed=minute) >= 1 and reprice(branch, seed=100 + minute) >= 1
        changed_here = {k for k, v in prices(publisher).items() if v != before[k]}
        changed_there = {k for k, v in prices(branch).items() if v != before[k]}
        both |= changed_here & changed_there
    assert both, "ten minutes of repricing never touched the same product on both copies"
    assert len({k for k, v in prices(publisher).items() if v != before[k]}) <= HOT_PRODUCTS


def test_in_a_contested_minute_both_copies_reprice_the_first_hot_product(tmp_path):
    publisher, branch = str(tmp_path / "demo.sqlite3"), str(tmp_path / "branch.sqlite3")
    create_demo_database(publisher, orders=10)
    shutil.copy(publisher, branch)

    def first_hot_price(path: str):
        with contextlib.closing(sqlite3.connect(path)) as conn:
            return conn.execute(
                "SELECT UnitPrice FROM Products WHERE Discontinued = 0 ORDER BY ProductID LIMIT 1"
            ).fetchone()[0]

    for seed in range(5):
        before = (first_hot_price(publisher), first_hot_price(branch))
        reprice(publisher, seed=seed, contested=True)
        reprice(branch, seed=50 + seed, contested=True)
        after = (first_hot_price(publisher), first_hot_price(branch))
        assert after[0] != before[0] and after[1] != before[1]  # repriced on both copies (seeded: no chance)
