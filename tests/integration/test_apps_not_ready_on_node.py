"""Apps that cannot run on the node, and say why: the App is Stalled or not Ready, its condition
giving the reason, and what it could not do leaves no trace.

The word count that does run, through a killed driver, a suspension and a lost volume:
test_apps_on_node.py.

Test plan:
- a pipeline that fails at run time: the App is Stalled, with the error's last line; beside it
  (the two drivers start together), an App whose SQL reads the driver's ServiceAccount token
  file (`text.`<path>``, joined to its stream so that the token would become a key of its
  Table): it is not Ready, it is Stalled with the runtime's refusal (Spark reads no file
  by path: the path is an unknown table), and neither its Table's topic (read from Kafka), its
  status, its Events nor its driver's log hold the token the driver pod really mounts (read in
  the pod);
- three executors that fit no node: the running App is not Ready (ExecutorsUnschedulable, its
  message counting them with the scheduler's reason), and kstatus and Argo CD's health check
  read it as in progress.
"""

from __future__ import annotations

import json

import pytest

from rillet.tables import tables

from . import gitopshealth
from .conftest import Kube
from .objects import apply, condition, events, get
from .polling import wait_for
from .runtime_helpers import end_offsets
from .wordcounts import COUNT_WORDS, names, produce_lines, stalled, word_count

TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/token"
READS_THE_TOKEN = (
    "SELECT t.value AS word, count(*) AS count "
    f"FROM lines CROSS JOIN text.`{TOKEN_PATH}` t GROUP BY t.value"
)


def _mounted_token(kube: Kube, namespace: str, app: str) -> str:
    """The ServiceAccount token the App's driver pod mounts, read in the pod while it runs."""

    def read() -> str | None:
        found = kube.kubectl(
            "exec", "-n", namespace, f"{app}-driver-0", "--", "cat", TOKEN_PATH, check=False
        )
        return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else None

    token = wait_for(read, timeout=300, interval=1, what=f"the token in {app}'s driver pod")
    assert token.startswith("eyJ"), "not a JWT: the wrong file"  # base64 of '{"'
    return token


@pytest.mark.usefixtures("operator")
def test_a_failing_pipeline_is_stalled_with_its_error_and_sql_cannot_read_the_token(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    runtime_image: str,
    kafka_bootstrap: str,
) -> None:
    app, lines, counts = names(kafka_prefix)
    reader, reader_lines, reader_counts = names(f"{kafka_prefix}-token")
    failing = (
        "SELECT raise_error(concat('bad line: ', value)) AS word, count(*) AS count "
        "FROM lines GROUP BY value"
    )
    apply(
        kube,
        *word_count(app, namespace, image=runtime_image, reads=lines, writes=counts, sql=failing),
        *word_count(
            reader,
            namespace,
            image=runtime_image,
            reads=reader_lines,
            writes=reader_counts,
            sql=READS_THE_TOKEN,
        ),
    )
    produce_lines(kafka_bootstrap, lines, 10, seed=5)
    produce_lines(kafka_bootstrap, reader_lines, 10, seed=6)
    token = _mounted_token(kube, namespace, reader)

    found = wait_for(
        stalled(kube, app, namespace), timeout=480, interval=5, what=f"App {app} Stalled"
    )
    assert found["reason"] == "DriverCrashLooping"
    assert "bad line: " in found["message"]
    assert "\n" not in found["message"].strip()

    refused = wait_for(
        stalled(kube, reader, namespace), timeout=480, interval=5, what=f"App {reader} Stalled"
    )
    assert refused["reason"] == "DriverCrashLooping", refused
    assert refused["message"].startswith(
        f"AnalysisException: [TABLE_OR_VIEW_NOT_FOUND] The table or view `text`.`{TOKEN_PATH}` "
        "cannot be found."
    ), refused
    shown = get(kube, "app", reader, namespace)
    assert condition(shown, "Ready").get("status") != "True", shown["status"]
    assert token not in json.dumps(shown), "the token is in the App"
    assert token not in json.dumps(events(kube, namespace, reader)), "the token is in an Event"
    for previous in ("--previous=false", "--previous=true"):
        logged = kube.kubectl("logs", "-n", namespace, f"{reader}-driver-0", previous, check=False)
        assert token not in logged.stdout, "the token is in the driver's log"
    # Nothing reached its Table (a write would move the end offsets, committed or not).
    assert set(end_offsets(kafka_bootstrap, reader_counts).values()) == {0}
    written = tables.read_changelog(bootstrap_servers=kafka_bootstrap, topic=reader_counts)
    assert not [e for e in written if token.encode() in (e.key or b"") + (e.value or b"")]


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
