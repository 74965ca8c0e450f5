"""A protocol-faithful local stand-in for StarRocks (FE + BE + MySQL query port).

Built to ``docs/starrocks-txn-protocol.md``: two HTTP listeners (FE, BE) with the 307
routing of the real cluster, the single-table and multi-table Stream Load transaction state
machines with their exact status strings, JSON/CSV loading into real SQLite storage with atomic
per-transaction visibility, and a MySQL-protocol port for DDL and SELECTs. Product code never
imports this package; tests and the demo start it as a subprocess (see :mod:`.launcher`).
"""
