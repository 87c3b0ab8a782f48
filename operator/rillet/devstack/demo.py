"""The demo on the local stack: the operator, the word-count example, Spark, a Table read back.

1. installs the operator with `helm install charts/rillet` (the image built from
   images/operator/Dockerfile, running as a pod on the stack's node), watching `rillet-demo`;
   on a stack without a node (`--no-node`), installs the CRDs and runs it as a local process;
2. applies examples/wordcount.yaml (a Topic, a Table, an App) and waits until the operator has
   made the topics in Kafka (the Table takes its partitions from the App's input);
3. produces sentences, runs the App on local Spark (`rillet run --available-now`);
4. reads counts back with `rillet table get` and compares them with counts made in Python.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from rillet.devstack import provisioning, tools
from rillet.devstack.operating import OperatorProcess
from rillet.devstack.stack import StackState

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "wordcount.yaml"
NAMESPACE = "rillet-demo"
OPERATOR_NAMESPACE = "rillet-system"
DEMO_TOPICS = ("sentences", "word-counts")
WORDS = ("kafka", "spark", "kubernetes", "stream", "table", "topic", "operator", "state")

Say = Callable[[str], None]


def _kubectl(state: StackState, *args: str) -> str:
    result = tools.run_kubectl(state.kubeconfig, args, timeout=180)
    result.check_returncode()
    return result.stdout


def _ready(state: StackState, kind: str, name: str) -> bool:
    obj = json.loads(_kubectl(state, "get", kind, name, "-n", NAMESPACE, "-o", "json"))
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _wait(probe: Callable[[], bool], timeout: float) -> None:
    Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(0.5),
        retry=retry_if_result(lambda done: not done),
        reraise=True,
    )(probe)
    if not probe():
        raise TimeoutError("the demo's objects did not reach the state it waits for")


def _produce(state: StackState, count: int) -> Counter[str]:
    rng = random.Random(7)
    producer = Producer({"bootstrap.servers": state.kafka_bootstrap})
    truth: Counter[str] = Counter()
    for _ in range(count):
        sentence = [rng.choice(WORDS) for _ in range(rng.randint(3, 9))]
        truth.update(sentence)
        producer.produce("sentences", value=" ".join(sentence).capitalize().encode())
    producer.flush(30)
    return truth


def _rillet(state: StackState, *args: str) -> str:
    env = {**os.environ, "RILLET_KAFKA_BOOTSTRAP": state.kafka_bootstrap}
    return subprocess.run(
        [sys.executable, "-m", "rillet.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    ).stdout


def _drop_topics_of_earlier_runs(state: StackState) -> None:
    # The example's objects keep their topics when deleted (deletionPolicy Retain): a new run
    # must not count the sentences of the last one.
    admin = AdminClient({"bootstrap.servers": state.kafka_bootstrap})
    existing = [t for t in DEMO_TOPICS if t in admin.list_topics(timeout=10).topics]
    for future in admin.delete_topics(existing).values() if existing else ():
        future.result(timeout=30)
    _wait(lambda: not set(DEMO_TOPICS) & set(admin.list_topics(timeout=10).topics), timeout=60)


def _helm(state: StackState, *args: str) -> str:
    result = subprocess.run(
        [str(provisioning.HELM.directory / "helm"), f"--kubeconfig={state.kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if result.returncode != 0:  # helm says what went wrong on stderr: show it
        raise RuntimeError(f"helm {args[0]} failed: {result.stderr.strip()}")
    return result.stdout


def _install_operator(state: StackState, say: Say) -> None:
    """`helm install` the chart with the operator image the stack built from its Dockerfile."""
    assert state.node is not None
    repository, tag = state.node.images["operator"].rsplit(":", 1)
    _helm(
        state,
        "upgrade",
        "--install",
        "rillet",
        str(REPO / "charts" / "rillet"),
        "--namespace",
        OPERATOR_NAMESPACE,
        "--create-namespace",
        "--set",
        f"image.repository={repository}",
        "--set",
        f"image.tag={tag}",
        "--set",
        "image.pullPolicy=Never",
        "--set",
        f"kafka.bootstrapServers={state.kafka_bootstrap}",
        "--set",
        f"watchNamespaces={{{NAMESPACE}}}",
        "--set",
        "operator.resyncSeconds=10",
        "--wait",
        "--timeout=240s",
    )
    say(
        f"helm install charts/rillet: operator image {state.node.images['operator']} running:\n"
        + _kubectl(state, "get", "pods", "-n", OPERATOR_NAMESPACE, "-o", "wide")
    )


def run(state: StackState, say: Say) -> None:
    """Run the whole demo, saying what happens; raise if any step fails."""
    _kubectl(state, "delete", "namespace", NAMESPACE, "--ignore-not-found", "--timeout=120s")
    _drop_topics_of_earlier_runs(state)
    _kubectl(state, "create", "namespace", NAMESPACE)
    workdir = Path(tempfile.mkdtemp(prefix="rillet-demo-"))
    operator = None
    if state.node is not None:
        _install_operator(state, say)
    else:
        _kubectl(state, "apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
        operator = OperatorProcess(
            kubeconfig=state.kubeconfig,
            bootstrap=state.kafka_bootstrap,
            namespace_pattern=NAMESPACE,
            log=workdir / "operator.log",
            resync_seconds=10,
        )
        operator.start()
    try:
        _kubectl(state, "apply", "--server-side", "-n", NAMESPACE, "-f", str(EXAMPLE))
        _wait(
            lambda: _ready(state, "topic", "sentences") and _ready(state, "table", "word-counts"),
            timeout=120,
        )
        say(
            "operator made the topics in Kafka:\n"
            + _kubectl(state, "get", "rillet", "-n", NAMESPACE)
        )
        truth = _produce(state, 2_000)
        say(f"produced 2,000 sentences ({sum(truth.values())} words) to topic sentences")
        _rillet(
            state,
            "run",
            str(EXAMPLE),
            "--namespace",
            NAMESPACE,
            "--available-now",
            "--checkpoint-dir",
            str(workdir / "checkpoint"),
            "--master",
            "local[2]",
        )
        say("ran the word-count App on Spark (local[2]) until it had read everything")
        for word in sorted(truth)[:4]:
            value = json.loads(
                _rillet(state, "table", "get", "word-counts", word, "-f", str(EXAMPLE))
            )
            if value["count"] != truth[word]:
                raise RuntimeError(f"Table says {word}={value['count']}, expected {truth[word]}")
            say(
                f"rillet table get word-counts {word} -> {json.dumps(value)} "
                f"(expected {truth[word]})"
            )
    finally:
        if operator is not None:
            operator.stop()
    say(f"done. Explore: kubectl --kubeconfig {state.kubeconfig} get rillet -n {NAMESPACE}")
