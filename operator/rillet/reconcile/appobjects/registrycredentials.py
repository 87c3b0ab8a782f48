"""The schema registry's credentials of an Avro App: its Secret, mounted into the driver alone.

The Secret `<app>-schema-registry` is built when the App's run spec names a registry with a
credentials directory: the App reads or writes Avro (runresolving carries the registry only
then) and the operator has credentials (appresolving.schema_registry). Pods mount only Secrets
of their own namespace, hence one per App, owned by it: the garbage collector deletes it with
the App.

It is built here without data. The reconcile that applies it adds the username and password the
moment before it is sent (`handlers.appregistry`, with `secret_data`): no object built here
holds the password, so nothing that renders, hashes, compares or logs them (the ConfigMap, the
spec hash, Events, a traceback's repr) can carry it.

Only the driver mounts it: executors never talk to the registry (the driver fixes the schemas
and plans the queries with them).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Final

from rillet.reconcile import naming
from rillet.reconcile.appobjects import contexts, fragments, metadata

# Where the driver mounts it: the run spec's schema_registry.credentials_dir.
CREDENTIALS_DIR: Final = "/etc/rillet/schema-registry"
USERNAME_KEY: Final = "username"
PASSWORD_KEY: Final = "password"
VOLUME: Final = "schema-registry-credentials"
# The labels that say a Secret is the operator's, made for this App.
_OURS: Final = (metadata.APP_LABEL, metadata.MANAGED_BY_LABEL)


def credentials_dir(context: contexts.AppContext) -> str | None:
    """Where the App's driver reads the registry's credentials; None: it needs none."""
    registry = context.run_spec.schema_registry
    return registry.credentials_dir if registry is not None else None


def build_secret(context: contexts.AppContext) -> dict[str, Any] | None:
    """The App's registry Secret without its data (see the module docstring), None when the
    driver needs no credentials."""
    if credentials_dir(context) is None:
        return None
    name = naming.app_schema_registry_secret_name(context.name)
    return {
        **metadata.header(context, api_version="v1", kind="Secret", name=name),
        "type": "Opaque",
    }


def secret_data(*, username: str, password: str) -> dict[str, str]:
    """The Secret's data, base64 as the apiserver stores it (stringData is write-only, merged
    into data: the fields applied would not be those stored)."""
    given = {USERNAME_KEY: username, PASSWORD_KEY: password}
    return {key: base64.b64encode(value.encode()).decode() for key, value in given.items()}


def foreign_secret_problem(
    observed: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
    *,
    keys: tuple[str, ...] = _OURS,
    made_for: str = "this App",
) -> str | None:
    """Why the Secret found under the desired one's name is not the operator's to write (it
    would overwrite someone's data, then delete it with its owner), or None.

    The operator's carries the `keys` labels of the desired one: for an App's, the App's label
    and Rillet's managed-by label, as every object of the App has (metadata.labels).
    """
    if observed is None:
        return None
    found = (observed.get("metadata") or {}).get("labels") or {}
    wanted = desired["metadata"]["labels"]
    if all(found.get(key) == wanted[key] for key in keys):
        return None
    return (
        f"Secret {desired['metadata']['name']} exists and was not made by Rillet for {made_for}: "
        "the operator keeps the schema registry's credentials there; rename or delete that "
        "Secret"
    )


def credentials_mount(context: contexts.AppContext) -> fragments.Fragment:
    """The driver container's read-only mount of the Secret (files, not environment variables:
    they stay out of the pod spec, `kubectl describe` and /proc/<pid>/environ)."""
    directory = credentials_dir(context)
    if directory is None:
        return {}
    return {"volumeMounts": [{"name": VOLUME, "mountPath": directory, "readOnly": True}]}


def credentials_volume(context: contexts.AppContext) -> fragments.Fragment:
    """The driver pod's volume of the Secret."""
    if credentials_dir(context) is None:
        return {}
    secret = {
        "secretName": naming.app_schema_registry_secret_name(context.name),
        # Readable by the runtime's group (fsGroup) alone.
        "defaultMode": 0o440,
    }
    return {"spec": {"volumes": [{"name": VOLUME, "secret": secret}]}}
