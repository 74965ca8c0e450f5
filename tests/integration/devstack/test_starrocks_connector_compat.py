"""What StarRocks' own Flink connector (flink-connector-starrocks 1.2.15, issue 13) needs.

Each test is one request the connector made that the emulator once answered differently from
a real StarRocks 4.x (docs/peer.md, "Emulator fixes").
"""

from __future__ import annotations

import pytest

from devstack.starrocks.launcher import EmulatorHandle

pytestmark = pytest.mark.integration

# What MySQL Connector/J 5.1.49 (shaded into the connector) sends right after the handshake.
CONNECTOR_J_INIT = (
    "/* mysql-connector-java-5.1.49 ( Revision: ad86f36e100e104cd926c6b81c8cab9565750116 ) */"
    "SELECT  @@session.auto_increment_increment AS auto_increment_increment, "
    "@@character_set_client AS character_set_client, "
    "@@character_set_connection AS character_set_connection, "
    "@@character_set_results AS character_set_results, "
    "@@character_set_server AS character_set_server, @@collation_server AS collation_server, "
    "@@collation_connection AS collation_connection, @@init_connect AS init_connect, "
    "@@interactive_timeout AS interactive_timeout, @@license AS license, "
    "@@lower_case_table_names AS lower_case_table_names, "
    "@@max_allowed_packet AS max_allowed_packet, @@net_buffer_length AS net_buffer_length, "
    "@@net_write_timeout AS net_write_timeout, @@query_cache_size AS query_cache_size, "
    "@@query_cache_type AS query_cache_type, @@sql_mode AS sql_mode, "
    "@@system_time_zone AS system_time_zone, @@time_zone AS time_zone, "
    "@@tx_isolation AS transaction_isolation, @@wait_timeout AS wait_timeout"
)


def test_connector_j_server_variables(emu: EmulatorHandle) -> None:
    """Connector/J reads max_allowed_packet by alias; NULL made it fail every query with
    'Packet for query is too large (28 > -1)'. StarRocks answers its SessionVariable defaults."""
    conn = emu.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(CONNECTOR_J_INIT)
            labels = [d[0] for d in cur.description]
            row = dict(zip(labels, cur.fetchone(), strict=True))
    finally:
        conn.close()
    assert labels[0] == "auto_increment_increment"
    assert "transaction_isolation" in labels
    assert int(row["max_allowed_packet"]) == 33554432
    assert int(row["auto_increment_increment"]) == 1
    assert row["character_set_client"] == "utf8"
    assert row["sql_mode"] == "ONLY_FULL_GROUP_BY"
    assert int(row["wait_timeout"]) == 28800
    assert row["transaction_isolation"] == "REPEATABLE-READ"
    assert all(v is not None for v in row.values())


def test_unaliased_variable_keeps_its_at_label(emu: EmulatorHandle) -> None:
    conn = emu.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@version_comment")
            assert [d[0] for d in cur.description] == ["@@version_comment"]
            assert cur.fetchone() == ("StarRocks emulator",)
    finally:
        conn.close()


def test_show_variables_like(emu: EmulatorHandle) -> None:
    assert emu.sql("SHOW VARIABLES LIKE 'max_allowed_packet'") == [
        ("max_allowed_packet", "33554432")
    ]
    names = [r[0] for r in emu.sql("SHOW SESSION VARIABLES LIKE 'character_set_%'")]
    assert names == [
        "character_set_client",
        "character_set_connection",
        "character_set_results",
        "character_set_server",
    ]
