"""The Northwind-like "Demo" database, generated into a SQLite file.

`create_demo_database(path)` writes a small trading company's books: 8 categories, 29 suppliers, 77
products, 91 customers, 9 employees, 3 shippers, a configurable number of orders (3000 by default,
numbered from 10248 as in Northwind) and 1-5 lines per order in "Order Details". Table and column names
are Northwind's own, so statements written against Northwind (`create snapshot log for Orders`,
`select * from Orders where OrderID < 5`) work as they are.

The reference data (categories, suppliers, products, customers, employees, shippers) is Northwind's,
including its non-ASCII names ('Königlich Essen', 'São Paulo', 'Gustaf's Knäckebröd'); stock levels,
phone numbers and everything about the orders come from `random.Random(seed)`, so one seed always gives
the same content.

Declared types and storage formats follow the SQLite dialect (`replication_admin.engine.dialects.sqlite`):

- ids: INTEGER (CustomerID is a 5-letter VARCHAR(5) key such as 'ALFKI');
- money (UnitPrice, Freight): DECIMAL_TEXT(10, 2), stored as TEXT with exactly two decimals, '18.00';
- Discount: REAL (0, 0.05, ... 0.25); Quantity and stock counts: SMALLINT;
- dates (OrderDate, RequiredDate, ShippedDate, BirthDate, HireDate): TIMESTAMP, stored as UTC TEXT
  'YYYY-MM-DD HH:MM:SS.ffffff' with six fraction digits; ShippedDate is NULL for orders not yet shipped;
- Discontinued: BOOLEAN stored as 0/1; other text: VARCHAR(n) with Northwind's lengths, Description TEXT;
- Region is NULL for most places outside the Americas, and an empty string for a few, so both are seen.

Every table has a primary key ("Order Details" a composite one on OrderID, ProductID) and declared
foreign keys, which the generated rows satisfy. The file is built next to `path` under a temporary name
in one transaction and moved into place with `os.replace`, so a reader sees either the old file or the
complete new one.

Only the standard library is used, so this module can be run without Django.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

__all__ = ["FIRST_ORDER_ID", "TABLES", "create_demo_database"]

FIRST_ORDER_ID = 10248
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f"
CENTS = Decimal("0.01")

# Orders are spread over Northwind's own period; "now" is the end of it, so recent orders are unshipped.
ORDERS_FROM = datetime(1996, 7, 4)
ORDERS_UNTIL = datetime(1998, 5, 6, 18, 0)
DISCOUNTS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25)
DISCOUNT_WEIGHTS = (62, 8, 8, 8, 7, 7)

Row = tuple[Any, ...]

SCHEMA: dict[str, str] = {
    "Categories": """
        CREATE TABLE "Categories" (
            "CategoryID" INTEGER NOT NULL PRIMARY KEY,
            "CategoryName" VARCHAR(15) NOT NULL,
            "Description" TEXT
        )""",
    "Suppliers": """
        CREATE TABLE "Suppliers" (
            "SupplierID" INTEGER NOT NULL PRIMARY KEY,
            "CompanyName" VARCHAR(40) NOT NULL,
            "ContactName" VARCHAR(30),
            "ContactTitle" VARCHAR(30),
            "Address" VARCHAR(60),
            "City" VARCHAR(15),
            "Region" VARCHAR(15),
            "PostalCode" VARCHAR(10),
            "Country" VARCHAR(15),
            "Phone" VARCHAR(24)
        )""",
    "Products": """
        CREATE TABLE "Products" (
            "ProductID" INTEGER NOT NULL PRIMARY KEY,
            "ProductName" VARCHAR(40) NOT NULL,
            "SupplierID" INTEGER REFERENCES "Suppliers" ("SupplierID"),
            "CategoryID" INTEGER REFERENCES "Categories" ("CategoryID"),
            "QuantityPerUnit" VARCHAR(20),
            "UnitPrice" DECIMAL_TEXT(10, 2) DEFAULT '0.00',
            "UnitsInStock" SMALLINT DEFAULT 0,
            "UnitsOnOrder" SMALLINT DEFAULT 0,
            "ReorderLevel" SMALLINT DEFAULT 0,
            "Discontinued" BOOLEAN NOT NULL DEFAULT 0
        )""",
    "Customers": """
        CREATE TABLE "Customers" (
            "CustomerID" VARCHAR(5) NOT NULL PRIMARY KEY,
            "CompanyName" VARCHAR(40) NOT NULL,
            "ContactName" VARCHAR(30),
            "ContactTitle" VARCHAR(30),
            "Address" VARCHAR(60),
            "City" VARCHAR(15),
            "Region" VARCHAR(15),
            "PostalCode" VARCHAR(10),
            "Country" VARCHAR(15),
            "Phone" VARCHAR(24),
            "Fax" VARCHAR(24)
        )""",
    "Employees": """
        CREATE TABLE "Employees" (
            "EmployeeID" INTEGER NOT NULL PRIMARY KEY,
            "LastName" VARCHAR(20) NOT NULL,
            "FirstName" VARCHAR(10) NOT NULL,
            "Title" VARCHAR(30),
            "TitleOfCourtesy" VARCHAR(25),
            "BirthDate" TIMESTAMP,
            "HireDate" TIMESTAMP,
            "Address" VARCHAR(60),
            "City" VARCHAR(15),
            "Region" VARCHAR(15),
            "PostalCode" VARCHAR(10),
            "Country" VARCHAR(15),
            "HomePhone" VARCHAR(24),
            "ReportsTo" INTEGER REFERENCES "Employees" ("EmployeeID")
        )""",
    "Shippers": """
        CREATE TABLE "Shippers" (
            "ShipperID" INTEGER NOT NULL PRIMARY KEY,
            "CompanyName" VARCHAR(40) NOT NULL,
            "Phone" VARCHAR(24)
        )""",
    "Orders": """
        CREATE TABLE "Orders" (
            "OrderID" INTEGER NOT NULL PRIMARY KEY,
            "CustomerID" VARCHAR(5) REFERENCES "Customers" ("CustomerID"),
            "EmployeeID" INTEGER REFERENCES "Employees" ("EmployeeID"),
            "OrderDate" TIMESTAMP,
            "RequiredDate" TIMESTAMP,
            "ShippedDate" TIMESTAMP,
            "ShipVia" INTEGER REFERENCES "Shippers" ("ShipperID"),
            "Freight" DECIMAL_TEXT(10, 2) DEFAULT '0.00',
            "ShipName" VARCHAR(40),
            "ShipAddress" VARCHAR(60),
            "ShipCity" VARCHAR(15),
            "ShipRegion" VARCHAR(15),
            "ShipPostalCode" VARCHAR(10),
            "ShipCountry" VARCHAR(15)
        )""",
    "Order Details": """
        CREATE TABLE "Order Details" (
            "OrderID" INTEGER NOT NULL REFERENCES "Orders" ("OrderID"),
            "ProductID" INTEGER NOT NULL REFERENCES "Products" ("ProductID"),
            "UnitPrice" DECIMAL_TEXT(10, 2) NOT NULL DEFAULT '0.00',
            "Quantity" SMALLINT NOT NULL DEFAULT 1,
            "Discount" REAL NOT NULL DEFAULT 0,
            PRIMARY KEY ("OrderID", "ProductID")
        )""",
}
TABLES: tuple[str, ...] = tuple(SCHEMA)

# fmt: off
CATEGORIES: tuple[Row, ...] = (
    (1, "Beverages", "Soft drinks, coffees, teas, beers, and ales"),
    (2, "Condiments", "Sweet and savory sauces, relishes, spreads, and seasonings"),
    (3, "Confections", "Desserts, candies, and sweet breads"),
    (4, "Dairy Products", "Cheeses"),
    (5, "Grains/Cereals", "Breads, crackers, pasta, and cereal"),
    (6, "Meat/Poultry", "Prepared meats"),
    (7, "Produce", "Dried fruit and bean curd"),
    (8, "Seafood", "Seaweed and fish"),
)

# (SupplierID, CompanyName, ContactName, ContactTitle, Address, City, Region, PostalCode, Country)
SUPPLIERS: tuple[Row, ...] = (
    (1, "Exotic Liquids", "Charlotte Cooper", "Purchasing Manager", "49 Gilbert St.", "London", None,
     "EC1 4SD", "UK"),
    (2, "New Orleans Cajun Delights", "Shelley Burke", "Order Administrator", "P.O. Box 78934",
     "New Orleans", "LA", "70117", "USA"),
    (3, "Grandma Kelly's Homestead", "Regina Murphy", "Sales Representative", "707 Oxford Rd.", "Ann Arbor",
     "MI", "48104", "USA"),
    (4, "Tokyo Traders", "Yoshi Nagase", "Marketing Manager", "9-8 Sekimai Musashino-shi", "Tokyo", None,
     "100", "Japan"),
    (5, "Cooperativa de Quesos 'Las Cabras'", "Antonio del Valle Saavedra", "Export Administrator",
     "Calle del Rosal 4", "Oviedo", "Asturias", "33007", "Spain"),
    (6, "Mayumi's", "Mayumi Ohno", "Marketing Representative", "92 Setsuko Chuo-ku", "Osaka", None, "545",
     "Japan"),
    (7, "Pavlova, Ltd.", "Ian Devling", "Marketing Manager", "74 Rose St. Moonie Ponds", "Melbourne",
     "Victoria", "3058", "Australia"),
    (8, "Specialty Biscuits, Ltd.", "Peter Wilson", "Sales Representative", "29 King's Way", "Manchester",
     None, "M14 GSD", "UK"),
    (9, "PB Knäckebröd AB", "Lars Peterson", "Sales Agent", "Kaloadagatan 13", "Göteborg", None, "S-345 67",
     "Sweden"),
    (10, "Refrescos Americanas LTDA", "Carlos Diaz", "Marketing Manager", "Av. das Americanas 12.890",
     "São Paulo", "SP", "5442", "Brazil"),
    (11, "Heli Süßwaren GmbH & Co. KG", "Petra Winkler", "Sales Manager", "Tiergartenstraße 5", "Berlin",
     None, "10785", "Germany"),
    (12, "Plutzer Lebensmittelgroßmärkte AG", "Martin Bein", "International Marketing Mgr.",
     "Bogenallee 51", "Frankfurt", None, "60439", "Germany"),
    (13, "Nord-Ost-Fisch Handelsgesellschaft mbH", "Sven Petersen", "Coordinator Foreign Markets",
     "Frahmredder 112a", "Cuxhaven", None, "27478", "Germany"),
    (14, "Formaggi Fortini s.r.l.", "Elio Rossi", "Sales Representative", "Viale Dante, 75", "Ravenna",
     None, "48100", "Italy"),
    (15, "Norske Meierier", "Beate Vileid", "Marketing Manager", "Hatlevegen 5", "Sandvika", "", "1320",
     "Norway"),
    (16, "Bigfoot Breweries", "Cheryl Saylor", "Regional Account Rep.", "3400 - 8th Avenue Suite 210",
     "Bend", "OR", "97101", "USA"),
    (17, "Svensk Sjöföda AB", "Håkan Björn", "Sales Representative", "Brovallavägen 231", "Stockholm", None,
     "S-123 45", "Sweden"),
    (18, "Aux joyeux ecclésiastiques", "Guylène Nodier", "Sales Manager", "203, Rue des Francs-Bourgeois",
     "Paris", None, "75004", "France"),
    (19, "New England Seafood Cannery", "Robb Merchant", "Wholesale Account Agent",
     "Order Processing Dept. 2100 Paul Revere Blvd.", "Boston", "MA", "02134", "USA"),
    (20, "Leka Trading", "Chandra Leka", "Owner", "471 Serangoon Loop, Suite #402", "Singapore", "",
     "0512", "Singapore"),
    (21, "Lyngbysild", "Niels Petersen", "Sales Manager", "Lyngbysild Fiskebakken 10", "Lyngby", None,
     "2800", "Denmark"),
    (22, "Zaanse Snoepfabriek", "Dirk Luchte", "Accounting Manager", "Verkoop Rijnweg 22", "Zaandam", None,
     "9999 ZZ", "Netherlands"),
    (23, "Karkki Oy", "Anne Heikkonen", "Product Manager", "Valtakatu 12", "Lappeenranta", None, "53120",
     "Finland"),
    (24, "G'day, Mate", "Wendy Mackenzie", "Sales Representative", "170 Prince Edward Parade Hunter's Hill",
     "Sydney", "NSW", "2042", "Australia"),
    (25, "Ma Maison", "Jean-Guy Lauzon", "Marketing Manager", "2960 Rue St. Laurent", "Montréal", "Québec",
     "H1J 1C3", "Canada"),
    (26, "Pasta Buttini s.r.l.", "Giovanni Giudici", "Order Administrator", "Via dei Gelsomini, 153",
     "Salerno", None, "84100", "Italy"),
    (27, "Escargots Nouveaux", "Marie Delamare", "Sales Manager", "22, rue H. Voiron", "Montceau", None,
     "71300", "France"),
    (28, "Gai pâturage", "Eliane Noz", "Sales Representative", "Bat. B 3, rue des Alpes", "Annecy", None,
     "74000", "France"),
    (29, "Forêts d'érables", "Chantal Goulet", "Accounting Manager", "148 rue Chasseur", "Ste-Hyacinthe",
     "Québec", "J2S 7S8", "Canada"),
)

# (ProductID, ProductName, SupplierID, CategoryID, QuantityPerUnit, UnitPrice, Discontinued)
PRODUCTS: tuple[Row, ...] = (
    (1, "Chai", 1, 1, "10 boxes x 20 bags", "18.00", 0),
    (2, "Chang", 1, 1, "24 - 12 oz bottles", "19.00", 0),
    (3, "Aniseed Syrup", 1, 2, "12 - 550 ml bottles", "10.00", 0),
    (4, "Chef Anton's Cajun Seasoning", 2, 2, "48 - 6 oz jars", "22.00", 0),
    (5, "Chef Anton's Gumbo Mix", 2, 2, "36 boxes", "21.35", 1),
    (6, "Grandma's Boysenberry Spread", 3, 2, "12 - 8 oz jars", "25.00", 0),
    (7, "Uncle Bob's Organic Dried Pears", 3, 7, "12 - 1 lb pkgs.", "30.00", 0),
    (8, "Northwoods Cranberry Sauce", 3, 2, "12 - 12 oz jars", "40.00", 0),
    (9, "Mishi Kobe Niku", 4, 6, "18 - 500 g pkgs.", "97.00", 1),
    (10, "Ikura", 4, 8, "12 - 200 ml jars", "31.00", 0),
    (11, "Queso Cabrales", 5, 4, "1 kg pkg.", "21.00", 0),
    (12, "Queso Manchego La Pastora", 5, 4, "10 - 500 g pkgs.", "38.00", 0),
    (13, "Konbu", 6, 8, "2 kg box", "6.00", 0),
    (14, "Tofu", 6, 7, "40 - 100 g pkgs.", "23.25", 0),
    (15, "Genen Shouyu", 6, 2, "24 - 250 ml bottles", "15.50", 0),
    (16, "Pavlova", 7, 3, "32 - 500 g boxes", "17.45", 0),
    (17, "Alice Mutton", 7, 6, "20 - 1 kg tins", "39.00", 1),
    (18, "Carnarvon Tigers", 7, 8, "16 kg pkg.", "62.50", 0),
    (19, "Teatime Chocolate Biscuits", 8, 3, "10 boxes x 12 pieces", "9.20", 0),
    (20, "Sir Rodney's Marmalade", 8, 3, "30 gift boxes", "81.00", 0),
    (21, "Sir Rodney's Scones", 8, 3, "24 pkgs. x 4 pieces", "10.00", 0),
    (22, "Gustaf's Knäckebröd", 9, 5, "24 - 500 g pkgs.", "21.00", 0),
    (23, "Tunnbröd", 9, 5, "12 - 250 g pkgs.", "9.00", 0),
    (24, "Guaraná Fantástica", 10, 1, "12 - 355 ml cans", "4.50", 1),
    (25, "NuNuCa Nuß-Nougat-Creme", 11, 3, "20 - 450 g glasses", "14.00", 0),
    (26, "Gumbär Gummibärchen", 11, 3, "100 - 250 g bags", "31.23", 0),
    (27, "Schoggi Schokolade", 11, 3, "100 - 100 g pieces", "43.90", 0),
    (28, "Rössle Sauerkraut", 12, 7, "25 - 825 g cans", "45.60", 1),
    (29, "Thüringer Rostbratwurst", 12, 6, "50 bags x 30 sausgs.", "123.79", 1),
    (30, "Nord-Ost Matjeshering", 13, 8, "10 - 200 g glasses", "25.89", 0),
    (31, "Gorgonzola Telino", 14, 4, "12 - 100 g pkgs", "12.50", 0),
    (32, "Mascarpone Fabioli", 14, 4, "24 - 200 g pkgs.", "32.00", 0),
    (33, "Geitost", 15, 4, "500 g", "2.50", 0),
    (34, "Sasquatch Ale", 16, 1, "24 - 12 oz bottles", "14.00", 0),
    (35, "Steeleye Stout", 16, 1, "24 - 12 oz bottles", "18.00", 0),
    (36, "Inlagd Sill", 17, 8, "24 - 250 g jars", "19.00", 0),
    (37, "Gravad lax", 17, 8, "12 - 500 g pkgs.", "26.00", 0),
    (38, "Côte de Blaye", 18, 1, "12 - 75 cl bottles", "263.50", 0),
    (39, "Chartreuse verte", 18, 1, "750 cc per bottle", "18.00", 0),
    (40, "Boston Crab Meat", 19, 8, "24 - 4 oz tins", "18.40", 0),
    (41, "Jack's New England Clam Chowder", 19, 8, "12 - 12 oz cans", "9.65", 0),
    (42, "Singaporean Hokkien Fried Mee", 20, 5, "32 - 1 kg pkgs.", "14.00", 1),
    (43, "Ipoh Coffee", 20, 1, "16 - 500 g tins", "46.00", 0),
    (44, "Gula Malacca", 20, 2, "20 - 2 kg bags", "19.45", 0),
    (45, "Rogede sild", 21, 8, "1k pkg.", "9.50", 0),
    (46, "Spegesild", 21, 8, "4 - 450 g glasses", "12.00", 0),
    (47, "Zaanse koeken", 22, 3, "10 - 4 oz boxes", "9.50", 0),
    (48, "Chocolade", 22, 3, "10 pkgs.", "12.75", 0),
    (49, "Maxilaku", 23, 3, "24 - 50 g pkgs.", "20.00", 0),
    (50, "Valkoinen suklaa", 23, 3, "12 - 100 g bars", "16.25", 0),
    (51, "Manjimup Dried Apples", 24, 7, "50 - 300 g pkgs.", "53.00", 0),
    (52, "Filo Mix", 24, 5, "16 - 2 kg boxes", "7.00", 0),
    (53, "Perth Pasties", 24, 6, "48 pieces", "32.80", 1),
    (54, "Tourtière", 25, 6, "16 pies", "7.45", 0),
    (55, "Pâté chinois", 25, 6, "24 boxes x 2 pies", "24.00", 0),
    (56, "Gnocchi di nonna Alice", 26, 5, "24 - 250 g pkgs.", "38.00", 0),
    (57, "Ravioli Angelo", 26, 5, "24 - 250 g pkgs.", "19.50", 0),
    (58, "Escargots de Bourgogne", 27, 8, "24 pieces", "13.25", 0),
    (59, "Raclette Courdavault", 28, 4, "5 kg pkg.", "55.00", 0),
    (60, "Camembert Pierrot", 28, 4, "15 - 300 g rounds", "34.00", 0),
    (61, "Sirop d'érable", 29, 2, "24 - 500 ml bottles", "28.50", 0),
    (62, "Tarte au sucre", 29, 3, "48 pies", "49.30", 0),
    (63, "Vegie-spread", 7, 2, "15 - 625 g jars", "43.90", 0),
    (64, "Wimmers gute Semmelknödel", 12, 5, "20 bags x 4 pieces", "33.25", 0),
    (65, "Louisiana Fiery Hot Pepper Sauce", 2, 2, "32 - 8 oz bottles", "21.05", 0),
    (66, "Louisiana Hot Spiced Okra", 2, 2, "24 - 8 oz jars", "17.00", 0),
    (67, "Laughing Lumberjack Lager", 16, 1, "24 - 12 oz bottles", "14.00", 0),
    (68, "Scottish Longbreads", 8, 3, "10 boxes x 8 pieces", "12.50", 0),
    (69, "Gudbrandsdalsost", 15, 4, "10 kg pkg.", "36.00", 0),
    (70, "Outback Lager", 7, 1, "24 - 355 ml bottles", "15.00", 0),
    (71, "Flotemysost", 15, 4, "10 - 500 g pkgs.", "21.50", 0),
    (72, "Mozzarella di Giovanni", 14, 4, "24 - 200 g pkgs.", "34.80", 0),
    (73, "Röd Kaviar", 17, 8, "24 - 150 g jars", "15.00", 0),
    (74, "Longlife Tofu", 4, 7, "5 kg pkg.", "10.00", 0),
    (75, "Rhönbräu Klosterbier", 12, 1, "24 - 0.5 l bottles", "7.75", 0),
    (76, "Lakkalikööri", 23, 1, "500 ml", "18.00", 0),
    (77, "Original Frankfurter grüne Soße", 12, 2, "12 boxes", "13.00", 0),
)

# (CustomerID, CompanyName, ContactName, ContactTitle, Address, City, Region, PostalCode, Country)
CUSTOMERS: tuple[Row, ...] = (
    ("ALFKI", "Alfreds Futterkiste", "Maria Anders", "Sales Representative", "Obere Str. 57", "Berlin",
     None, "12209", "Germany"),
    ("ANATR", "Ana Trujillo Emparedados y helados", "Ana Trujillo", "Owner", "Avda. de la Constitución 2222",
     "México D.F.", None, "05021", "Mexico"),
    ("ANTON", "Antonio Moreno Taquería", "Antonio Moreno", "Owner", "Mataderos 2312", "México D.F.", None,
     "05023", "Mexico"),
    ("AROUT", "Around the Horn", "Thomas Hardy", "Sales Representative", "120 Hanover Sq.", "London", None,
     "WA1 1DP", "UK"),
    ("BERGS", "Berglunds snabbköp", "Christina Berglund", "Order Administrator", "Berguvsvägen 8", "Luleå",
     None, "S-958 22", "Sweden"),
    ("BLAUS", "Blauer See Delikatessen", "Hanna Moos", "Sales Representative", "Forsterstr. 57",
     "Mannheim", None, "68306", "Germany"),
    ("BLONP", "Blondesddsl père et fils", "Frédérique Citeaux", "Marketing Manager", "24, place Kléber",
     "Strasbourg", None, "67000", "France"),
    ("BOLID", "Bólido Comidas preparadas", "Martín Sommer", "Owner", "C/ Araquil, 67", "Madrid", None,
     "28023", "Spain"),
    ("BONAP", "Bon app'", "Laurence Lebihan", "Owner", "12, rue des Bouchers", "Marseille", None, "13008",
     "France"),
    ("BOTTM", "Bottom-Dollar Markets", "Elizabeth Lincoln", "Accounting Manager", "23 Tsawassen Blvd.",
     "Tsawassen", "BC", "T2F 8M4", "Canada"),
    ("BSBEV", "B's Beverages", "Victoria Ashworth", "Sales Representative", "Fauntleroy Circus", "London",
     None, "EC2 5NT", "UK"),
    ("CACTU", "Cactus Comidas para llevar", "Patricio Simpson", "Sales Agent", "Cerrito 333",
     "Buenos Aires", None, "1010", "Argentina"),
    ("CENTC", "Centro comercial Moctezuma", "Francisco Chang", "Marketing Manager",
     "Sierras de Granada 9993", "México D.F.", None, "05022", "Mexico"),
    ("CHOPS", "Chop-suey Chinese", "Yang Wang", "Owner", "Hauptstr. 29", "Bern", "", "3012", "Switzerland"),
    ("COMMI", "Comércio Mineiro", "Pedro Afonso", "Sales Associate", "Av. dos Lusíadas, 23", "São Paulo",
     "SP", "05432-043", "Brazil"),
    ("CONSH", "Consolidated Holdings", "Elizabeth Brown", "Sales Representative",
     "Berkeley Gardens 12 Brewery", "London", None, "WX1 6LT", "UK"),
    ("DRACD", "Drachenblut Delikatessen", "Sven Ottlieb", "Order Administrator", "Walserweg 21", "Aachen",
     None, "52066", "Germany"),
    ("DUMON", "Du monde entier", "Janine Labrune", "Owner", "67, rue des Cinquante Otages", "Nantes", None,
     "44000", "France"),
    ("EASTC", "Eastern Connection", "Ann Devon", "Sales Agent", "35 King George", "London", None, "WX3 6FW",
     "UK"),
    ("ERNSH", "Ernst Handel", "Roland Mendel", "Sales Manager", "Kirchgasse 6", "Graz", None, "8010",
     "Austria"),
    ("FAMIA", "Familia Arquibaldo", "Aria Cruz", "Marketing Assistant", "Rua Orós, 92", "São Paulo", "SP",
     "05442-030", "Brazil"),
    ("FISSA", "FISSA Fabrica Inter. Salchichas S.A.", "Diego Roel", "Accounting Manager",
     "C/ Moralzarzal, 86", "Madrid", None, "28034", "Spain"),
    ("FOLIG", "Folies gourmandes", "Martine Rancé", "Assistant Sales Agent", "184, chaussée de Tournai",
     "Lille", None, "59000", "France"),
    ("FOLKO", "Folk och fä HB", "Maria Larsson", "Owner", "Åkergatan 24", "Bräcke", None, "S-844 67",
     "Sweden"),
    ("FRANK", "Frankenversand", "Peter Franken", "Marketing Manager", "Berliner Platz 43", "München", None,
     "80805", "Germany"),
    ("FRANR", "France restauration", "Carine Schmitt", "Marketing Manager", "54, rue Royale", "Nantes",
     None, "44000", "France"),
    ("FRANS", "Franchi S.p.A.", "Paolo Accorti", "Sales Representative", "Via Monte Bianco 34", "Torino",
     None, "10100", "Italy"),
    ("FURIB", "Furia Bacalhau e Frutos do Mar", "Lino Rodriguez", "Sales Manager",
     "Jardim das rosas n. 32", "Lisboa", None, "1675", "Portugal"),
    ("GALED", "Galería del gastrónomo", "Eduardo Saavedra", "Marketing Manager",
     "Rambla de Cataluña, 23", "Barcelona", None, "08022", "Spain"),
    ("GODOS", "Godos Cocina Típica", "José Pedro Freyre", "Sales Manager", "C/ Romero, 33", "Sevilla",
     None, "41101", "Spain"),
    ("GOURL", "Gourmet Lanchonetes", "André Fonseca", "Sales Associate", "Av. Brasil, 442", "Campinas",
     "SP", "04876-786", "Brazil"),
    ("GREAL", "Great Lakes Food Market", "Howard Snyder", "Marketing Manager", "2732 Baker Blvd.",
     "Eugene", "OR", "97403", "USA"),
    ("GROSR", "GROSELLA-Restaurante", "Manuel Pereira", "Owner", "5a Ave. Los Palos Grandes", "Caracas",
     "DF", "1081", "Venezuela"),
    ("HANAR", "Hanari Carnes", "Mario Pontes", "Accounting Manager", "Rua do Paço, 67", "Rio de Janeiro",
     "RJ", "05454-876", "Brazil"),
    ("HILAA", "HILARION-Abastos", "Carlos Hernández", "Sales Representative",
     "Carrera 22 con Ave. Carlos Soublette #8-35", "San Cristóbal", "Táchira", "5022", "Venezuela"),
    ("HUNGC", "Hungry Coyote Import Store", "Yoshi Latimer", "Sales Representative",
     "City Center Plaza 516 Main St.", "Elgin", "OR", "97827", "USA"),
    ("HUNGO", "Hungry Owl All-Night Grocers", "Patricia McKenna", "Sales Associate", "8 Johnstown Road",
     "Cork", "Co. Cork", None, "Ireland"),
    ("ISLAT", "Island Trading", "Helen Bennett", "Marketing Manager", "Garden House Crowther Way", "Cowes",
     "Isle of Wight", "PO31 7PJ", "UK"),
    ("KOENE", "Königlich Essen", "Philip Cramer", "Sales Associate", "Maubelstr. 90", "Brandenburg", None,
     "14776", "Germany"),
    ("LACOR", "La corne d'abondance", "Daniel Tonini", "Sales Representative", "67, avenue de l'Europe",
     "Versailles", None, "78000", "France"),
    ("LAMAI", "La maison d'Asie", "Annette Roulet", "Sales Manager", "1 rue Alsace-Lorraine", "Toulouse",
     None, "31000", "France"),
    ("LAUGB", "Laughing Bacchus Wine Cellars", "Yoshi Tannamuri", "Marketing Assistant", "1900 Oak St.",
     "Vancouver", "BC", "V3F 2K1", "Canada"),
    ("LAZYK", "Lazy K Kountry Store", "John Steel", "Marketing Manager", "12 Orchestra Terrace",
     "Walla Walla", "WA", "99362", "USA"),
    ("LEHMS", "Lehmanns Marktstand", "Renate Messner", "Sales Representative", "Magazinweg 7",
     "Frankfurt a.M.", None, "60528", "Germany"),
    ("LETSS", "Let's Stop N Shop", "Jaime Yorres", "Owner", "87 Polk St. Suite 5", "San Francisco", "CA",
     "94117", "USA"),
    ("LILAS", "LILA-Supermercado", "Carlos González", "Accounting Manager",
     "Carrera 52 con Ave. Bolívar #65-98 Llano Largo", "Barquisimeto", "Lara", "3508", "Venezuela"),
    ("LINOD", "LINO-Delicateses", "Felipe Izquierdo", "Owner", "Ave. 5 de Mayo Porlamar", "I. de Margarita",
     "Nueva Esparta", "4980", "Venezuela"),
    ("LONEP", "Lonesome Pine Restaurant", "Fran Wilson", "Sales Manager", "89 Chiaroscuro Rd.", "Portland",
     "OR", "97219", "USA"),
    ("MAGAA", "Magazzini Alimentari Riuniti", "Giovanni Rovelli", "Marketing Manager",
     "Via Ludovico il Moro 22", "Bergamo", None, "24100", "Italy"),
    ("MAISD", "Maison Dewey", "Catherine Dewey", "Sales Agent", "Rue Joseph-Bens 532", "Bruxelles", None,
     "B-1180", "Belgium"),
    ("MEREP", "Mère Paillarde", "Jean Fresnière", "Marketing Assistant", "43 rue St. Laurent", "Montréal",
     "Québec", "H1J 1C3", "Canada"),
    ("MORGK", "Morgenstern Gesundkost", "Alexander Feuer", "Marketing Assistant", "Heerstr. 22", "Leipzig",
     None, "04179", "Germany"),
    ("NORTS", "North/South", "Simon Crowther", "Sales Associate", "South House 300 Queensbridge", "London",
     "", "SW7 1RZ", "UK"),
    ("OCEAN", "Océano Atlántico Ltda.", "Yvonne Moncada", "Sales Agent",
     "Ing. Gustavo Moncada 8585 Piso 20-A", "Buenos Aires", None, "1010", "Argentina"),
    ("OLDWO", "Old World Delicatessen", "Rene Phillips", "Sales Representative", "2743 Bering St.",
     "Anchorage", "AK", "99508", "USA"),
    ("OTTIK", "Ottilies Käseladen", "Henriette Pfalzheim", "Owner", "Mehrheimerstr. 369", "Köln", None,
     "50739", "Germany"),
    ("PARIS", "Paris spécialités", "Marie Bertrand", "Owner", "265, boulevard Charonne", "Paris", None,
     "75012", "France"),
    ("PERIC", "Pericles Comidas clásicas", "Guillermo Fernández", "Sales Representative",
     "Calle Dr. Jorge Cash 321", "México D.F.", None, "05033", "Mexico"),
    ("PICCO", "Piccolo und mehr", "Georg Pipps", "Sales Manager", "Geislweg 14", "Salzburg", None, "5020",
     "Austria"),
    ("PRINI", "Princesa Isabel Vinhos", "Isabel de Castro", "Sales Representative",
     "Estrada da saúde n. 58", "Lisboa", None, "1756", "Portugal"),
    ("QUEDE", "Que Delícia", "Bernardo Batista", "Accounting Manager", "Rua da Panificadora, 12",
     "Rio de Janeiro", "RJ", "02389-673", "Brazil"),
    ("QUEEN", "Queen Cozinha", "Lúcia Carvalho", "Marketing Assistant", "Alameda dos Canàrios, 891",
     "São Paulo", "SP", "05487-020", "Brazil"),
    ("QUICK", "QUICK-Stop", "Horst Kloss", "Accounting Manager", "Taucherstraße 10", "Cunewalde", None,
     "01307", "Germany"),
    ("RANCH", "Rancho grande", "Sergio Gutiérrez", "Sales Representative", "Av. del Libertador 900",
     "Buenos Aires", None, "1010", "Argentina"),
    ("RATTC", "Rattlesnake Canyon Grocery", "Paula Wilson", "Assistant Sales Representative",
     "2817 Milton Dr.", "Albuquerque", "NM", "87110", "USA"),
    ("REGGC", "Reggiani Caseifici", "Maurizio Moroni", "Sales Associate", "Strada Provinciale 124",
     "Reggio Emilia", None, "42100", "Italy"),
    ("RICAR", "Ricardo Adocicados", "Janete Limeira", "Assistant Sales Agent", "Av. Copacabana, 267",
     "Rio de Janeiro", "RJ", "02389-890", "Brazil"),
    ("RICSU", "Richter Supermarkt", "Michael Holz", "Sales Manager", "Grenzacherweg 237", "Genève", None,
     "1203", "Switzerland"),
    ("ROMEY", "Romero y tomillo", "Alejandra Camino", "Accounting Manager", "Gran Vía, 1", "Madrid", None,
     "28001", "Spain"),
    ("SANTG", "Santé Gourmet", "Jonas Bergulfsen", "Owner", "Erling Skakkes gate 78", "Stavern", None,
     "4110", "Norway"),
    ("SAVEA", "Save-a-lot Markets", "Jose Pavarotti", "Sales Representative", "187 Suffolk Ln.", "Boise",
     "ID", "83720", "USA"),
    ("SEVES", "Seven Seas Imports", "Hari Kumar", "Sales Manager", "90 Wadhurst Rd.", "London", None,
     "OX15 4NB", "UK"),
    ("SIMOB", "Simons bistro", "Jytte Petersen", "Owner", "Vinbæltet 34", "København", "", "1734",
     "Denmark"),
    ("SPECD", "Spécialités du monde", "Dominique Perrier", "Marketing Manager", "25, rue Lauriston",
     "Paris", None, "75016", "France"),
    ("SPLIR", "Split Rail Beer & Ale", "Art Braunschweiger", "Sales Manager", "P.O. Box 555", "Lander",
     "WY", "82520", "USA"),
    ("SUPRD", "Suprêmes délices", "Pascale Cartrain", "Accounting Manager", "Boulevard Tirou, 255",
     "Charleroi", None, "B-6000", "Belgium"),
    ("THEBI", "The Big Cheese", "Liz Nixon", "Marketing Manager", "89 Jefferson Way Suite 2", "Portland",
     "OR", "97201", "USA"),
    ("THECR", "The Cracker Box", "Liu Wong", "Marketing Assistant", "55 Grizzly Peak Rd.", "Butte", "MT",
     "59801", "USA"),
    ("TOMSP", "Toms Spezialitäten", "Karin Josephs", "Marketing Manager", "Luisenstr. 48", "Münster", None,
     "44087", "Germany"),
    ("TORTU", "Tortuga Restaurante", "Miguel Angel Paolino", "Owner", "Avda. Azteca 123", "México D.F.",
     None, "05033", "Mexico"),
    ("TRADH", "Tradição Hipermercados", "Anabela Domingues", "Sales Representative",
     "Av. Inês de Castro, 414", "São Paulo", "SP", "05634-030", "Brazil"),
    ("TRAIH", "Trail's Head Gourmet Provisioners", "Helvetius Nagy", "Sales Associate",
     "722 DaVinci Blvd.", "Kirkland", "WA", "98034", "USA"),
    ("VAFFE", "Vaffeljernet", "Palle Ibsen", "Sales Manager", "Smagsloget 45", "Århus", None, "8200",
     "Denmark"),
    ("VICTE", "Victuailles en stock", "Mary Saveley", "Sales Agent", "2, rue du Commerce", "Lyon", None,
     "69004", "France"),
    ("VINET", "Vins et alcools Chevalier", "Paul Henriot", "Accounting Manager", "59 rue de l'Abbaye",
     "Reims", None, "51100", "France"),
    ("WANDK", "Die Wandernde Kuh", "Rita Müller", "Sales Representative", "Adenauerallee 900", "Stuttgart",
     None, "70563", "Germany"),
    ("WARTH", "Wartian Herkku", "Pirkko Koskitalo", "Accounting Manager", "Torikatu 38", "Oulu", None,
     "90110", "Finland"),
    ("WELLI", "Wellington Importadora", "Paula Parente", "Sales Manager", "Rua do Mercado, 12", "Resende",
     "SP", "08737-363", "Brazil"),
    ("WHITC", "White Clover Markets", "Karl Jablonski", "Owner", "305 - 14th Ave. S. Suite 3B", "Seattle",
     "WA", "98128", "USA"),
    ("WILMK", "Wilman Kala", "Matti Karttunen", "Owner/Marketing Assistant", "Keskuskatu 45", "Helsinki",
     None, "21240", "Finland"),
    ("WOLZA", "Wolski Zajazd", "Zbyszek Piestrzeniewicz", "Owner", "ul. Filtrowa 68", "Warszawa", "",
     "01-012", "Poland"),
)
# Like Northwind, two customers never order anything.
CUSTOMERS_WITHOUT_ORDERS = frozenset({"FISSA", "PARIS"})

# (EmployeeID, LastName, FirstName, Title, TitleOfCourtesy, BirthDate, HireDate, Address, City, Region,
#  PostalCode, Country, HomePhone, ReportsTo)
EMPLOYEES: tuple[Row, ...] = (
    (1, "Davolio", "Nancy", "Sales Representative", "Ms.", datetime(1948, 12, 8), datetime(1992, 5, 1),
     "507 - 20th Ave. E. Apt. 2A", "Seattle", "WA", "98122", "USA", "(206) 555-9857", 2),
    (2, "Fuller", "Andrew", "Vice President, Sales", "Dr.", datetime(1952, 2, 19), datetime(1992, 8, 14),
     "908 W. Capital Way", "Tacoma", "WA", "98401", "USA", "(206) 555-9482", None),
    (3, "Leverling", "Janet", "Sales Representative", "Ms.", datetime(1963, 8, 30), datetime(1992, 4, 1),
     "722 Moss Bay Blvd.", "Kirkland", "WA", "98033", "USA", "(206) 555-3412", 2),
    (4, "Peacock", "Margaret", "Sales Representative", "Mrs.", datetime(1937, 9, 19), datetime(1993, 5, 3),
     "4110 Old Redmond Rd.", "Redmond", "WA", "98052", "USA", "(206) 555-8122", 2),
    (5, "Buchanan", "Steven", "Sales Manager", "Mr.", datetime(1955, 3, 4), datetime(1993, 10, 17),
     "14 Garrett Hill", "London", None, "SW1 8JR", "UK", "(71) 555-4848", 2),
    (6, "Suyama", "Michael", "Sales Representative", "Mr.", datetime(1963, 7, 2), datetime(1993, 10, 17),
     "Coventry House Miner Rd.", "London", None, "EC2 7JR", "UK", "(71) 555-7773", 5),
    (7, "King", "Robert", "Sales Representative", "Mr.", datetime(1960, 5, 29), datetime(1994, 1, 2),
     "Edgeham Hollow Winchester Way", "London", None, "RG1 9SP", "UK", "(71) 555-5598", 5),
    (8, "Callahan", "Laura", "Inside Sales Coordinator", "Ms.", datetime(1958, 1, 9), datetime(1994, 3, 5),
     "4726 - 11th Ave. N.E.", "Seattle", "WA", "98105", "USA", "(206) 555-1189", 2),
    (9, "Dodsworth", "Anne", "Sales Representative", "Ms.", datetime(1966, 1, 27), datetime(1994, 11, 15),
     "7 Houndstooth Rd.", "London", "", "WG2 7LT", "UK", "(71) 555-4444", 5),
)
# How busy each employee is; the managers sell less.
EMPLOYEE_WEIGHTS = (123, 96, 127, 156, 42, 67, 72, 104, 43)

SHIPPERS: tuple[Row, ...] = (
    (1, "Speedy Express", "(503) 555-9831"),
    (2, "United Package", "(503) 555-3199"),
    (3, "Federal Shipping", "(503) 555-9931"),
)
# fmt: on


def create_demo_database(path: str, *, orders: int = 3000, seed: int = 7) -> dict[str, int]:
    """Create (or replace) the SQLite file at `path` with the Northwind-like Demo database.

    Returns {table_name: row_count} for every table created. The same `orders` and `seed` always give
    the same content. The file is written under a temporary name in the same directory and moved into
    place when complete; the parent directory is created if missing.
    """
    if orders < 0:
        raise ValueError(f"orders must be zero or more, not {orders}")
    target = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        os.chmod(temporary, 0o644)  # mkstemp makes it private; the demo database is meant to be shared
        rows = _generate(random.Random(seed), orders)  # noqa: S311 - demo data, not security
        _write(temporary, rows)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise
    return {table: len(rows[table]) for table in TABLES}


def _money(value: Decimal | str) -> str:
    return str(Decimal(value).quantize(CENTS))


def _timestamp(value: datetime) -> str:
    return value.strftime(TIMESTAMP_FORMAT)


def _phone(rng: random.Random) -> str:
    return f"({rng.randint(1, 999)}) 555-{rng.randint(0, 9999):04d}"


def _generate(rng: random.Random, order_count: int) -> dict[str, list[Row]]:
    """Every table's rows, in TABLES order, all drawn from `rng` in a fixed sequence."""
    suppliers = [(*supplier, _phone(rng)) for supplier in SUPPLIERS]

    products: list[Row] = []
    for product_id, name, supplier_id, category_id, per_unit, price, discontinued in PRODUCTS:
        in_stock = 0 if discontinued and rng.random() < 0.5 else rng.randint(0, 125)
        reorder_level = rng.choice((0, 0, 5, 10, 15, 20, 25, 30))
        on_order = rng.choice((10, 20, 30, 40, 50, 60, 70, 80, 100)) if in_stock <= reorder_level else 0
        if discontinued:
            on_order = 0
        stock = (in_stock, on_order, reorder_level, discontinued)
        products.append((product_id, name, supplier_id, category_id, per_unit, _money(price), *stock))

    customers: list[Row] = []
    for customer in CUSTOMERS:
        phone = _phone(rng)
        fax = _phone(rng) if rng.random() < 0.7 else None
        customers.append((*customer, phone, fax))

    employees = [
        (*employee[:5], _timestamp(employee[5]), _timestamp(employee[6]), *employee[7:]) for employee in EMPLOYEES
    ]

    orders, details = _generate_orders(rng, order_count, customers)
    return {
        "Categories": list(CATEGORIES),
        "Suppliers": suppliers,
        "Products": products,
        "Customers": customers,
        "Employees": employees,
        "Shippers": list(SHIPPERS),
        "Orders": orders,
        "Order Details": details,
    }


def _generate_orders(rng: random.Random, order_count: int, customers: Sequence[Row]) -> tuple[list[Row], list[Row]]:
    """Orders in date order from 10248, each with 1-5 distinct products; unshipped ones at the end."""
    buyers = [customer for customer in customers if customer[0] not in CUSTOMERS_WITHOUT_ORDERS]
    # A few big customers, many small ones.
    buyer_weights = [rng.lognormvariate(0, 0.7) for _ in buyers]
    employee_ids = [employee[0] for employee in EMPLOYEES]
    product_ids = [product[0] for product in PRODUCTS]
    list_prices = {product[0]: Decimal(product[5]) for product in PRODUCTS}
    price_rise = datetime(1997, 1, 1)  # before it, Northwind's prices were about 20% lower

    span_days = (ORDERS_UNTIL - ORDERS_FROM).days
    placed = sorted(
        ORDERS_FROM
        + timedelta(days=rng.randint(0, span_days), seconds=rng.randint(8 * 3600, 18 * 3600 - 1))
        + timedelta(microseconds=rng.randint(0, 999_999))
        for _ in range(order_count)
    )

    orders: list[Row] = []
    details: list[Row] = []
    for order_id, order_date in enumerate(placed, start=FIRST_ORDER_ID):
        customer = rng.choices(buyers, weights=buyer_weights)[0]
        employee_id = rng.choices(employee_ids, weights=EMPLOYEE_WEIGHTS)[0]
        ship_via = rng.choice((1, 1, 2, 2, 2, 3, 3))
        required_days = rng.choices((28, 14, 42), weights=(85, 10, 5))[0]
        required = order_date.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=required_days)
        lead_days = min(int(rng.expovariate(1 / 7)) + 1, 37)
        shipped_at = order_date + timedelta(days=lead_days, seconds=rng.randint(-4 * 3600, 4 * 3600))
        shipped = _timestamp(shipped_at) if shipped_at <= ORDERS_UNTIL else None
        freight = _money(Decimal(min(int(rng.expovariate(1 / 7800)), 100_000) + 2) / 100)
        dates = (_timestamp(order_date), _timestamp(required), shipped)
        # Ship to the customer's own name and address: CompanyName, then Address .. Country.
        ship_to = (customer[1], *customer[4:9])
        orders.append((order_id, customer[0], employee_id, *dates, ship_via, freight, *ship_to))

        for product_id in sorted(rng.sample(product_ids, rng.randint(1, 5))):
            price = list_prices[product_id]
            if order_date < price_rise:
                price = price * Decimal("0.8")
            quantity = rng.randint(1, 60) if rng.random() < 0.9 else rng.randint(60, 130)
            discount = rng.choices(DISCOUNTS, weights=DISCOUNT_WEIGHTS)[0]
            details.append((order_id, product_id, _money(price), quantity, discount))
    return orders, details


def _write(path: str, rows: dict[str, list[Row]]) -> None:
    """Create the tables and insert every row in one transaction, then check the foreign keys."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        # The file is private until it is moved into place, so a crash only leaves a temporary file.
        connection.execute("PRAGMA journal_mode = OFF")
        connection.execute("PRAGMA synchronous = OFF")
        connection.execute("BEGIN")
        for table in TABLES:
            connection.execute(SCHEMA[table])
            if rows[table]:
                marks = ", ".join("?" * len(rows[table][0]))
                connection.executemany(f'INSERT INTO "{table}" VALUES ({marks})', rows[table])
        connection.execute("COMMIT")
        broken = connection.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise RuntimeError(f"demo data breaks {len(broken)} foreign key(s), first: {broken[0]}")
    finally:
        connection.close()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def simulate_activity(path: str, *, seed: int | None = None) -> dict[str, int]:
    """A minute of trading on the Demo database: a few new orders, shipped orders, a cancellation.

    The demo schedules this every minute so that its snapshots have changes to replicate."""
    rng = random.Random(seed)  # noqa: S311 - demo data, not secrets
    now = datetime.now(UTC).replace(tzinfo=None)
    connection = sqlite3.connect(path, timeout=30)
    try:
        with connection:
            customers = [r[0] for r in connection.execute("SELECT CustomerID FROM Customers")]
            products = connection.execute("SELECT ProductID, UnitPrice FROM Products WHERE Discontinued = 0").fetchall()
            next_id = (connection.execute("SELECT MAX(OrderID) FROM Orders").fetchone()[0] or 10247) + 1
            created = rng.randint(1, 4)
            for order_id in range(next_id, next_id + created):
                connection.execute(
                    'INSERT INTO Orders (OrderID, CustomerID, EmployeeID, OrderDate, RequiredDate, ShipVia, Freight, '
                    "ShipName, ShipCountry) VALUES (?, ?, ?, ?, ?, ?, ?, 'Demo buyer', 'Germany')",
                    (order_id, rng.choice(customers), rng.randint(1, 9), _timestamp(now),
                     _timestamp(now + timedelta(days=14)), rng.randint(1, 3),
                     _money(Decimal(rng.randint(100, 9000)) / 100)),
                )  # fmt: skip
                for product_id, price in rng.sample(products, rng.randint(1, 3)):
                    connection.execute(
                        'INSERT INTO "Order Details" (OrderID, ProductID, UnitPrice, Quantity, Discount) '
                        "VALUES (?, ?, ?, ?, 0)",
                        (order_id, product_id, price, rng.randint(1, 40)),
                    )
            shipped = connection.execute(
                "UPDATE Orders SET ShippedDate = ? WHERE OrderID IN "
                "(SELECT OrderID FROM Orders WHERE ShippedDate IS NULL ORDER BY OrderID LIMIT 2)",
                (_timestamp(now),),
            ).rowcount
            cancelled = 0
            if rng.random() < 0.3:
                victim = connection.execute(
                    "SELECT MAX(OrderID) FROM Orders WHERE ShippedDate IS NULL AND OrderID < ?", (next_id,)
                ).fetchone()[0]
                if victim is not None:
                    connection.execute('DELETE FROM "Order Details" WHERE OrderID = ?', (victim,))
                    cancelled = connection.execute("DELETE FROM Orders WHERE OrderID = ?", (victim,)).rowcount
    finally:
        connection.close()
    return {"created": created, "shipped": shipped, "cancelled": cancelled}


HOT_PRODUCTS = 6  # the products every copy reprices: two copies change the same row often, so syncs meet conflicts
CONTESTED_EVERY = 3  # minutes: in these, every copy reprices the first hot product, so a conflict is sure to come


def reprice(path: str, *, seed: int | None = None, contested: bool = False) -> int:
    """Change the price of one or two of the hot products on a copy of the product list (the publisher or a
    subscriber of the demo's bi-directional publication); a copy that is not there yet is left alone. The
    publisher and the branch reprice the same few products, so the conflict inbox fills within minutes;
    `contested`: the first hot product is among them (every copy repricing it in the same minute makes the
    next sync meet a conflict for certain, not by chance)."""
    rng = random.Random(seed)  # noqa: S311 - demo data, not secrets
    connection = sqlite3.connect(path, timeout=30)
    try:
        with connection:
            tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "Products" not in tables:
                return 0
            ids = [
                r[0]
                for r in connection.execute(
                    "SELECT ProductID FROM Products WHERE Discontinued = 0 ORDER BY ProductID LIMIT ?", (HOT_PRODUCTS,)
                )
            ]
            changed = 0
            chosen = rng.sample(ids, min(len(ids), rng.randint(1, 2)))
            if contested and ids and ids[0] not in chosen:
                chosen.append(ids[0])
            for product_id in chosen:
                price = _money(Decimal(rng.randint(200, 9000)) / 100)
                changed += connection.execute(
                    "UPDATE Products SET UnitPrice = ? WHERE ProductID = ?", (price, product_id)
                ).rowcount
    finally:
        connection.close()
    return changed
