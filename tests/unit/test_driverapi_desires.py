"""The desired executor count the operator writes on the driver pod, and the driver reads.

Test plan:
- the count written is the count read back; a pod without the annotation, or with a value that
  is not a plain count, has none (the driver keeps the count it started with);
- the operator patches a driver pod only when its annotation says another count (or none), and
  never without a pod or a decision.
"""

from __future__ import annotations

from typing import Any

import pytest

from rillet.driverapi import desires


def _pod(annotations: Any) -> dict[str, Any]:
    return {"metadata": {"name": "wc-driver-0", "annotations": annotations}}


@pytest.mark.parametrize("count", [0, 1, 64])
def test_the_count_written_is_the_count_read(count: int) -> None:
    patch = desires.build_desired_patch(count)

    assert patch == {"metadata": {"annotations": {"rillet.io/executors-desired": str(count)}}}
    assert desires.read_desired(patch) == count


@pytest.mark.parametrize(
    "pod",
    [
        None,
        {},
        {"metadata": None},
        _pod(None),
        _pod({}),
        _pod({"rillet.io/executors-desired": ""}),
        _pod({"rillet.io/executors-desired": "-1"}),
        _pod({"rillet.io/executors-desired": "2.5"}),
        _pod({"rillet.io/executors-desired": " 3"}),
        _pod({"rillet.io/executors-desired": "٣"}),  # a digit, but not an ASCII one
        _pod({"rillet.io/executors-desired": 3}),
        _pod("odd"),
    ],
)
def test_no_count_without_a_plain_one(pod: Any) -> None:
    assert desires.read_desired(pod) is None


def test_the_operator_patches_only_a_pod_that_says_another_count() -> None:
    said = _pod({"rillet.io/executors-desired": "3", "rillet.io/progress": "{}"})

    assert desires.desired_patch(said, 3) is None
    assert desires.desired_patch(said, 4) == desires.build_desired_patch(4)
    assert desires.desired_patch(_pod(None), 0) == desires.build_desired_patch(0)
    assert desires.desired_patch(None, 3) is None
    assert desires.desired_patch(said, None) is None
