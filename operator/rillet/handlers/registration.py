"""Importing this module registers every Rillet handler with kopf's default registry."""

from __future__ import annotations

from rillet.handlers import apps, indexes, lifecycle, tables, tableserving, topics

__all__ = ["apps", "indexes", "lifecycle", "tables", "tableserving", "topics"]
