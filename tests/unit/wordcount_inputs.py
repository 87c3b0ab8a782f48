"""The word-count example as the reconcile receives it: the App (in namespace team, with a uid
and a generation, its spec changed as a test says) and its run spec, for the tests that build
an App's objects; its objects as the apiserver returns them and kopf's indexes of them, for the
tests that resolve or reconcile it. Also any example file's documents and the run spec
resolved from them, for the tests of run specs and their Spark conf."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import yaml

from rillet.api.v1alpha1 import apps
from rillet.driverapi import runspecs
from rillet.handlers import indexes
from rillet.reconcile import manifests, runresolving
from rillet.reconcile.appobjects import building, contexts

EXAMPLES = Path(__file__).parents[2] / "examples"
UID = "7d3c0a8e-0000-4000-8000-000000000001"
NAMESPACE = "team"
# What the operator's settings give every App in these tests: the brokers' address.
ENV = contexts.AppEnvironment(kafka_bootstrap="kafka:9092")
# The labels of every object of the App.
LABELS = {
    "app.kubernetes.io/name": "rillet-app",
    "app.kubernetes.io/instance": "wordcount",
    "app.kubernetes.io/managed-by": "rillet",
    "rillet.io/app": "wordcount",
}
READY = {"conditions": [{"type": "Ready", "status": "True", "reason": "TopicReady"}]}
# When the tests' reconciles and scaling passes happen.
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def example_documents(name: str) -> list[dict[str, Any]]:
    """The documents of examples/`name`, as written."""
    return list(yaml.safe_load_all((EXAMPLES / name).read_text(encoding="utf-8")))


def example_run_spec(name: str, **kwargs: Any) -> runspecs.RunSpec:
    """The run spec of examples/`name` (`kwargs` as `rillet` is given them)."""
    return manifests.build_run_spec_from_manifests(
        example_documents(name),
        bootstrap_servers="kafka:9092",
        checkpoint_location="/ck/app",
        **kwargs,
    )


def documents(**spec: Any) -> list[dict[str, Any]]:
    """examples/wordcount.yaml, the App's spec updated with `spec`."""
    found = list(yaml.safe_load_all((EXAMPLES / "wordcount.yaml").read_text("utf-8")))
    for document in found:
        if document["kind"] == "App":
            document["metadata"] |= {"namespace": "team", "uid": UID, "generation": 3}
            document["spec"] |= spec
    return found


def inputs(**spec: Any) -> tuple[apps.App, runspecs.RunSpec]:
    """The App and its run spec (checkpoint by default where the operator keeps it)."""
    found = manifests.parse_manifests(documents(**spec))
    app = found.apps["wordcount"]
    run_spec = runresolving.build_run_spec(
        app,
        topics_by_name=found.topics,
        tables_by_name=found.tables,
        bootstrap_servers="kafka:9092",
        checkpoint_location="/operator/default",
    )
    return app, run_spec


def objects(env: contexts.AppEnvironment = ENV, **spec: Any) -> building.AppObjects:
    """The App's Kubernetes objects, as the reconcile builds them."""
    return building.build_app_objects(*inputs(**spec), env)


def context(**spec: Any) -> contexts.AppContext:
    """What the App's objects are built from."""
    return contexts.build_context(*inputs(**spec), ENV)


def driver_pod(objects: building.AppObjects) -> dict[str, Any]:
    """The driver's pod template, in the App's StatefulSet."""
    template: dict[str, Any] = objects.stateful_set["spec"]["template"]
    return template


def driver_container(objects: building.AppObjects) -> dict[str, Any]:
    """The driver's container."""
    container: dict[str, Any] = driver_pod(objects)["spec"]["containers"][0]
    return container


def ready_status(reason: str, message: str) -> dict[str, Any]:
    """A status whose one condition, Ready, has `reason` and `message`."""
    return {"conditions": [{"type": "Ready", "reason": reason, "message": message}]}


def bodies() -> dict[str, dict[str, Any]]:
    """The example's objects as the apiserver returns them (namespace, uid, Ready statuses), by
    kind."""
    documents = yaml.safe_load_all((EXAMPLES / "wordcount.yaml").read_text("utf-8"))
    found = {}
    for document in documents:
        document["metadata"] |= {"namespace": NAMESPACE, "uid": UID, "generation": 1}
        if document["kind"] != "App":
            document["status"] = copy.deepcopy(READY)
        found[document["kind"]] = document
    return found


def views(*found: dict[str, Any]) -> indexes.AppViews:
    """kopf's indexes holding the bodies `found`."""

    def index(kind: str) -> Any:
        return {(NAMESPACE, b["metadata"]["name"]): [b] for b in found if b["kind"] == kind}

    return indexes.AppViews(
        topic_objects=cast(Any, index("Topic")),
        table_objects=cast(Any, index("Table")),
        app_objects=cast(Any, index("App")),
    )
