"""The Table server: a Table's compacted topic kept in a local store and read over HTTP.

`store` keeps the latest value per key (SQLite), `following` consumes the topic into it,
`web` answers lookups; `rillet table serve` runs the three in one process.
"""
