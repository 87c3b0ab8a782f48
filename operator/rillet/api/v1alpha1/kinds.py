"""The kinds API version v1alpha1 serves (in the order they are documented), and parsing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rillet.api.v1alpha1 import apps, objects, tables, topics

ALL: tuple[type[objects.Resource], ...] = (topics.Topic, tables.Table, apps.App)

BY_KIND: Mapping[str, type[objects.Resource]] = {model.kind_info.kind: model for model in ALL}


def parse(document: Mapping[str, Any]) -> objects.Resource:
    """The Rillet object in `document` (a parsed YAML or JSON manifest), validated.

    Raises ValueError for another API version or kind, pydantic.ValidationError for an invalid
    object (with the messages the apiserver would give).
    """
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if api_version != objects.API_VERSION or not isinstance(kind, str) or kind not in BY_KIND:
        raise ValueError(
            f"not a {objects.API_VERSION} object: apiVersion {api_version!r}, "
            f"kind {kind!r} (known kinds: {', '.join(BY_KIND)})"
        )
    return BY_KIND[kind].model_validate(document)
