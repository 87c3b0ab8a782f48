"""Thin kopf glue: observe -> plan -> apply -> status, one level-based reconcile per kind.

Importing `rillet.handlers.registration` registers every handler with kopf. The top of the
operator: only `cli` (`rillet operator run`) and tests import it. It calls `reconcile` for every
decision and `kafka` and `k8s` for the I/O kopf does not do itself; nothing imports it back.
"""
