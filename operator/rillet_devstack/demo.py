"""The demo on the local stack: the operator, the word-count example, Spark, a Table read back.

On the stack's node (the default), everything runs as the pods users run:
1. installs the operator with `helm install charts/rillet` (the image built from
   images/operator/Dockerfile), watching `rillet-demo`;
2. applies examples/wordcount.yaml (a Topic, a Table, an App), the App with the runtime image
   built from images/runtime/Dockerfile and requests small enough for this machine; the
   operator makes the topics and starts the App's Spark driver, which starts its executors;
3. produces sentences; the App counts them while running;
4. reads counts back with `rillet table get` until they equal counts made in Python.

Without a node (`rillet dev up --no-node`) the operator runs as a local process (CRDs applied by
hand) and the App runs once on local Spark (`rillet run --available-now`).
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

import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from rillet_devstack import installs, provisioning, tools
from rillet_devstack.operating import OperatorProcess
from rillet_devstack.stack import StackState

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "wordcount.yaml"
NAMESPACE = "rillet-demo"
OPERATOR_NAMESPACE = "rillet-system"
DEMO_TOPICS = ("sentences", "word-counts")
WORDS = ("kafka", "spark", "kubernetes", "stream", "table", "topic", "operator", "state")

Say = Callable[[str], None]


def _kubectl(state: StackState, *args: str, input: str | None = None) -> str:
    result = tools.run_kubectl(state.kubeconfig, args, input=input, timeout=180)
    result.check_returncode()
    return result.stdout


def _ready(state: StackState, kind: str, name: str) -> bool:
    obj = json.loads(_kubectl(state, "get", kind, name, "-n", NAMESPACE, "-o", "json"))
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _wait(probe: Callable[[], bool], timeout: float, what: str) -> None:
    done = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(0.5),
        retry=retry_if_result(lambda done: not done),
        retry_error_callback=lambda _: False,
    )(probe)
    if not done:
        raise TimeoutError(f"waited {timeout:.0f} s for {what}, in vain")


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
    _wait(
        lambda: not set(DEMO_TOPICS) & set(admin.list_topics(timeout=10).topics),
        timeout=60,
        what="Kafka to delete the topics of an earlier run",
    )


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
    values = installs.local_operator_values(
        operator_image=state.node.images["operator"],
        kafka_bootstrap=state.kafka_bootstrap,
        watched=NAMESPACE,
    )
    _helm(
        state,
        "upgrade",
        "--install",
        "rillet",
        str(REPO / "charts" / "rillet"),
        "--namespace",
        OPERATOR_NAMESPACE,
        "--create-namespace",
        *values,
        "--set",
        "operator.resyncSeconds=10",
        "--wait",
        "--timeout=240s",
    )
    say(
        f"helm install charts/rillet: operator image {state.node.images['operator']} running:\n"
        + _kubectl(state, "get", "pods", "-n", OPERATOR_NAMESPACE, "-o", "wide")
    )


def _objects_for_the_node(state: StackState) -> str:
    """The example as YAML, its App on the stack's runtime image with small requests: the
    driver and up to three executors share this machine's CPUs."""
    assert state.node is not None
    documents = [d for d in yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")) if d]
    for document in documents:
        if document["kind"] == "App":
            document["spec"] |= {
                "image": state.node.images["runtime"],
                "driver": dict(installs.NODE_DRIVER),
                "executor": dict(installs.NODE_EXECUTOR),
            }
    return yaml.safe_dump_all(documents)


def _executors_ready(state: StackState) -> int:
    """The demo App's executor pods Running, as its status counts them."""
    app = json.loads(_kubectl(state, "get", "app", "wordcount", "-n", NAMESPACE, "-o", "json"))
    return int(((app.get("status") or {}).get("executors") or {}).get("ready") or 0)


def _table_counts(state: StackState, words: list[str]) -> dict[str, int]:
    """The counts `rillet table get` reads for these words (0 where the Table has none yet)."""
    found = {}
    for word in words:
        args = ("table", "get", "word-counts", word, "-f", str(EXAMPLE))
        try:
            found[word] = json.loads(_rillet(state, *args))["count"]
        except subprocess.CalledProcessError as absent:  # exit 1: no such key (yet)
            if absent.returncode != 1:
                raise
            found[word] = 0
    return found


def _show_table(state: StackState, say: Say, truth: Counter[str], words: list[str]) -> None:
    for word, count in _table_counts(state, words).items():
        if count != truth[word]:
            raise RuntimeError(f"Table says {word}={count}, expected {truth[word]}")
        say(f"rillet table get word-counts {word} -> count {count} (expected {truth[word]})")


def _run_on_the_node(state: StackState, say: Say) -> None:
    _kubectl(
        state,
        "apply",
        "--server-side",
        "-n",
        NAMESPACE,
        "-f",
        "-",
        input=_objects_for_the_node(state),
    )
    _wait_topics(state, say)
    say("the App's Spark driver starts as a pod, then asks for its executors...")
    _wait(
        lambda: _ready(state, "app", "wordcount") and _executors_ready(state) >= 1,
        timeout=300,
        what=f"App wordcount Ready with an executor (kubectl describe app -n {NAMESPACE})",
    )
    say("the App's pods:\n" + _kubectl(state, "get", "pods", "-n", NAMESPACE, "-o", "wide"))
    truth = _produce(state, 2_000)
    say(f"produced 2,000 sentences ({sum(truth.values())} words) to topic sentences")
    words = sorted(truth)[:4]
    _wait(
        lambda: _table_counts(state, words) == {w: truth[w] for w in words},
        timeout=300,
        what="the Table to hold the counts of every sentence produced",
    )
    say("the running App counted them:")
    _show_table(state, say, truth, words)
    say("executors and lag:\n" + _kubectl(state, "get", "rillet", "-n", NAMESPACE))


def _run_locally(state: StackState, say: Say, workdir: Path) -> None:
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
        _wait_topics(state, say)
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
        _show_table(state, say, truth, sorted(truth)[:4])
    finally:
        operator.stop()


def _wait_topics(state: StackState, say: Say) -> None:
    _wait(
        lambda: _ready(state, "topic", "sentences") and _ready(state, "table", "word-counts"),
        timeout=120,
        what=f"Topic sentences and Table word-counts Ready (kubectl get rillet -n {NAMESPACE})",
    )
    say("operator made the topics in Kafka:\n" + _kubectl(state, "get", "rillet", "-n", NAMESPACE))


def run(state: StackState, say: Say) -> None:
    """Run the whole demo, saying what happens; raise if any step fails."""
    _kubectl(state, "delete", "namespace", NAMESPACE, "--ignore-not-found", "--timeout=120s")
    _drop_topics_of_earlier_runs(state)
    _kubectl(state, "create", "namespace", NAMESPACE)
    if state.node is not None:
        _install_operator(state, say)
        _run_on_the_node(state, say)
    else:
        _run_locally(state, say, Path(tempfile.mkdtemp(prefix="rillet-demo-")))
    say(f"done. Explore: kubectl --kubeconfig {state.kubeconfig} get rillet,pods -n {NAMESPACE}")
