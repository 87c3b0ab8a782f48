"""The Rillet objects of a set of manifests (parsed YAML), and the run spec of an App among them.

What `rillet run` and the Table commands read from a manifest file: the Apps, Topics and Tables
in it (other objects ignored), one App picked by name, and its run spec (`runresolving`).
Purely computational: the caller reads the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from rillet.api.v1alpha1 import apps, kinds, objects, tables, topics
from rillet.driverapi import runspecs
from rillet.reconcile import runresolving


class Manifests(BaseModel):
    """The Rillet objects of a set of manifests, by kind and name."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    apps: dict[str, apps.App]
    topics: dict[str, topics.Topic]
    tables: dict[str, tables.Table]


def parse_manifests(documents: Iterable[Mapping[str, Any] | None]) -> Manifests:
    """The Apps, Topics and Tables among `documents` (parsed YAML), validated.

    Objects of other API groups (a ConfigMap in the same file, say) and empty documents (a
    trailing `---`) are ignored.
    """
    resources = [kinds.parse(d) for d in documents if d and _is_rillet(d)]
    return Manifests(
        apps={str(r.metadata.name): r for r in resources if isinstance(r, apps.App)},
        topics={str(r.metadata.name): r for r in resources if isinstance(r, topics.Topic)},
        tables={str(r.metadata.name): r for r in resources if isinstance(r, tables.Table)},
    )


def build_run_spec_from_manifests(
    documents: Iterable[Mapping[str, Any] | None],
    *,
    bootstrap_servers: str,
    app_name: str | None = None,
    checkpoint_location: str | None = None,
    namespace: str | None = None,
    kafka_config: Mapping[str, str] | None = None,
    schema_registry: runspecs.SchemaRegistry | None = None,
) -> runspecs.RunSpec:
    """The run spec of the App among `documents` (parsed YAML manifests of Apps, Topics, Tables).

    With several Apps in the documents, `app_name` picks one.
    """
    found = parse_manifests(documents)
    return runresolving.build_run_spec(
        pick_app(found, app_name),
        topics_by_name=found.topics,
        tables_by_name=found.tables,
        bootstrap_servers=bootstrap_servers,
        checkpoint_location=checkpoint_location,
        namespace=namespace,
        kafka_config=kafka_config,
        schema_registry=schema_registry,
    )


def table_in(documents: Iterable[Mapping[str, Any]], name: str) -> tables.Table:
    """The Table called `name` among `documents`; a ValueError lists the Tables otherwise."""
    found = parse_manifests(documents).tables
    if name not in found:
        raise ValueError(f"no Table {name!r} in the manifests (Tables: {', '.join(found) or '-'})")
    return found[name]


def _is_rillet(document: Mapping[str, Any]) -> bool:
    return str(document.get("apiVersion", "")).startswith(f"{objects.GROUP}/")


def pick_app(found: Manifests, name: str | None) -> apps.App:
    """The App called `name`, or the only App; a ValueError says what to pass otherwise."""
    names = list(found.apps)
    if name is not None:
        if name not in found.apps:
            raise ValueError(f"no App {name!r} in the manifests (Apps: {', '.join(names) or '-'})")
        return found.apps[name]
    if len(names) != 1:
        raise ValueError(
            f"the manifests hold {len(names)} Apps ({', '.join(names)}): name one with --app"
            if names
            else "the manifests hold no App"
        )
    return found.apps[names[0]]
