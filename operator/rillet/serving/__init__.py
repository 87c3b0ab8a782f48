"""The Table server: a Table's compacted topic kept in a local store and read over HTTP.

The store (`runtime.tablestore`, SQLite, shared with the driver's lookups) keeps the latest
value per key, `following` consumes the topic into it, `web` answers lookups; `rillet table
serve` (`cli.tableserving`) runs them in one process. Beside `handlers` in the layers, independent
of it: imported only by `cli`; it uses the pyspark-free part of `runtime`, and `api`.
"""
