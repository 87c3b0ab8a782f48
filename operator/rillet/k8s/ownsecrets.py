"""Reading the operator's own Secrets without `get` on Secrets.

The operator holds no `get`, `list` or `watch` on Secrets. It reads one of its own as the answer
to a JSON patch that changes nothing, whose one operation tests Rillet's managed-by label. The
chart's admission policy (templates/operatorsecrets.yaml) admits the operator's patches only to
Secrets of its names (`<name>-kafka`, `-spark-auth`, `-schema-registry`) carrying that label
before and after, so the apiserver lets it read those Secrets and no other: any other Secret is
refused (422) before anything of it is returned (docs/security-model.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kubernetes.client.exceptions import ApiException

from rillet.reconcile.appobjects import metadata

# The patch: the label's name as a JSON Pointer token ("/" escaped as "~1", RFC 6901).
_OURS_TEST: Final = [
    {
        "op": "test",
        "path": "/metadata/labels/" + metadata.MANAGED_BY_LABEL.replace("/", "~1"),
        "value": "rillet",
    }
]


def foreign_message(name: str) -> str:
    """What a user is told of a Secret of Rillet's name that Rillet did not make."""
    return (
        f"Secret {name} exists and was not made by Rillet (it lacks the label "
        f"{metadata.MANAGED_BY_LABEL}=rillet): Rillet neither reads, changes nor deletes it; "
        "rename or delete that Secret"
    )


def read(call: Callable[..., Any], path: str, *, foreign: type[Exception]) -> Any:
    """The Secret at `path` if it is labelled as Rillet's, None if there is none; raises
    `foreign` (foreign_message) if one is there without the label. `call`: the operator's
    request (k8s.rest.call, bound to its client)."""
    try:
        return call("PATCH", path, body=_OURS_TEST, content_type="application/json-patch+json")
    except ApiException as error:
        if error.status == 404:
            return None
        if error.status == 422:  # the test failed, or the policy refused: not Rillet's
            raise foreign(foreign_message(path.rsplit("/", 1)[-1])) from None
        raise
