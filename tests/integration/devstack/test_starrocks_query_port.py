"""The MySQL query port: the DDL/SELECT subset code written for real StarRocks uses."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pymysql
import pytest

from devstack.starrocks.launcher import EmulatorHandle
from tests.integration.devstack.srclient import TxnClient

pytestmark = pytest.mark.integration

DDL = """
CREATE TABLE IF NOT EXISTS `qp`.`orders` (
  `id` BIGINT NOT NULL COMMENT "order id",
  `small` SMALLINT, `tiny` TINYINT, `i` INT, `big` LARGEINT, `flag` BOOLEAN,
  `f` FLOAT, `dbl` DOUBLE, `amount` DECIMAL(20, 4) NOT NULL DEFAULT "0",
  `code` CHAR(3), `name` VARCHAR(64) DEFAULT "n/a" COMMENT 'who', `s` STRING,
  `d` DATE, `ts` DATETIME, `j` JSON
) ENGINE=OLAP
PRIMARY KEY(`id`)
COMMENT "orders"
DISTRIBUTED BY HASH(`id`) BUCKETS 8
PROPERTIES ("replication_num" = "1", "enable_persistent_index" = "true")
"""


def test_ddl_show_desc_and_types(emu: EmulatorHandle) -> None:
    emu.sql("DROP DATABASE IF EXISTS qp")
    emu.sql("CREATE DATABASE qp")
    emu.sql("CREATE DATABASE IF NOT EXISTS qp")
    emu.sql(DDL)
    emu.sql(DDL)  # IF NOT EXISTS
    emu.sql(
        "CREATE TABLE qp.items (oid BIGINT, sku VARCHAR(8)) DUPLICATE KEY(oid) "
        "DISTRIBUTED BY HASH(oid) BUCKETS 2"
    )
    assert ("qp",) in emu.sql("SHOW DATABASES")
    assert emu.sql("SHOW TABLES FROM qp") == [("items",), ("orders",)]
    desc = {r[0]: r for r in emu.sql("DESC qp.orders")}
    assert desc["id"][1:4] == ("bigint(20)", "NO", "true")
    assert desc["amount"][1] == "decimal(20,4)"
    assert desc["name"][1:] == ("varchar(64)", "YES", "false", "n/a", "")
    assert emu.sql("SELECT current_version()") == [("4.0.0-emulator",)]

    c = TxnClient(emu, "qp")
    assert c.call("begin", "l", table="orders").status == "OK"
    row = {
        "id": 1,
        "small": 7,
        "tiny": 1,
        "i": 42,
        "big": 2**70,
        "flag": True,
        "f": 1.5,
        "dbl": 2.25,
        "amount": "12345678.12345",
        "code": "abc",
        "s": "x",
        "d": "2024-02-29",
        "ts": "2024-02-29 23:59:58.5",
        "j": {"a": [1, 2]},
    }
    assert c.load("l", "orders", [row, {"id": 2, "amount": "0.0001"}]).status == "OK"
    assert c.call("commit", "l").status == "OK"
    got = emu.sql("SELECT * FROM qp.orders ORDER BY id")
    assert got[0] == (
        1,
        7,
        1,
        42,
        2**70,
        1,
        1.5,
        2.25,
        Decimal("12345678.1235"),
        "abc",
        "n/a",
        "x",
        dt.date(2024, 2, 29),
        dt.datetime(2024, 2, 29, 23, 59, 58, 500000),
        '{"a":[1,2]}',
    )
    assert got[1][8] == Decimal("0.0001")
    assert got[1][10] == "n/a"
    assert emu.sql("SELECT SUM(amount), COUNT(*) FROM qp.orders") == [(Decimal("12345678.1236"), 2)]


def test_selects_joins_groups_and_use(emu: EmulatorHandle) -> None:
    emu.sql("CREATE DATABASE IF NOT EXISTS sel")
    emu.sql(
        "CREATE TABLE sel.a (id INT NOT NULL, g VARCHAR(4), amt DECIMAL(10,2)) "
        "PRIMARY KEY(id) DISTRIBUTED BY HASH(id)"
    )
    emu.sql("CREATE TABLE sel.b (aid INT, tag STRING) DUPLICATE KEY(aid) DISTRIBUTED BY HASH(aid)")
    emu.sql("INSERT INTO sel.a VALUES (1, 'x', 0.10), (2, 'x', 0.20), (3, 'y', 9.99)")
    emu.sql("INSERT INTO sel.b (aid, tag) VALUES (1, 't1'), (1, 't2'), (3, 't3')")
    assert emu.sql("SELECT g, SUM(amt) AS total, COUNT(*) FROM sel.a GROUP BY g ORDER BY g") == [
        ("x", Decimal("0.30"), 2),
        ("y", Decimal("9.99"), 1),
    ]
    assert emu.sql(
        "SELECT `a`.`id`, b.tag FROM `sel`.`a` AS a JOIN sel.b b ON a.id = b.aid "
        "WHERE a.amt < 5 ORDER BY b.tag"
    ) == [(1, "t1"), (1, "t2")]
    assert emu.sql("SELECT id FROM sel.a WHERE amt > 1.5") == [(3,)]
    conn = emu.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("USE sel")
            cur.execute("SELECT COUNT(*) FROM a")
            assert cur.fetchall() == ((3,),)
            cur.execute("SHOW TABLES")
            assert cur.fetchall() == (("a",), ("b",))
            cur.execute("TRUNCATE TABLE b")
            cur.execute("SELECT COUNT(*) FROM sel.b")
            assert cur.fetchall() == ((0,),)
            cur.execute("DROP TABLE b")
            cur.execute("DROP TABLE IF EXISTS b")
            cur.execute("SHOW TABLES FROM sel")
            assert cur.fetchall() == (("a",),)
    finally:
        conn.close()
    conn = emu.connect(database="sel")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM a ORDER BY id DESC LIMIT 1")
            assert cur.fetchall() == ((3,),)
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("statement", "code"),
    [
        ("SELECT * FROM nodb.t", 1049),
        ("SELECT * FROM sel.nope", 1064),
        ("SELEKT 1", 1064),
        ("SELECT nope FROM sel.a", 1064),
        ("CREATE DATABASE sel", 1007),
        ("CREATE TABLE sel.a (id INT) PRIMARY KEY(id)", 1050),
        ("CREATE TABLE sel.z (id WIDGET)", 1064),
        ("DROP TABLE sel.nope", 1051),
        ("USE nodb", 1049),
        ("SELECT * FROM t_without_db", 1046),
    ],
)
def test_bad_sql_is_a_mysql_error(emu: EmulatorHandle, statement: str, code: int) -> None:
    emu.sql("CREATE DATABASE IF NOT EXISTS sel")
    emu.sql("CREATE TABLE IF NOT EXISTS sel.a (id INT NOT NULL) PRIMARY KEY(id)")
    with pytest.raises(pymysql.MySQLError) as ei:
        emu.sql(statement)
    assert ei.value.args[0] == code
    assert emu.sql("SELECT 1") == [(1,)]  # the server survived


def test_wrong_password_rejected(emu: EmulatorHandle) -> None:
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(
            host=emu.host, port=emu.query_port, user="root", password="x", ssl_disabled=True
        )
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(
            host=emu.host, port=emu.query_port, user="bob", password="", ssl_disabled=True
        )
