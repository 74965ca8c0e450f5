"""The orders demo: tables, a CDC workload generator and a verifier (DESIGN.md §8).

The demo data carries invariants that any partially visible transaction breaks: every order's
``item_count``, ``total_amount`` and ``version`` match its items exactly, and no item exists
without its order. The generator (:mod:`demo.generate`) produces CDC transactions that keep
them at every transaction boundary and writes the ground truth; the verifier
(:mod:`demo.verify`) checks them in the sink while the pipeline runs and compares the final
state with the truth. :mod:`demo.ddl` creates the tables from ``demo/sql/orders.sql``.

Nothing here imports pyspark: the demo talks to Kafka and to StarRocks (MySQL protocol) only.
"""
