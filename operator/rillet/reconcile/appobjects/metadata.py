"""Names, labels and owner references shared by all objects of an App.

Every object carries the same four labels, so `kubectl get all -l rillet.io/app=<app>` finds
them, and an ownerReference to the App (controller), so deleting the App deletes them (the
checkpoint PVC is kept: a StatefulSet's claims outlive it, and the App can come back to it).
Pods add `rillet.io/role` (driver or executor), which the selectors use.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from rillet.api.v1alpha1 import objects
from rillet.reconcile.appobjects import contexts

APP_LABEL: Final = "rillet.io/app"
ROLE_LABEL: Final = "rillet.io/role"
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
SPEC_HASH_ANNOTATION: Final = "rillet.io/spec-hash"

Role = Literal["driver", "executor"]


def labels(app: str) -> dict[str, str]:
    """The labels of every object of the App."""
    return {
        "app.kubernetes.io/name": "rillet-app",
        "app.kubernetes.io/instance": app,
        MANAGED_BY_LABEL: "rillet",
        APP_LABEL: app,
    }


def selector(app: str, role: Role) -> dict[str, str]:
    """The labels selecting the App's driver pod or its executor pods."""
    return {APP_LABEL: app, ROLE_LABEL: role}


def label_selector(app: str, role: Role) -> str:
    """`selector` as a label selector string, for listing pods."""
    return ",".join(f"{key}={value}" for key, value in selector(app, role).items())


def pod_labels(app: str, role: Role) -> dict[str, str]:
    """The labels of the App's driver or executor pods."""
    return {**labels(app), ROLE_LABEL: role}


def owner_reference(context: contexts.AppContext) -> dict[str, Any]:
    """The App as controller of an object: the garbage collector deletes the object with it."""
    return {
        "apiVersion": objects.API_VERSION,
        "kind": "App",
        "name": context.name,
        "uid": context.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def object_metadata(context: contexts.AppContext, name: str) -> dict[str, Any]:
    """metadata of an object of the App: name, namespace, labels and the owner reference."""
    return {
        "name": name,
        "namespace": context.namespace,
        "labels": labels(context.name),
        "ownerReferences": [owner_reference(context)],
    }


def header(
    context: contexts.AppContext, *, api_version: str, kind: str, name: str
) -> dict[str, Any]:
    """apiVersion, kind and metadata of an object of the App."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": object_metadata(context, name),
    }
