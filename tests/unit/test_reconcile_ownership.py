"""Which objects found under the operator's names are its own to apply over and delete.

Test plan:
- one controlled by the same kind and name of owner is ours (the same App, or its re-created
  successor: another uid);
- one without a controller, or controlled by another object, is not; the problem names the
  object and its would-be owner and says what to do;
- nothing there is no problem.
"""

from __future__ import annotations

from typing import Any

import pytest

from rillet.reconcile import ownership

pytestmark = pytest.mark.unit


def _service(*owners: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "counts-driver", "ownerReferences": list(owners)},
    }


def _app(name: str, uid: str, *, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "rillet.io/v1alpha1",
        "kind": "App",
        "name": name,
        "uid": uid,
        "controller": controller,
    }


DESIRED = _service(_app("counts", "uid-1"))


def test_an_object_of_the_same_owner_or_its_successor_is_ours() -> None:
    assert ownership.foreign_problem(_service(_app("counts", "uid-1")), DESIRED) is None
    assert ownership.foreign_problem(_service(_app("counts", "uid-0")), DESIRED) is None
    assert ownership.foreign_problem(None, DESIRED) is None


def test_an_object_someone_else_made_is_not() -> None:
    for observed in (
        _service(),
        _service(_app("counts", "uid-1", controller=False)),
        _service(_app("other", "uid-9")),
        _service({**_app("counts", "uid-1"), "kind": "Table"}),
    ):
        problem = ownership.foreign_problem(observed, DESIRED)
        assert problem is not None, observed
        assert problem.startswith("Service counts-driver exists and was not made by Rillet")
        assert "for App counts" in problem
        assert "rename or delete that Service" in problem
