"""The partition cap where a stateful App's state binds it, on the stack's node.

(The cap where the input's partitions bind it, sampled pod by pod, is part of the scaling story:
tests/integration/test_apps_scaling_on_node.py.)

Test plan: a stateful word count whose input grows from 2 to 6 partitions: its state keeps the
2 partitions its checkpoint froze (status.statePartitions, from what Spark reports), the cap
follows the widest stage (the read of 6 partitions: capBy InputPartitions), and its Table stays
exact (the counts of every word the test wrote, before and after the growth).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .conftest import Kube
from .objects import apply, get, wait_condition
from .polling import wait_for
from .wordcounts import COUNT_WORDS, names, produce_lines, wait_table, word_count

pytestmark = pytest.mark.usefixtures("operator")

PARTITIONS = 2


def test_a_stateful_app_grown_past_its_state_partitions_says_what_binds_and_stays_exact(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    kafka_bootstrap: str,
    runtime_image: str,
    measurement: Callable[[str], None],
) -> None:
    app, lines, counts = names(kafka_prefix)
    documents = word_count(
        app, namespace, image=runtime_image, reads=lines, writes=counts, sql=COUNT_WORDS
    )
    documents[0]["spec"]["partitions"] = PARTITIONS  # the Table follows its writer's inputs
    apply(kube, *documents)
    truth = produce_lines(kafka_bootstrap, lines, 3_000, seed=34)
    wait_table(kafka_bootstrap, counts, truth, timeout=400)

    kube.kubectl(
        "patch",
        "topic",
        lines,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"partitions": 6}}',
    )
    wait_condition(kube, "table", counts, namespace, timeout=60)
    truth += produce_lines(kafka_bootstrap, lines, 3_000, seed=35)
    wait_table(kafka_bootstrap, counts, truth, timeout=400)

    status = wait_for(
        lambda: (
            (found := get(kube, "app", app, namespace)["status"]).get("partitions") == 6
            and found.get("statePartitions")
            and found
        ),
        timeout=60,
        what="the App's status to show 6 input partitions and its state's",
    )
    measurement(
        f"grown to {status['partitions']} input partitions: statePartitions "
        f"{status['statePartitions']}, executors {status['executors']}, Table exact "
        f"({sum(truth.values())} words)"
    )
    assert status["statePartitions"] == PARTITIONS, status
    assert (status["executors"]["cap"], status["executors"]["capBy"]) == (6, "InputPartitions")
