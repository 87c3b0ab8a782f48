"""Which objects the periodic resync takes (pure).

Test plan:
- an object reconciled at its current generation is due;
- a new object (no status yet) or one whose spec changed since its last reconcile is left to
  its kopf handler, so a bulk apply is not reconciled twice;
- an object being deleted is left to its delete handler.
"""

from __future__ import annotations

from typing import Any

from rillet.reconcile.statuses import is_due


def body(generation: int, observed: int | None, *, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "orders", "namespace": "shop", "generation": generation}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-22T10:00:00Z"
    status = {} if observed is None else {"observedGeneration": observed}
    return {"metadata": metadata, "spec": {"partitions": 3}, "status": status}


def test_an_object_reconciled_at_its_generation_is_due() -> None:
    assert is_due(body(generation=2, observed=2))


def test_a_new_object_is_left_to_its_handler() -> None:
    assert not is_due(body(generation=1, observed=None))


def test_a_changed_spec_is_left_to_its_handler() -> None:
    assert not is_due(body(generation=3, observed=2))


def test_an_object_being_deleted_is_not_resynced() -> None:
    assert not is_due(body(generation=2, observed=2, deleting=True))
