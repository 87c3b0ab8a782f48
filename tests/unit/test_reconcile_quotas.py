"""The operator-wide caps on a namespace's Topics and Tables.

Test plan:
- more partitions than the cap: the problem names the figure, the cap and its chart value;
- the cap on their number stalls the newest beyond it (the objects made before keep theirs;
  one of the same second is ordered by uid, a deleted predecessor of the same name not counted);
- within both caps: no problem.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rillet.reconcile import claims, quotas

pytestmark = pytest.mark.unit

LIMITS = quotas.TopicQuotas(partitions_per_topic=100, topics_per_namespace=2)
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _claim(name: str, seconds: int, uid: str | None = None) -> claims.Claim:
    return claims.Claim(T0 + timedelta(seconds=seconds), True, uid or name, "Topic", "team", name)


def test_too_many_partitions_is_a_problem_that_says_which_cap() -> None:
    found = quotas.problem(LIMITS, namespace="team", partitions=101, older=0)
    assert found is not None
    assert "101 partitions is more than the 100 per topic" in found
    assert "operator.maxPartitionsPerTopic" in found
    assert quotas.problem(LIMITS, namespace="team", partitions=100, older=1) is None
    assert quotas.problem(LIMITS, namespace="team", partitions=None, older=1) is None


def test_the_newest_objects_beyond_the_cap_on_their_number_wait() -> None:
    a, b, c = _claim("a", 0), _claim("b", 1), _claim("c", 2)
    same_second = _claim("d", 2, uid="0-first")
    found = [a, b, c, same_second]
    assert [quotas.older_in_namespace(x, found) for x in (a, b, same_second, c)] == [0, 1, 2, 3]
    # A deleted predecessor of `a` (same identity, older) is not counted for anyone.
    ghost = _claim("a", -5, uid="gone")
    assert quotas.older_in_namespace(b, [ghost, *found]) == 1
    over = quotas.problem(LIMITS, namespace="team", partitions=1, older=2)
    assert over is not None
    assert "namespace team already has 2 Topics and Tables" in over
    assert "operator.maxTopicsPerNamespace" in over
