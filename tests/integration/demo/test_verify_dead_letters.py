"""The verifier's dead-letter accounting against the StarRocks emulator, with hand-made rows."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from demo import verify as verify_cli
from demo.db import ConnectionSettings, connect
from demo.ddl import ORDERS_DDL, apply_file, apply_sql
from demo.model import COLUMNS, TABLES
from demo.truth import GroundTruth
from demo.verify import dead_letters, run
from demo.workload import Workload, WorkloadConfig

pytestmark = pytest.mark.integration

TOPIC = "orders-cdc"

# The sink's dead-letter table (sinks/starrocks/sql.py), in StarRocks DDL.
DEAD_LETTER_DDL = """
CREATE TABLE IF NOT EXISTS `{db}`.`_cdc_dead_letter` (
  topic VARCHAR(255) NOT NULL,
  kafka_partition INT NOT NULL,
  first_offset BIGINT NOT NULL,
  row_seq INT NOT NULL,
  pipeline VARCHAR(128),
  txn_id VARCHAR(255),
  last_offset BIGINT,
  reason VARCHAR(1024),
  payload STRING,
  source_ts_ms BIGINT
) PRIMARY KEY(topic, kafka_partition, first_offset, row_seq)
DISTRIBUTED BY HASH(topic, kafka_partition)
PROPERTIES("replication_num" = "1")
"""

EXPECTED = [
    {
        "kind": "no-begin",
        "txn_id": "demo-s5-bad-000001-no-begin",
        "topic": TOPIC,
        "partition": 0,
        "first_offset": 10,
        "records": 3,
        "sent_records": 3,
    },
    {
        "kind": "undecodable",
        "txn_id": "demo-s5-bad-000002-undecodable",
        "topic": TOPIC,
        "partition": 1,
        "first_offset": 4,
        "records": 5,
        "sent_records": 5,
    },
]


@pytest.fixture
def conn(starrocks_emulator: Any) -> Iterator[Any]:
    c = connect(
        ConnectionSettings(
            host=starrocks_emulator.host,
            port=starrocks_emulator.query_port,
            user=starrocks_emulator.user,
            password=starrocks_emulator.password,
        )
    )
    yield c
    c.close()


def make_truth(dead: list[dict[str, Any]]) -> GroundTruth:
    workload = Workload(WorkloadConfig(orders=8, seed=5), clock=lambda: 1_700_000_000_000)
    for _ in workload.transactions():
        pass
    section: dict[str, Any] = {"expected": {}, "max_txn_rows": None, "transactions": dead}
    return GroundTruth(
        "demo", workload.final_rows(), workload.counts().to_dict(), {"topic": TOPIC}, section
    )


def create(conn: Any, with_dead_letter_table: bool = True) -> str:
    db = f"demo_{uuid.uuid4().hex[:8]}"
    apply_file(conn, ORDERS_DDL, db)
    if with_dead_letter_table:
        apply_sql(conn, DEAD_LETTER_DDL.format(db=db))
    return db


def insert_state(conn: Any, db: str, truth: GroundTruth) -> None:
    with conn.cursor() as cur:
        for table in TABLES:
            columns = COLUMNS[table]
            sql = (
                f"INSERT INTO `{db}`.`{table}` ({', '.join(columns)}) "
                f"VALUES ({', '.join(['%s'] * len(columns))})"
            )
            for row in truth.tables[table]:
                cur.execute(sql, [row[c] for c in columns])


def insert_dead_letters(conn: Any, db: str, txn: dict[str, Any], topic: str = TOPIC) -> None:
    """Rows as the pipeline writes them: first reason names the violation, later ones too."""
    first = txn["first_offset"]
    with conn.cursor() as cur:
        for seq in range(txn["records"]):
            reason = (
                f"{txn['kind']}: record at offset {first + seq}"
                if seq == 0
                else f"{txn['kind']}: later event of transaction {txn['txn_id']!r}, which was "
                f"rejected at offset {first}"
            )
            cur.execute(
                f"INSERT INTO `{db}`.`_cdc_dead_letter` (topic, kafka_partition, first_offset, "
                "row_seq, pipeline, txn_id, last_offset, reason, payload, source_ts_ms) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [topic, txn["partition"], first, seq, "demo", txn["txn_id"], first + seq, reason,
                 "{}", 1],
            )  # fmt: skip


def cli_args(conn: Any, db: str, truth_path: Path) -> list[str]:
    def text(v: Any) -> str:
        return v.decode() if isinstance(v, bytes) else str(v)

    return [
        "--host",
        conn.host,
        "--port",
        str(conn.port),
        "--user",
        text(conn.user),
        "--password",
        text(conn.password),
        "--database",
        db,
        "--truth",
        str(truth_path),
        "--json",
    ]


def test_dead_letters_by_reason_against_the_truth(
    conn: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = make_truth(EXPECTED)
    db = create(conn)
    insert_state(conn, db, truth)
    for txn in EXPECTED:
        insert_dead_letters(conn, db, txn)
    # Another pipeline's topic sharing the table is counted, not judged.
    insert_dead_letters(conn, db, {**EXPECTED[0], "kind": "txn-timeout"}, topic="other-topic")

    report = dead_letters(conn, db)
    assert report.records == 3 + 5 + 3
    assert report.by_kind(TOPIC)["no-begin"] == (1, 3)
    assert report.by_kind(TOPIC)["undecodable"] == (1, 5)
    assert report.by_kind()["txn-timeout"] == (1, 3)

    verdict = run(conn, database=db, truth=truth)
    assert verdict.dead_letters is not None
    assert verdict.dead_letters.ok, verdict.dead_letters.examples
    assert verdict.dead_letters.other_topics == 1
    assert verdict.passed

    truth_path = tmp_path / "truth.json"
    truth.write(truth_path)
    capsys.readouterr()
    assert verify_cli.main(cli_args(conn, db, truth_path)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["dead_letters"]["ok"] is True
    assert summary["dead_letters"]["kinds"]["undecodable"]["actual_records"] == 5

    # A good transaction dead-lettered, and a bad one with a record short: both fail.
    insert_dead_letters(
        conn,
        db,
        {"kind": "txn-timeout", "txn_id": "demo-s5-00000003", "partition": 2, "first_offset": 0,
         "records": 2},
    )  # fmt: skip
    with conn.cursor() as cur:
        cur.execute(
            f"DELETE FROM `{db}`.`_cdc_dead_letter` WHERE topic = %s AND kafka_partition = 1 "
            "AND first_offset = 4 AND row_seq = 4",
            [TOPIC],
        )
    assert verify_cli.main(cli_args(conn, db, truth_path)) == 1
    out = capsys.readouterr()
    summary = json.loads(out.out)
    assert summary["passed"] is False
    kinds = summary["dead_letters"]["kinds"]
    assert kinds["txn-timeout"]["unexpected"] == 1
    assert kinds["undecodable"]["wrong_records"] == 1
    assert kinds["no-begin"]["ok"] is True
    assert "unexpected txn-timeout dead letter at topic=orders-cdc partition=2" in out.err
    # The check can be switched off.
    assert verify_cli.main([*cli_args(conn, db, truth_path), "--no-dead-letters"]) == 0


def test_missing_table_is_fine_only_when_nothing_is_expected(conn: Any, tmp_path: Path) -> None:
    db = create(conn, with_dead_letter_table=False)
    clean = make_truth([])
    insert_state(conn, db, clean)
    verdict = run(conn, database=db, truth=clean)
    assert verdict.passed
    assert verdict.dead_letters is None
    assert any("dead letters not checked" in n for n in verdict.notes)

    truth_path = tmp_path / "truth.json"
    make_truth(EXPECTED).write(truth_path)
    assert verify_cli.main(cli_args(conn, db, truth_path)) == 2  # cannot verify
