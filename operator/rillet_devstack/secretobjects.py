"""Secrets the stack creates for its users (the object store's key, the registry's user), as
Kubernetes objects: data base64-encoded, as the API wants it."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any


def opaque_secret(name: str, namespace: str, values: Mapping[str, str]) -> dict[str, Any]:
    """An Opaque Secret holding `values` (plain text in, base64 in its data)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in values.items()},
    }
