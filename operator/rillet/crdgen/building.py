"""Pure: build the CustomResourceDefinition of each kind from its pydantic model.

The schema is the model's structural schema (see `structuring`) inside the standard envelope of
a Kubernetes object; names, short names, categories and printer columns come from the model's
`kind_info`.
"""

from __future__ import annotations

from typing import Any

from rillet.api.v1alpha1 import objects
from rillet.crdgen import structuring

_ENVELOPE = {
    "apiVersion": {
        "description": "The versioned schema of this representation of an object. Servers "
        "convert recognized schemas to the latest internal value.",
        "type": "string",
    },
    "kind": {
        "description": "The REST resource this object represents, in CamelCase.",
        "type": "string",
    },
    "metadata": {"type": "object"},
}
# What an object the operator has not written a status for reads as: the apiserver fills a
# missing status with this default whenever it returns the object. Generation 0 is never
# observed, so kstatus (Flux) calls such an object InProgress and Argo CD Progressing, where an
# object with no status at all would be Current to kstatus while nothing reconciled it yet.
UNSEEN_STATUS = {"observedGeneration": 0}


def crd_name(model: type[objects.Resource]) -> str:
    """The CRD's metadata.name, e.g. topics.rillet.io."""
    return f"{model.kind_info.plural}.{objects.GROUP}"


def file_name(model: type[objects.Resource]) -> str:
    """The generated file's name, e.g. rillet.io_topics.yaml (controller-gen's convention)."""
    return f"{objects.GROUP}_{model.kind_info.plural}.yaml"


def build_schema(model: type[objects.Resource]) -> dict[str, Any]:
    """The openAPIV3Schema of a kind: the model's structural schema in the standard envelope."""
    root = structuring.structural(model.model_json_schema(by_alias=True, mode="validation"))
    properties = root.pop("properties")
    root["properties"] = {
        **_ENVELOPE,
        "spec": properties["spec"],
        "status": structuring.ordered({**properties["status"], "default": UNSEEN_STATUS}),
    }
    root["required"] = [name for name in root.get("required", ()) if name in {"spec"}]
    if not root["required"]:
        del root["required"]
    return structuring.ordered(root)


def build_printer_columns(model: type[objects.Resource]) -> list[dict[str, Any]]:
    """The additionalPrinterColumns of a kind."""
    columns = []
    for column in model.kind_info.printer_columns:
        item: dict[str, Any] = {
            "name": column.name,
            "type": column.type,
            "jsonPath": column.json_path,
            "description": column.description,
        }
        if column.priority:
            item["priority"] = column.priority
        columns.append(item)
    return columns


def build_crd(model: type[objects.Resource]) -> dict[str, Any]:
    """The CustomResourceDefinition of a kind, as a plain dict."""
    info = model.kind_info
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": crd_name(model),
            "labels": {"app.kubernetes.io/part-of": "rillet"},
        },
        "spec": {
            "group": objects.GROUP,
            "names": {
                "kind": info.kind,
                "listKind": f"{info.kind}List",
                "plural": info.plural,
                "singular": info.singular,
                "shortNames": list(info.short_names),
                "categories": list(info.categories),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": objects.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": build_printer_columns(model),
                    "schema": {"openAPIV3Schema": build_schema(model)},
                },
            ],
        },
    }
