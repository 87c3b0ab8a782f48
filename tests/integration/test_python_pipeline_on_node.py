"""A Python pipeline as users ship it, on the node: their package in an image FROM the runtime,
built and put on the nodes by `rillet dev image build`, run as driver and executor pods, and
rolled to a new version of the image (docs/python-pipelines.md).

The App is examples/python-sessions as shipped (its Topic, Table and App, their Kafka topics
under the test's prefix, small pods): `clicksessions.sessions:build` counts each user's clicks
per 5-minute window and lists the sections of the site they saw, with the UDF
`clicksessions.sections:section_of` of the same package.

Test plan (one App, so Spark starts twice: the first driver and the rolled one):
- the example's image (v1) is built by the command from the example's Dockerfile, and a v2 from
  a copy whose `section_of` names unknown sections by their first segment instead of `other`;
  the command prints the name the App's spec.image takes;
- clicks of a few users over two windows (event times of the last minutes, inside the App's
  allowed lateness, so none is dropped): the Table equals the visits the test computes in plain
  Python, with v1's sections;
- the UDF ran in an executor pod's Python worker: the executor's log holds the line the package
  prints when a worker loads its section map, naming the executor pod's host; the driver's
  (which only calls `build`) holds none;
- spec.image set to v2 rolls the driver: the first one stops at the end of a batch on SIGTERM, a
  new one runs v2; clicks produced then into the same windows are counted on top of the first
  ones (the state is carried across the roll) and their sections are v2's from its first
  batch on: the Table equals the ground truth exactly;
- then, the App deleted, two Apps of the v2 image whose pipelines give no DataFrames (the v2
  copy also holds a module that raises on import, and a function that returns a list): each is
  Stalled (DriverCrashLooping, which the kubelet's back-off gives) with the Python error's last
  line, its driver exited with 1 and restarted a few times at most, no executor pod left behind.
  (test_runtime_python_errors checks the same lines in process, with a missing function too.)
"""

from __future__ import annotations

import copy
import json
import random
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from rillet.tables import tables
from rillet_devstack import stack as devstack
from rillet_devstack import userimages

from . import nodes, podlogs
from . import runtime_helpers as rt
from .conftest import Kube
from .objects import apply, get
from .polling import wait_for
from .wordcounts import C1_ONLY, SMALL, driver_running, pods, running, stalled

# runtime_image: the stack's runtime, which the command builds the user's images FROM (and the
# fixture that puts the test in the node's group: one node test at a time).
pytestmark = pytest.mark.usefixtures("operator", "runtime_image")

EXAMPLE = rt.EXAMPLES / "python-sessions"
WINDOW = timedelta(minutes=5)
USERS = [f"user-{n}" for n in range(6)]
# Each page with its section as v1 of the example's UDF names it, and as the test's v2 does.
PAGES = {
    "/": ("home", "home"),
    "/products/42": ("shop", "shop"),
    "/cart": ("shop", "shop"),
    "/blog/streams": ("content", "content"),
    "/account/settings": ("account", "account"),
    "/pricing": ("other", "pricing"),
    "/about/team": ("other", "about"),
}
# v2: a page the map does not know is in a section named by its first segment.
V1_LINE = 'return _sections().get(first, "other")'
V2_LINE = "return _sections().get(first, first)"
# What a Python worker prints as it loads the package's map (clicksessions/sections.py).
LOADED = "clicksessions: 6 sections loaded on "
# Test-only modules the v2 copy holds beside the example's, and the lines their Apps stop with.
BROKEN = {
    "clicksessions.broken:build": (
        "broken.py",
        'raise RuntimeError("SECTIONS_URL is not set: no section map")\n',
        "RuntimeError: SECTIONS_URL is not set: no section map",
    ),
    "clicksessions.listed:build": (
        "listed.py",
        "def build(spark, inputs):\n    return [inputs['clicks']]\n",
        "PipelineError: clicksessions.listed:build returned list: it must return a DataFrame "
        "or a dict of DataFrames by result name",
    ),
}


@dataclass(frozen=True)
class Click:
    user_id: str
    page: str
    ts: datetime


Visits = dict[tuple[str, datetime], tuple[int, tuple[str, ...]]]


def expected_visits(clicks: list[tuple[Click, int]]) -> Visits:
    """The Table the App should write, in plain Python: per user and 5-minute window, the
    clicks and the sorted sections, each click's section as the version (0: v1, 1: v2) that
    counted it names it."""
    counts: Counter[tuple[str, datetime]] = Counter()
    sections: dict[tuple[str, datetime], set[str]] = {}
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    for click, version in clicks:
        start = epoch + (click.ts - epoch) // WINDOW * WINDOW
        counts[click.user_id, start] += 1
        sections.setdefault((click.user_id, start), set()).add(PAGES[click.page][version])
    return {key: (count, tuple(sorted(sections[key]))) for key, count in counts.items()}


def table_visits(bootstrap: str, topic: str) -> Visits:
    """The Table as its changelog holds it: the latest visit per key."""
    latest = tables.latest_per_key(
        tables.read_changelog(bootstrap_servers=bootstrap, topic=topic, timeout=60)
    )
    found: Visits = {}
    for entry in latest.values():
        visit = json.loads(entry.value or b"null")
        start = datetime.fromisoformat(visit["window_start"])
        assert datetime.fromisoformat(visit["window_end"]) - start == WINDOW, visit
        found[visit["user_id"], start] = (visit["clicks"], tuple(visit["sections"]))
    return found


def produce_clicks(bootstrap: str, topic: str, count: int, *, seed: int) -> list[Click]:
    """Clicks of USERS on PAGES, their event times over the last two 5-minute windows up to now
    (within the App's 10 minutes of allowed lateness: none is dropped)."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    first = now - (now - datetime(1970, 1, 1, tzinfo=UTC)) % WINDOW - WINDOW
    span = (now - first).total_seconds()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    clicks = []
    for _ in range(count):
        click = Click(
            rng.choice(USERS),
            rng.choice(list(PAGES)),
            first + timedelta(seconds=rng.uniform(0, span)),
        )
        value = {"user_id": click.user_id, "page": click.page, "ts": click.ts.isoformat()}
        producer.produce(topic, key=click.user_id.encode(), value=json.dumps(value).encode())
        clicks.append(click)
    assert producer.flush(60) == 0
    return clicks


@pytest.fixture
def image_builds(stack: devstack.StackState) -> Iterator[Callable[[Path, str], str]]:
    """`rillet dev image build -t TAG DIR`, as a user runs it; the name it prints. Afterwards
    the images are removed from buildah's store and from every node's containerd."""
    built: list[str] = []

    def build(directory: Path, tag: str) -> str:
        done = nodes.rillet("dev", "image", "build", "-t", tag, str(directory))
        assert done.returncode == 0, done.stderr[-3000:]
        built.append(userimages.normalized_reference(tag))
        return done.stdout.strip()

    yield build
    state = devstack.running() or stack
    sockets = [nodes.containerd_socket(state, n.name) for n in state.extra_nodes if n.running]
    assert state.node is not None
    for reference in built:
        subprocess.run(["buildah", "rmi", reference], capture_output=True, check=False)
        for socket in [state.node.containerd_socket, *sockets]:
            command = ["ctr", "-a", str(socket), "-n", "k8s.io", "images", "rm", reference]
            subprocess.run(command, capture_output=True, check=False)


def sessions_app(namespace: str, prefix: str, image: str) -> tuple[list[dict[str, Any]], str]:
    """The example's Topic, Table and App in the namespace, their Kafka topics under the
    prefix, with the image and small pods; the Table's Kafka topic."""
    documents = rt.load_manifests(EXAMPLE / "app.yaml")
    topics = rt.privatize(documents, prefix)
    for document in documents:
        document["metadata"]["namespace"] = namespace
    app = documents[-1]["spec"]
    app["image"] = image
    app["inputs"][0]["startingOffsets"] = "earliest"
    # One executor beside the driver: the node's two cores run the suite.
    app |= {"driver": SMALL, "executor": SMALL, "sparkConf": C1_ONLY}
    app["scaling"] = {"minExecutors": 1, "maxExecutors": 1}
    return documents, topics["user-visits"]


def v2_of_the_example(directory: Path) -> Path:
    """A copy of the example whose UDF names unknown sections by their first segment."""
    shutil.copytree(EXAMPLE, directory)
    source = directory / "pipeline" / "clicksessions" / "sections.py"
    text = source.read_text()
    assert text.count(V1_LINE) == 1, "the example's section_of changed: update V1_LINE"
    source.write_text(text.replace(V1_LINE, V2_LINE))
    for file, code, _ in BROKEN.values():
        (source.parent / file).write_text(code)
    return directory


def test_a_python_pipeline_from_its_image_runs_in_executors_and_rolls_to_a_new_image(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    kafka_bootstrap: str,
    image_builds: Callable[[Path, str], str],
    measurement: Callable[[str], None],
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    v1 = image_builds(EXAMPLE, f"{kafka_prefix}-sessions:v1")
    v2 = image_builds(v2_of_the_example(tmp_path / "v2"), f"{kafka_prefix}-sessions:v2")
    built = time.monotonic() - started
    assert (v1, v2) == (f"{kafka_prefix}-sessions:v1", f"{kafka_prefix}-sessions:v2")

    documents, visits = sessions_app(namespace, kafka_prefix, v1)
    app = documents[-1]["metadata"]["name"]
    clicks_topic = documents[0]["spec"]["topicName"]
    apply(kube, *documents)
    first = wait_for(
        driver_running(kube, namespace), timeout=300, interval=2, what="the v1 driver Running"
    )
    counted = [(c, 0) for c in produce_clicks(kafka_bootstrap, clicks_topic, 300, seed=1)]
    truth = expected_visits(counted)
    wait_for(
        lambda: table_visits(kafka_bootstrap, visits) == truth,
        timeout=300,
        interval=3,
        what=f"Table {visits} to equal v1's visits ({len(truth)})",
    )

    _the_udf_ran_in_an_executors_python_worker(kube, namespace, first["metadata"]["name"], v1)

    log = tmp_path / "v1-driver.log"
    with podlogs.following(kube, namespace, first["metadata"]["name"], log):
        change = [{"op": "replace", "path": "/spec/image", "value": v2}]
        kube.kubectl("patch", "app", app, "-n", namespace, "--type=json", "-p", json.dumps(change))
        second = wait_for(
            lambda: (
                (found := driver_running(kube, namespace)())
                and found["metadata"]["uid"] != first["metadata"]["uid"]
                and found
            ),
            timeout=300,
            interval=2,
            what="the v2 driver Running",
        )
    assert podlogs.GRACEFUL_STOP in log.read_text(errors="replace"), log.read_text()[-3000:]
    assert second["spec"]["containers"][0]["image"] == v2
    assert table_visits(kafka_bootstrap, visits) == truth, "the roll changed the Table"

    counted += [(c, 1) for c in produce_clicks(kafka_bootstrap, clicks_topic, 300, seed=2)]
    truth = expected_visits(counted)
    wait_for(
        lambda: table_visits(kafka_bootstrap, visits) == truth,
        timeout=300,
        interval=3,
        what=f"Table {visits} to equal v1's and v2's visits ({len(truth)})",
    )
    driver = get(kube, "pod", second["metadata"]["name"], namespace)
    assert driver["status"]["containerStatuses"][0]["restartCount"] == 0
    kube.kubectl("delete", "app", app, "-n", namespace, "--wait=true", "--timeout=120s")
    _broken_pipelines_stall_with_their_errors(kube, namespace, documents, v2)
    measurement(
        f"two images built and imported by `rillet dev image build` in {built:.0f} s; "
        f"{len(counted)} clicks into {len(truth)} visits across the roll from v1 to v2, exact"
    )


def _the_udf_ran_in_an_executors_python_worker(
    kube: Kube, namespace: str, driver: str, image: str
) -> None:
    """The executor pods run the App's image, and one's log holds the line a Python worker
    prints as the UDF first loads the package's map, naming the executor's host; the driver's
    log does not."""
    executors = running(kube, namespace, "executor")
    assert executors, "no executor pod Running"
    assert {p["spec"]["containers"][0]["image"] for p in executors} == {image}
    hosts = {p["spec"].get("hostname") or p["metadata"]["name"]: p for p in executors}
    said = {
        host: kube.kubectl("logs", "-n", namespace, pod["metadata"]["name"]).stdout
        for host, pod in hosts.items()
    }
    assert any(f"{LOADED}{host}" in text for host, text in said.items()), {
        host: text[-2000:] for host, text in said.items()
    }
    assert LOADED not in kube.kubectl("logs", "-n", namespace, driver).stdout


def _broken_pipelines_stall_with_their_errors(
    kube: Kube, namespace: str, documents: list[dict[str, Any]], image: str
) -> None:
    """An App per BROKEN entrypoint (the example's, with a Table of its own), at once: each
    Stalled with its line, its driver in the kubelet's back-off, no executor pod left."""
    _, table, app = documents
    for index, entrypoint in enumerate(BROKEN):
        broken_table = copy.deepcopy(table)
        broken_table["metadata"]["name"] = f"broken-{index}"
        broken_table["spec"]["topicName"] = f"{table['spec']['topicName']}-broken-{index}"
        broken_app = copy.deepcopy(app)
        broken_app["metadata"]["name"] = f"broken-{index}"
        broken_app["spec"] |= {"image": image, "pipeline": {"python": {"entrypoint": entrypoint}}}
        broken_app["spec"]["outputs"][0]["tableRef"]["name"] = f"broken-{index}"
        apply(kube, broken_table, broken_app)
    for index, (_, _, line) in enumerate(BROKEN.values()):
        name = f"broken-{index}"
        found = wait_for(
            stalled(kube, name, namespace), timeout=300, interval=3, what=f"{name} Stalled"
        )
        expected = ("DriverCrashLooping", f"{line} (exit code 1)")
        assert (found["reason"], found["message"]) == expected, found
        (driver,) = kube.api.list(
            "pod", namespace, labels=f"rillet.io/app={name},rillet.io/role=driver"
        )
        # The operator saw the kubelet back off (CrashLoopBackOff): few restarts, each an exit.
        status = driver["status"]["containerStatuses"][0]
        assert status["restartCount"] <= 4, status
        assert status["lastState"]["terminated"]["exitCode"] == 1, status
    wait_for(
        lambda: not pods(kube, namespace, "executor"),
        timeout=120,
        interval=2,
        what="no executor pod of the stalled Apps",
    )
