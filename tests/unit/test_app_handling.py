"""The App reconcile, its decisions without a cluster (the scaling loop's:
test_app_scaling_loop).

Test plan:
- resolve: an App whose Topics and Tables are all there and Ready gets its objects (owned by
  it, reading the Kafka topic of its Topic); a missing reference and one not Ready are named;
  inputs and the written Table of different partition counts are reported; a spec a builder
  refuses (a Table input without a schema) and one the model refuses are InvalidSpec, in one
  line, never an exception;
- the observation after a reconcile keeps the scaling loop's figures, for inputs still in the
  spec; a suspended App has none; its report lists the Events in order (Kafka access, the driver,
  the standing), and a second one with nothing new writes and posts nothing;
- Events: one when the standing's reason changes, one when a stalled App's message changes,
  none for a running App's changing figures; what applying did to the driver; what
  provisioning the App's Kafka principal changed, if anything;
- the environment: the App settings win over what the operator itself uses;
- REST paths of the App's objects, the spec hash of a StatefulSet, a refusal's message; App
  pods listed in one request, or one per namespace with Apps when the rights are namespaced.
"""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from rillet.k8s import applying
from rillet.reconcile import (
    appnotes,
    appobservations,
    appobserving,
    appresolving,
    appstatus,
    notes,
    statuses,
)
from rillet.settings import AppSettings, KafkaSettings, SchemaRegistrySettings
from tests.unit import wordcount_inputs

ENV = wordcount_inputs.ENV
NAMESPACE = wordcount_inputs.NAMESPACE
UID = wordcount_inputs.UID
NOW = wordcount_inputs.NOW
NO_REGISTRY = SchemaRegistrySettings(url=None)
_status = wordcount_inputs.ready_status


def test_an_app_with_everything_ready_gets_its_objects() -> None:
    found = wordcount_inputs.bodies()
    resolution = appresolving.resolve(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"]), ENV
    )
    assert resolution.objects is not None
    assert not resolution.spec_problems
    assert resolution.references.ok
    owners = resolution.objects.stateful_set["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [("App", "wordcount", UID)]
    run_spec = json.loads(resolution.objects.config_map["data"]["run-spec.json"])
    # Named <namespace>.<name>, as the operator names Kafka topics by default.
    assert [i["topic"] for i in run_spec["inputs"]] == [f"{NAMESPACE}.sentences"]
    assert run_spec["bootstrap_servers"] == "kafka:9092"


def test_missing_and_unready_references_are_named() -> None:
    found = wordcount_inputs.bodies()
    found["Table"]["status"] = {}
    resolution = appresolving.resolve(found["App"], wordcount_inputs.views(found["Table"]), ENV)
    assert resolution.objects is None
    assert resolution.references.missing == ("Topic sentences",)
    assert resolution.references.unready == ("Table word-counts",)


def test_a_written_table_of_another_partition_count_is_reported() -> None:
    found = wordcount_inputs.bodies()
    found["Table"]["spec"]["partitions"] = 2
    resolution = appresolving.resolve(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"]), ENV
    )
    assert resolution.objects is None
    assert resolution.copartitioning == (
        "Table word-counts has 2 partitions but the inputs have 3: set its spec.partitions to 3 "
        "(or remove it to follow the inputs)",
    )


def test_a_spec_the_builders_refuse_is_a_problem_not_an_exception() -> None:
    found = wordcount_inputs.bodies()
    del found["Table"]["spec"]["valueSchema"]
    found["Table"]["spec"]["valueFormat"] = "json"
    found["App"]["spec"]["inputs"].append({"name": "counts", "tableRef": {"name": "word-counts"}})
    views = wordcount_inputs.views(found["Topic"], found["Table"])
    resolution = appresolving.resolve(found["App"], views, ENV)
    assert resolution.objects is None
    assert resolution.spec_problems == (
        "input counts: Table word-counts has no valueSchema; give the input a schema",
    )


def test_a_spec_the_model_refuses_is_one_line() -> None:
    found = wordcount_inputs.bodies()
    found["App"]["spec"]["scaling"] = {"minExecutors": 5, "maxExecutors": 2}
    resolution = appresolving.resolve(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"]), ENV
    )
    (problem,) = resolution.spec_problems
    assert "minExecutors must not exceed scaling.maxExecutors" in problem
    assert "\n" not in problem
    assert "https://" not in problem


def test_an_observation_keeps_the_scaling_loops_figures() -> None:
    app = wordcount_inputs.bodies()["App"]
    app["status"] = {
        "executors": {"desired": 3, "cap": 3, "ready": 1},
        "inputs": [
            {"name": "sentences", "topic": "sentences", "partitions": 3, "lag": 40},
            {"name": "gone", "topic": "old", "partitions": 1, "lag": 1},
        ],
    }
    running = {"metadata": {}, "status": {"phase": "Running"}}
    observation = appobserving.observe(
        app, appresolving.Resolution(), driver_pod=None, executor_pods=[running, running]
    )
    assert (observation.executors_desired, observation.executors_cap) == (3, 3)
    assert observation.executors_ready == 2
    assert observation.inputs == (
        appobservations.InputObservation(name="sentences", topic="sentences", partitions=3, lag=40),
    )
    app["spec"]["suspend"] = True
    suspended = appobserving.observe(
        app, appresolving.Resolution(), driver_pod=None, executor_pods=[]
    )
    assert (suspended.executors_desired, suspended.executors_cap, suspended.inputs) == (
        None,
        None,
        (),
    )


def _standing(state: statuses.State, reason: str, message: str) -> appstatus.Standing:
    return appstatus.Standing("Running", statuses.Verdict(state, reason, message))


def test_events_follow_changes_of_standing_not_of_figures() -> None:
    running = _status("Running", "the driver is running, lag 10 records")
    busier = _standing("ready", "Running", "the driver is running, lag 99 records")
    assert appnotes.standing_notes(running, busier) == ()
    crashed = _standing("stalled", "DriverCrashLooping", "ValueError: boom")
    assert appnotes.standing_notes(running, crashed) == (
        notes.Note("Warning", "DriverCrashLooping", "ValueError: boom"),
    )
    stalled = _status("DriverCrashLooping", "ValueError: boom")
    assert appnotes.standing_notes(stalled, crashed) == ()
    other = _standing("stalled", "DriverCrashLooping", "KeyError: 'x'")
    assert appnotes.standing_notes(stalled, other)[0].type == "Warning"
    assert appnotes.standing_notes(None, busier)[0] == notes.Note(
        "Normal", "Running", "the driver is running, lag 99 records"
    )


def test_a_reconcile_reports_its_status_and_its_events_once() -> None:
    found = wordcount_inputs.bodies()
    resolution = appresolving.resolve(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"]), ENV
    )
    granted = appnotes.granted_notes("team.wordcount", ("allowed READ on sentences",))
    first = appobserving.derive_report(
        found["App"],
        resolution,
        driver_pod=None,
        executor_pods=[],
        granted=granted,
        applied=applying.Applied(created=True),
        at=NOW,
    )
    observation = appobserving.observe(found["App"], resolution, driver_pod=None, executor_pods=[])
    standing = appstatus.derive_standing(observation).verdict.reason
    assert [n.reason for n in first.notes] == ["KafkaAccessGranted", "DriverCreated", standing]
    assert first.status_patch["observedGeneration"] == 1
    assert first.verdict is None
    found["App"]["status"] = first.status_patch
    again = appobserving.derive_report(
        found["App"], resolution, driver_pod=None, executor_pods=[], at=NOW
    )
    assert again == notes.Report({})


def test_events_say_what_applying_did_to_the_driver() -> None:
    assert appnotes.applied_notes("clicks", None) == ()
    assert appnotes.applied_notes("clicks", applying.Applied()) == ()
    (created,) = appnotes.applied_notes("clicks", applying.Applied(created=True))
    assert (created.reason, "clicks-driver" in created.message) == ("DriverCreated", True)
    (replaced,) = appnotes.applied_notes(
        "clicks", applying.Applied(replaced=("volumeClaimTemplates",), rolled=True)
    )
    assert replaced.reason == "DriverReplaced"
    assert "volumeClaimTemplates" in replaced.message
    (rolled,) = appnotes.applied_notes("clicks", applying.Applied(rolled=True))
    assert rolled.reason == "DriverRolling"


def test_an_event_says_what_provisioning_the_kafka_principal_changed() -> None:
    assert appnotes.granted_notes("team.clicks", ()) == ()
    changes = ("set the password of SCRAM user team.clicks", "allowed READ on clicks")
    assert appnotes.granted_notes("team.clicks", changes) == (
        notes.Note(
            "Normal",
            "KafkaAccessGranted",
            "Kafka principal User:team.clicks: set the password of SCRAM user team.clicks; "
            "allowed READ on clicks",
        ),
    )


def test_app_settings_win_over_what_the_operator_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    kafka = KafkaSettings(bootstrap="127.0.0.1:9092")
    own = appresolving.environment(
        AppSettings(), kafka, NO_REGISTRY, apiserver_url="https://10.96.0.1:443"
    )
    assert (own.kafka_bootstrap, own.apiserver_url) == ("127.0.0.1:9092", "https://10.96.0.1:443")
    monkeypatch.setenv("RILLET_APP_KAFKA_BOOTSTRAP", "kafka.pods:9092")
    monkeypatch.setenv("RILLET_APP_APISERVER_URL", "https://api.pods:6443")
    monkeypatch.setenv("RILLET_APP_IMAGE_PULL_POLICY", "Never")
    monkeypatch.setenv("RILLET_APP_STORAGE_CLASS", "fast")
    env = appresolving.environment(
        AppSettings(), kafka, NO_REGISTRY, apiserver_url="https://10.96.0.1:443"
    )
    assert (env.kafka_bootstrap, env.apiserver_url) == ("kafka.pods:9092", "https://api.pods:6443")
    assert (env.image_pull_policy, env.storage_class) == ("Never", "fast")


def test_rest_paths_of_the_apps_objects() -> None:
    assert applying.object_path("v1", "ConfigMap", "team", "clicks-run") == (
        "/api/v1/namespaces/team/configmaps/clicks-run"
    )
    assert applying.object_path("rbac.authorization.k8s.io/v1", "Role", "team", "x") == (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles/x"
    )
    assert applying.object_path("v1", "Pod", "team") == "/api/v1/namespaces/team/pods"
    assert applying.object_path("v1", "Secret", "team", "clicks-kafka") == (
        "/api/v1/namespaces/team/secrets/clicks-kafka"
    )
    stateful_set = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "clicks-driver", "namespace": "team"},
        "spec": {"template": {"metadata": {"annotations": {"rillet.io/spec-hash": "abc"}}}},
    }
    assert applying.path_of(stateful_set) == (
        "/apis/apps/v1/namespaces/team/statefulsets/clicks-driver"
    )
    assert applying.spec_hash_of(stateful_set) == "abc"
    assert applying.spec_hash_of(None) is None


def test_app_pods_listed_cluster_wide_or_per_namespace() -> None:
    assert applying.app_pods_paths({"b", "a"}, namespaced=False) == ["/api/v1/pods"]
    assert applying.app_pods_paths({"b", "a"}, namespaced=True) == [
        "/api/v1/namespaces/a/pods",
        "/api/v1/namespaces/b/pods",
    ]


def test_a_refusal_says_what_the_apiserver_said() -> None:
    body = json.dumps({"kind": "Status", "message": 'StatefulSet "x" is invalid: spec: Forbidden'})
    error = ApiException(status=422, reason="Unprocessable Entity", body=body)
    assert applying.refusal_message(error) == 'StatefulSet "x" is invalid: spec: Forbidden'
    plain = ApiException(status=403, reason="Forbidden", body="not json")
    assert applying.refusal_message(plain) == "HTTP 403 Forbidden"
