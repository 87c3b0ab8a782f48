"""App handlers: every event reconciles the App as a whole (the scaling loop does the rest).

The App's objects carry owner references and the garbage collector removes them with it (the
checkpoint volume stays, as a StatefulSet's claims do). Only with per-App Kafka principals on is
there a delete handler, and so a finalizer: the App's SCRAM user and ACLs live in Kafka.
"""

from __future__ import annotations

from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from rillet.api.v1alpha1 import objects
from rillet.handlers import appaccess, appreconciling
from rillet.k8s import applying
from rillet.reconcile import appobservations, kafkaaccess

KIND = "App"
PLURAL = "apps"
RESOURCE = (objects.GROUP, objects.VERSION, PLURAL)
MAX_RETRY_DELAY = 60.0


@kopf.on.resume(*RESOURCE)
@kopf.on.create(*RESOURCE)
@kopf.on.update(*RESOURCE)
async def reconcile_app(
    body: kopf.Body, spec: kopf.Spec, patch: kopf.Patch, memo: kopf.Memo, retry: int, **_: Any
) -> None:
    # The Tables this App writes take its input partitions: reconcile them now, not at the
    # next resync (this App is in the Apps index already: kopf indexes before handlers run).
    memo.nudger.nudge(str(body["metadata"]["namespace"]), appobservations.written_tables(spec))
    try:
        report = await appreconciling.reconcile(body, memo.apps)
    except (ApiException, HTTPError, OSError) as error:
        raise kopf.TemporaryError(
            f"the apiserver failed: {applying.describe(error)}",
            delay=min(2.0**retry, MAX_RETRY_DELAY),
        ) from error
    for key, value in report.status_patch.items():
        patch.status[key] = value
    for note in report.notes:
        kopf.event(body, type=note.type, reason=note.reason, message=note.message)


# kopf leaves the annotations under its own storage prefix (rillet.io/) out of the changes it
# reacts to. Declaring this one a field of a handler brings it back into them: a new rotation
# token is an update, and reconcile_app rotates the password (handlers.appaccess).
ROTATION_FIELD = ("metadata", "annotations", kafkaaccess.ROTATE_ANNOTATION)


@kopf.on.field(*RESOURCE, field=ROTATION_FIELD)
def notice_rotation(**_: Any) -> None:
    """No work of its own: reconcile_app, run for the same change, rotates."""


def _principals_on(memo: kopf.Memo, **_: Any) -> bool:
    deps = memo.get("apps")
    return deps is not None and deps.access is not None


@kopf.on.delete(*RESOURCE, when=_principals_on)
async def remove_app_principal(body: kopf.Body, memo: kopf.Memo, retry: int, **_: Any) -> None:
    await appaccess.remove(body, memo.apps.access, memo.apps.kube, retry=retry)
