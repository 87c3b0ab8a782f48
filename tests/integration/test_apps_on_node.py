"""Apps run as users run them: driver and executors as pods of the runtime image on the node.

The word count is stateful: its executors write Spark's state store under the checkpoint on
the driver's volume, so this is where a checkpoint the executors cannot reach would show.

Test plan:
- one word count App (Spark started once, and again where a story restarts it) through four
  stories in turn:
  - over 100,000 lines in 6 partitions, run as users get it: the Table equals the ground truth
    exactly, and the executor pods running equal min(desired, cap); their JVMs map the image's
    class archives and initialized ICU's case mappings as they started (the warm-up plugin);
  - the driver killed mid-stream (its container SIGKILLed, then its pod deleted): the App
    resumes from its checkpoint and the Table is still exact;
  - suspended, the App has no pods; lines produced meanwhile are counted once it resumes, from
    its checkpoint (the Table exact: nothing lost, nothing counted twice);
  - the checkpoint volume deleted while the App is suspended: on resume the App is Stalled
    (CheckpointLost) and its Table is untouched; with checkpoint.onLoss Recompute the Table
    equals the ground truth again (the input holds its whole history).

Apps that cannot run, and say why (a failing pipeline, SQL reaching for the token, executors
no node fits): test_apps_not_ready_on_node.py.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Callable

import pytest

from rillet_devstack import stack as devstack

from . import nodes, sparktraffic
from .conftest import Kube
from .objects import apply, get
from .polling import wait_for
from .runtime_helpers import end_offsets
from .wordcounts import (
    COUNT_WORDS,
    driver_running,
    names,
    pods,
    produce_lines,
    running,
    stalled,
    table_counts,
    wait_table,
    word_count,
)

ICU_CASE_MAPPINGS = "org.apache.spark.sql.catalyst.util.CollationAwareUTF8String"


def start_word_count(
    kube: Kube,
    namespace: str,
    prefix: str,
    image: str,
) -> tuple[str, str, str]:
    """Apply the word-count App, its Topic and Table (its JVMs as users get them: no
    sparkConf), and wait for its driver pod to run; the App's, Topic's and Table's names."""
    app, lines, counts = names(prefix)
    documents = word_count(
        app,
        namespace,
        image=image,
        reads=lines,
        writes=counts,
        sql=COUNT_WORDS,
        spark_conf=None,
    )
    apply(kube, *documents)
    wait_for(
        driver_running(kube, namespace), timeout=240, interval=2, what="the driver pod Running"
    )
    return app, lines, counts


@pytest.mark.usefixtures("operator")
def test_a_word_count_stays_exact_through_a_killed_driver_a_suspension_and_a_lost_volume(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    runtime_image: str,
    kafka_bootstrap: str,
    stack: devstack.StackState,
    new_namespace: Callable[..., str],
) -> None:
    """One App, so Spark starts once, through the stories of a volume checkpoint in turn, on node 1
    (its volume binds it there): one node's story. (A CI run saw it stop counting with its driver
    on node 2, which earlier tests had crashed and restarted; not understood yet.)"""
    with nodes.only_node_1(kube):
        app, lines, counts = start_word_count(kube, namespace, kafka_prefix, runtime_image)
    truth = produce_lines(kafka_bootstrap, lines, 100_000, seed=1)
    wait_table(kafka_bootstrap, counts, truth, timeout=600)
    _runs_as_users_get_it(kube, app, namespace)
    _only_the_app_speaks_spark_to_its_driver(kube, app, namespace, new_namespace(), runtime_image)
    truth += _kill_the_driver_mid_stream(kube, namespace, stack, kafka_bootstrap, lines, counts)
    wait_table(kafka_bootstrap, counts, truth, timeout=600)

    suspend_until_pods_gone(kube, app, namespace)
    assert get(kube, "app", app, namespace)["status"]["phase"] == "Suspended"
    truth += produce_lines(kafka_bootstrap, lines, 20_000, seed=7)
    _suspend(kube, app, namespace, False)
    wait_table(kafka_bootstrap, counts, truth, timeout=600)

    suspend_until_pods_gone(kube, app, namespace)
    truth += _lose_the_volume_then_recompute(kube, app, namespace, kafka_bootstrap, lines, counts)
    wait_table(kafka_bootstrap, counts, truth, timeout=600)


def _runs_as_users_get_it(kube: Kube, app: str, namespace: str) -> None:
    """As many executors as the App wants within its cap; JVMs started from the image's class
    archives, and ICU's case mappings initialized by the warm-up plugin."""
    executors = get(kube, "app", app, namespace)["status"]["executors"]
    assert executors["cap"] == 6
    expected = min(executors["desired"], executors["cap"])
    wait_for(
        lambda: len(running(kube, namespace, "executor")) == expected,
        timeout=120,
        what=f"{expected} executor pods Running",
    )
    # A JVM ignores a class archive that does not fit it.
    driver = running(kube, namespace, "driver")[0]["metadata"]["name"]
    executor = running(kube, namespace, "executor")[0]["metadata"]["name"]
    assert java_maps(kube, namespace, driver, "/opt/rillet/spark-classes.jsa")
    assert java_maps(kube, namespace, executor, "/opt/rillet/spark-executor-classes.jsa")
    # lower() in the SQL: the executor initialized ICU's case mappings as it started.
    logs = kube.kubectl("logs", "-n", namespace, executor).stdout
    assert f"warm-up: initialized {ICU_CASE_MAPPINGS} in " in logs, logs[-3000:]


def _only_the_app_speaks_spark_to_its_driver(
    kube: Kube, app: str, namespace: str, elsewhere: str, image: str
) -> None:
    """The App's Spark key shows in no pod spec, ConfigMap, Event, status or log of its
    namespace; pods outside the App cannot open the driver's port, and strangers inside its
    fence that lack the key are refused (sparktraffic)."""
    key = sparktraffic.spark_key(kube, app, namespace)
    driver = running(kube, namespace, "driver")[0]
    ours = [p["metadata"]["name"] for p in [driver, *running(kube, namespace, "executor")]]
    assert sparktraffic.places_holding(kube, namespace, key, logs_of=ours) == []
    policy = get(kube, "networkpolicy", f"{app}-spark", namespace)
    assert policy["metadata"]["ownerReferences"][0]["name"] == app
    ip = driver["status"]["podIP"]
    outside = {"other-namespace": elsewhere, "no-app-label": namespace}
    for where, saw in sparktraffic.opens(kube, outside, image=image, ip=ip, port=7078).items():
        assert saw.startswith("not opened: TimeoutError"), (where, saw)
    labels = {"rillet.io/app": app}  # what the policy admits, as any pod of the namespace may
    said = sparktraffic.answers(kube, namespace, image=image, driver_ip=ip, key=key, labels=labels)
    assert sparktraffic.NOT_FOUND in said["own"], said["own"][-3000:]
    for stranger in ("no-secret", "wrong-secret"):
        # It reached the port, and was turned away there.
        assert f"{ip}:7078" in said[stranger], said[stranger][-3000:]
        assert sparktraffic.NOT_FOUND not in said[stranger], said[stranger][-3000:]


def _kill_the_driver_mid_stream(
    kube: Kube,
    namespace: str,
    stack: devstack.StackState,
    bootstrap: str,
    lines: str,
    counts: str,
) -> Counter[str]:
    """Lines counted, then the driver's container SIGKILLed (restarted in place), then its pod
    deleted (the StatefulSet's one pod made anew), lines produced all along; what was produced."""
    first = driver_running(kube, namespace)()
    assert first is not None
    before = table_counts(bootstrap, counts)
    truth = produce_lines(bootstrap, lines, 30_000, seed=2)
    wait_for(
        lambda: table_counts(bootstrap, counts) != before,
        timeout=300,
        interval=3,
        what="new counts in the Table",
    )
    _kill_driver_container(kube, stack, namespace)
    truth += produce_lines(bootstrap, lines, 30_000, seed=3)
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
    truth += produce_lines(bootstrap, lines, 30_000, seed=4)
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
    assert second["metadata"]["name"] == first["metadata"]["name"]
    return truth


def java_maps(kube: Kube, namespace: str, pod: str, path: str) -> list[str]:
    """The processes of the pod that have the file mapped into memory (/proc/<pid>/maps)."""
    # grep says 1 when nothing matches, 2 for the maps of processes gone meanwhile.
    script = 'grep -l -s -F "$0" /proc/[0-9]*/maps || true'
    found = kube.kubectl("exec", "-n", namespace, pod, "--", "bash", "-c", script, path)
    return found.stdout.split()


def _kill_driver_container(kube: Kube, stack: devstack.StackState, namespace: str) -> None:
    """SIGKILL the driver's container through its node's containerd, as the OOM killer would."""
    driver = running(kube, namespace, "driver")[0]
    container = driver["status"]["containerStatuses"][0]["containerID"].removeprefix(
        "containerd://"
    )
    subprocess.run(
        [
            "ctr",
            "-a",
            str(nodes.containerd_socket(stack, driver["spec"]["nodeName"])),
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


def _lose_the_volume_then_recompute(
    kube: Kube, app: str, namespace: str, bootstrap: str, lines: str, counts: str
) -> Counter[str]:
    """The suspended App's checkpoint volume deleted: Stalled on resume with its Table untouched,
    then recomputed from the input's history once the user chooses; the lines produced."""
    claims = kube.kubectl("get", "pvc", "-n", namespace, "-o", "name").stdout.split()
    assert len(claims) == 1, claims
    kube.kubectl("delete", *claims, "-n", namespace, "--wait=true", "--timeout=120s")
    truth = produce_lines(bootstrap, lines, 5_000, seed=9)
    # Untouched: no record written (compaction may rewrite the log meanwhile, so its records
    # are not compared), and the same counts.
    offsets_before = end_offsets(bootstrap, counts)
    counts_before = table_counts(bootstrap, counts)

    _suspend(kube, app, namespace, False)

    found = wait_for(
        stalled(kube, app, namespace), timeout=300, interval=3, what=f"App {app} Stalled"
    )
    assert found["reason"] == "CheckpointLost", found
    assert found["message"].startswith("nothing was started and the Table is untouched")
    assert f"holds no offsets while topic {counts} holds records" in found["message"]
    assert end_offsets(bootstrap, counts) == offsets_before
    assert table_counts(bootstrap, counts) == counts_before

    patch = json.dumps({"spec": {"checkpoint": {"onLoss": "Recompute"}}})
    kube.kubectl("patch", "app", app, "-n", namespace, "--type=merge", "-p", patch)
    return truth
