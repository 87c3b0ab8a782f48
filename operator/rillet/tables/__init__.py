"""A Table read without Spark: its compacted topic, its local store, and its server.

`tables` reads a Table's changelog topic to the latest value per key, `watermarks` asks a
partition's watermarks again while its leadership moves, `tablestore` keeps the latest values in
SQLite, `clustertables` finds a Table through the cluster, and `serving` is the Table server.
Used by `rillet table get` and `rillet table serve` (in the operator's image) and by the driver's
lookups, so it never imports pyspark. Beside `reconcile` in the layers, independent of it:
imported by `runtime` and `serving` (and tests); it imports only `api`.
"""
