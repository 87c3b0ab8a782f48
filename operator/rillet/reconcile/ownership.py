"""Whether an object found under the name of one the operator would apply is the operator's.

Server-side apply, forced, would take over a same-named object someone else made (a Deployment,
a NetworkPolicy, a ServiceAccount), and the owner reference it adds would then have the garbage
collector delete it with the App or Table. So before applying, the operator reads what is there:
an object is its own when its controller reference names the same kind and name of owner as
the desired one (the same object, or its deleted predecessor of that name, whose objects the
garbage collector has not removed yet). Anything else is reported, and neither changed nor
deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference marked controller, None if there is none."""
    references = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((ref for ref in references if ref.get("controller")), None)


def is_ours(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether `observed` was made by the operator for the desired object's owner (by kind and
    name: a re-created App takes over what its predecessor left)."""
    wanted, found = controller_of(desired), controller_of(observed)
    if wanted is None:
        return True  # an object without an owner (none today) is not checked
    if found is None:
        return False
    return all(found.get(key) == wanted.get(key) for key in ("apiVersion", "kind", "name"))


def foreign_problem(observed: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> str | None:
    """Why the operator may not apply `desired` over `observed`, or None."""
    if observed is None or is_ours(observed, desired):
        return None
    owner = controller_of(desired) or {}
    kind, name = desired["kind"], desired["metadata"]["name"]
    return (
        f"{kind} {name} exists and was not made by Rillet for {owner.get('kind')} "
        f"{owner.get('name')}: Rillet neither changes nor deletes it; rename or delete that "
        f"{kind}, or rename this {owner.get('kind')}"
    )
