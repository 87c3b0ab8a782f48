"""Apps run as users run them: driver and executors as pods of the runtime image on the node.

The word count is stateful: its executors write Spark's state store under the checkpoint on
the driver's volume, so this is where a checkpoint the executors cannot reach would show.

Test plan:
- word count over 100,000 lines in 6 partitions: the Table equals the ground truth exactly, and
  the executor pods running equal min(desired, cap); their JVMs map the image's class archives
  and initialized ICU's case mappings as they started (the warm-up plugin);
- the driver killed mid-stream (its container SIGKILLed, then its pod deleted): the App resumes
  from its checkpoint and the Table is still exact;
- suspended, the App has no pods; lines produced meanwhile are counted once it resumes, from
  its checkpoint (the Table exact: nothing lost, nothing counted twice);
- a pipeline that fails at run time: the App is Stalled, with the error's last line;
- three executors that fit no node: the running App is not Ready (ExecutorsUnschedulable, its
  message counting them with the scheduler's reason), and kstatus and Argo CD's health check
  read it as in progress;
- the checkpoint volume deleted while the App is suspended: on resume the App is Stalled
  (CheckpointLost) and its Table is untouched; with checkpoint.onLoss Recompute the Table equals
  the ground truth again (the input holds its whole history).
"""

from __future__ import annotations

import json
import random
import re
import subprocess
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from confluent_kafka import Producer

from rillet.tables import tables
from rillet_devstack import stack as devstack

from . import gitopshealth
from .conftest import Kube
from .objects import apply, condition, get, topic
from .polling import wait_for
from .runtime_helpers import end_offsets

VOCABULARY = [f"w{n}" for n in range(300)] + ["kafka", "spark", "rillet"]
SMALL = {"cpu": "200m", "memory": "1Gi"}  # two cores: room for a driver and several executors
# The JVMs of the Apps of most node tests compile with C1 only (as the test session's own Spark
# does, tests/conftest.py): what those tests prove does not depend on C2, and the node's two
# cores are the suite's. The word count's exactness test runs the JVMs as users get them.
C1_ONLY = {
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
}
ICU_CASE_MAPPINGS = "org.apache.spark.sql.catalyst.util.CollationAwareUTF8String"


def word_count(
    name: str,
    namespace: str,
    *,
    image: str,
    reads: str,
    writes: str,
    sql: str,
    spark_conf: Mapping[str, str] | None = C1_ONLY,
) -> list[dict[str, Any]]:
    """A Topic of lines, a Table of counts, and the App between them (with `spark_conf`)."""
    return [
        topic(reads, namespace, partitions=6, deletionPolicy="Delete"),
        {
            "apiVersion": "rillet.io/v1alpha1",
            "kind": "Table",
            "metadata": {"name": writes, "namespace": namespace},
            "spec": {
                "keyFormat": "string",
                "valueFormat": "json",
                "valueSchema": "word STRING, count BIGINT",
                "deletionPolicy": "Delete",
            },
        },
        {
            "apiVersion": "rillet.io/v1alpha1",
            "kind": "App",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "image": image,
                "inputs": [
                    {
                        "name": "lines",
                        "topicRef": {"name": reads},
                        "format": "string",
                        "startingOffsets": "earliest",
                    }
                ],
                "pipeline": {"sql": sql},
                "outputs": [{"tableRef": {"name": writes}, "keyColumns": ["word"]}],
                "scaling": {"minExecutors": 1, "maxExecutors": 2, "lagTarget": 20000},
                "driver": SMALL,
                "executor": SMALL,
                **({"sparkConf": dict(spark_conf)} if spark_conf else {}),
            },
        },
    ]


COUNT_WORDS = """
SELECT word, count(*) AS count
FROM (SELECT explode(split(lower(value), '[^a-z0-9]+')) AS word FROM lines)
WHERE word != ''
GROUP BY word
"""


def produce_lines(
    bootstrap: str, topic_name: str, count: int, seed: int, *, config: Mapping[str, Any] = {}
) -> Counter[str]:
    """Random lines of words, and how many times each word was written (`config`: a login)."""
    rng = random.Random(seed)
    producer = Producer({**config, "bootstrap.servers": bootstrap, "linger.ms": 20})
    truth: Counter[str] = Counter()
    for _ in range(count):
        line = " ".join(rng.choice(VOCABULARY).capitalize() for _ in range(rng.randint(1, 5)))
        truth.update(w for w in re.split("[^a-z0-9]+", line.lower()) if w)
        producer.produce(topic_name, value=line.encode())
        producer.poll(0)
    assert producer.flush(60) == 0
    return truth


def table_counts(
    bootstrap: str, topic_name: str, *, config: Mapping[str, Any] | None = None
) -> dict[str, int]:
    latest = tables.latest_per_key(
        tables.read_changelog(
            bootstrap_servers=bootstrap, topic=topic_name, timeout=60, kafka_config=config
        )
    )
    return {
        (key or b"").decode(): json.loads(value)["count"]
        for key, value in ((e.key, e.value) for e in latest.values())
        if value is not None
    }


def wait_table(
    bootstrap: str,
    topic_name: str,
    truth: Counter[str],
    *,
    timeout: float,
    config: Mapping[str, Any] | None = None,
) -> None:
    def exact() -> bool:
        try:
            return table_counts(bootstrap, topic_name, config=config) == dict(truth)
        except LookupError:  # the operator has not created the Table's topic yet
            return False

    wait_for(
        exact,
        timeout=timeout,
        interval=5,
        what=f"Table {topic_name} to equal the ground truth ({sum(truth.values())} words)",
    )


def pods(kube: Kube, namespace: str, role: str) -> list[dict[str, Any]]:
    return kube.api.list("pod", namespace, labels=f"rillet.io/role={role}")


def running(kube: Kube, namespace: str, role: str) -> list[dict[str, Any]]:
    return [p for p in pods(kube, namespace, role) if p["status"].get("phase") == "Running"]


def driver_running(kube: Kube, namespace: str) -> Callable[[], dict[str, Any] | None]:
    def probe() -> dict[str, Any] | None:
        found = running(kube, namespace, "driver")
        return found[0] if found else None

    return probe


def names(prefix: str) -> tuple[str, str, str]:
    """The App, its Topic and its Table (their Kafka topics under the test's prefix)."""
    return f"{prefix}-wc", f"{prefix}-lines", f"{prefix}-counts"


def start_word_count(
    kube: Kube,
    namespace: str,
    prefix: str,
    image: str,
    *,
    spark_conf: Mapping[str, str] | None = C1_ONLY,
) -> tuple[str, str, str]:
    """Apply the word-count App, its Topic and Table, and wait for its driver pod to run; the
    App's, Topic's and Table's names."""
    app, lines, counts = names(prefix)
    documents = word_count(
        app,
        namespace,
        image=image,
        reads=lines,
        writes=counts,
        sql=COUNT_WORDS,
        spark_conf=spark_conf,
    )
    apply(kube, *documents)
    wait_for(
        driver_running(kube, namespace), timeout=240, interval=2, what="the driver pod Running"
    )
    return app, lines, counts


@pytest.mark.usefixtures("operator")
def test_word_count_on_the_node_is_exact(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    runtime_image: str,
    kafka_bootstrap: str,
) -> None:
    app, lines, counts = start_word_count(
        kube, namespace, kafka_prefix, runtime_image, spark_conf=None
    )
    truth = produce_lines(kafka_bootstrap, lines, 100_000, seed=1)
    wait_table(kafka_bootstrap, counts, truth, timeout=600)
    status = get(kube, "app", app, namespace)["status"]
    executors = status["executors"]
    assert executors["cap"] == 6
    expected = min(executors["desired"], executors["cap"])
    wait_for(
        lambda: len(running(kube, namespace, "executor")) == expected,
        timeout=120,
        what=f"{expected} executor pods Running",
    )
    # Their JVMs started from the image's class archives (a JVM ignores one that does not fit).
    driver = running(kube, namespace, "driver")[0]["metadata"]["name"]
    executor = running(kube, namespace, "executor")[0]["metadata"]["name"]
    assert java_maps(kube, namespace, driver, "/opt/rillet/spark-classes.jsa")
    assert java_maps(kube, namespace, executor, "/opt/rillet/spark-executor-classes.jsa")
    # The executor initialized ICU's case mappings (lower() in the SQL) as it started.
    logs = kube.kubectl("logs", "-n", namespace, executor).stdout
    assert f"warm-up: initialized {ICU_CASE_MAPPINGS} in " in logs, logs[-3000:]


def java_maps(kube: Kube, namespace: str, pod: str, path: str) -> list[str]:
    """The processes of the pod that have the file mapped into memory (/proc/<pid>/maps)."""
    # grep says 1 when nothing matches, 2 for the maps of processes gone meanwhile.
    script = 'grep -l -s -F "$0" /proc/[0-9]*/maps || true'
    found = kube.kubectl("exec", "-n", namespace, pod, "--", "bash", "-c", script, path)
    return found.stdout.split()


def _kill_driver_container(kube: Kube, stack: devstack.StackState, namespace: str) -> None:
    """SIGKILL the driver's container through containerd, as the OOM killer would."""
    assert stack.node is not None
    driver = running(kube, namespace, "driver")[0]
    container = driver["status"]["containerStatuses"][0]["containerID"].removeprefix(
        "containerd://"
    )
    subprocess.run(
        [
            "ctr",
            "-a",
            str(stack.node.containerd_socket),
            "-n",
            "k8s.io",
            "tasks",
            "kill",
            "-s",
            "SIGKILL",
            container,
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )


@pytest.mark.usefixtures("operator")
def test_a_killed_driver_resumes_from_its_checkpoint(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    runtime_image: str,
    kafka_bootstrap: str,
    stack: devstack.StackState,
) -> None:
    _, lines, counts = start_word_count(kube, namespace, kafka_prefix, runtime_image)
    first = driver_running(kube, namespace)()
    assert first is not None
    truth = produce_lines(kafka_bootstrap, lines, 30_000, seed=2)
    wait_for(
        lambda: table_counts(kafka_bootstrap, counts),
        timeout=300,
        interval=3,
        what="the first counts in the Table",
    )
    _kill_driver_container(kube, stack, namespace)
    truth += produce_lines(kafka_bootstrap, lines, 30_000, seed=3)
    wait_for(
        lambda: (
            (d := driver_running(kube, namespace)())
            and d["status"]["containerStatuses"][0]["restartCount"] >= 1
        ),
        timeout=240,
        interval=2,
        what="the driver's container restarted",
    )
    kube.kubectl("delete", "pod", first["metadata"]["name"], "-n", namespace, "--wait=false")
    truth += produce_lines(kafka_bootstrap, lines, 30_000, seed=4)
    second = wait_for(
        lambda: (
            (d := driver_running(kube, namespace)())
            and d["metadata"]["uid"] != first["metadata"]["uid"]
            and d
        ),
        timeout=240,
        interval=2,
        what="a new driver pod Running",
    )
    assert second["metadata"]["name"] == first["metadata"]["name"]  # the StatefulSet's one pod
    wait_table(kafka_bootstrap, counts, truth, timeout=600)


def _suspend(kube: Kube, app: str, namespace: str, suspended: bool) -> None:
    patch = json.dumps({"spec": {"suspend": suspended}})
    kube.kubectl("patch", "app", app, "-n", namespace, "--type=merge", "-p", patch)


def suspend_until_pods_gone(kube: Kube, app: str, namespace: str) -> None:
    """Suspend the App and wait until its driver and executor pods are gone."""
    _suspend(kube, app, namespace, True)
    wait_for(
        lambda: not pods(kube, namespace, "driver") and not pods(kube, namespace, "executor"),
        timeout=180,
        interval=2,
        what="the suspended App's pods gone",
    )


def stalled(kube: Kube, app: str, namespace: str) -> Callable[[], dict[str, Any] | None]:
    """A probe: the App's Stalled condition once it is True, else None."""

    def probe() -> dict[str, Any] | None:
        found = condition(get(kube, "app", app, namespace), "Stalled")
        return found if found.get("status") == "True" else None

    return probe


@pytest.mark.usefixtures("operator")
def test_suspend_frees_the_pods_and_resume_continues_from_the_checkpoint(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    runtime_image: str,
    kafka_bootstrap: str,
) -> None:
    app, lines, counts = start_word_count(kube, namespace, kafka_prefix, runtime_image)
    truth = produce_lines(kafka_bootstrap, lines, 20_000, seed=6)
    wait_table(kafka_bootstrap, counts, truth, timeout=300)

    suspend_until_pods_gone(kube, app, namespace)
    assert get(kube, "app", app, namespace)["status"]["phase"] == "Suspended"
    truth += produce_lines(kafka_bootstrap, lines, 20_000, seed=7)

    _suspend(kube, app, namespace, False)
    wait_table(kafka_bootstrap, counts, truth, timeout=600)


@pytest.mark.usefixtures("operator")
def test_a_failing_pipeline_is_stalled_with_its_error(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    runtime_image: str,
    kafka_bootstrap: str,
) -> None:
    app, lines, counts = names(kafka_prefix)
    failing = (
        "SELECT raise_error(concat('bad line: ', value)) AS word, count(*) AS count "
        "FROM lines GROUP BY value"
    )
    apply(
        kube,
        *word_count(app, namespace, image=runtime_image, reads=lines, writes=counts, sql=failing),
    )
    produce_lines(kafka_bootstrap, lines, 10, seed=5)

    found = wait_for(
        stalled(kube, app, namespace), timeout=480, interval=5, what=f"App {app} Stalled"
    )
    assert found["reason"] == "DriverCrashLooping"
    assert "bad line: " in found["message"]
    assert "\n" not in found["message"].strip()


@pytest.mark.usefixtures("operator")
def test_executors_no_node_fits_make_the_app_not_ready_saying_why(
    kube: Kube, namespace: str, kafka_prefix: str, runtime_image: str
) -> None:
    app, lines, counts = names(kafka_prefix)
    documents = word_count(
        app, namespace, image=runtime_image, reads=lines, writes=counts, sql=COUNT_WORDS
    )
    documents[-1]["spec"]["executor"] = {"cpu": "64", "memory": "1Gi"}  # the node has 2
    documents[-1]["spec"]["scaling"] |= {"minExecutors": 3, "maxExecutors": 3}
    apply(kube, *documents)

    ready = wait_for(
        lambda: (
            (found := condition(get(kube, "app", app, namespace), "Ready"))
            and found.get("reason") == "ExecutorsUnschedulable"
            and found
        ),
        timeout=300,
        interval=2,
        what=f"App {app} not Ready, its executors unschedulable",
    )
    assert ready["status"] == "False", ready
    assert ready["message"].startswith("the driver is running, 0/3 executors ready (3 cannot be ")
    assert "Insufficient cpu" in ready["message"]
    # Flux and Argo CD wait for it, neither calls it healthy nor failed.
    (health,) = gitopshealth.assess([get(kube, "app", app, namespace)])
    assert (health.kstatus, health.argocd) == ("InProgress", "Progressing"), health


@pytest.mark.usefixtures("operator")
def test_a_deleted_checkpoint_volume_stalls_the_app_until_the_user_chooses(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    runtime_image: str,
    kafka_bootstrap: str,
) -> None:
    app, lines, counts = start_word_count(kube, namespace, kafka_prefix, runtime_image)
    truth = produce_lines(kafka_bootstrap, lines, 10_000, seed=8)
    wait_table(kafka_bootstrap, counts, truth, timeout=480)
    suspend_until_pods_gone(kube, app, namespace)
    claims = kube.kubectl("get", "pvc", "-n", namespace, "-o", "name").stdout.split()
    assert len(claims) == 1, claims
    kube.kubectl("delete", *claims, "-n", namespace, "--wait=true", "--timeout=120s")
    truth += produce_lines(kafka_bootstrap, lines, 5_000, seed=9)
    # Untouched: no record written (compaction may rewrite the log meanwhile, so its records
    # are not compared), and the same counts.
    offsets_before = end_offsets(kafka_bootstrap, counts)
    counts_before = table_counts(kafka_bootstrap, counts)

    _suspend(kube, app, namespace, False)

    found = wait_for(
        stalled(kube, app, namespace), timeout=300, interval=3, what=f"App {app} Stalled"
    )
    assert found["reason"] == "CheckpointLost", found
    assert found["message"].startswith("nothing was started and the Table is untouched")
    assert f"holds no offsets while topic {counts} holds records" in found["message"]
    assert end_offsets(kafka_bootstrap, counts) == offsets_before
    assert table_counts(kafka_bootstrap, counts) == counts_before

    patch = json.dumps({"spec": {"checkpoint": {"onLoss": "Recompute"}}})
    kube.kubectl("patch", "app", app, "-n", namespace, "--type=merge", "-p", patch)
    wait_table(kafka_bootstrap, counts, truth, timeout=480)
