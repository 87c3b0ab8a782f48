"""Thin kopf glue: observe -> plan -> apply -> status, one level-based reconcile per kind.

Importing `rillet.handlers.registration` registers every handler with kopf.
"""
