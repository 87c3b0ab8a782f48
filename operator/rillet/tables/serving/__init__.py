"""The Table server: a Table's compacted topic kept in a local store and read over HTTP.

The store (`tables.tablestore`, SQLite, shared with the driver's lookups) keeps the latest
value per key, `following` consumes the topic into it, `web` answers lookups, each authorized
by `authorizing` (Kubernetes RBAC, asked with the caller's own token); `rillet table serve`
(`rillet.cli.tableserving`) runs them in one process. Imported only by that command (and
tests); it imports the rest of `tables`, and `api`.
"""
