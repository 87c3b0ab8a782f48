"""The App reconcile and the scaling loop, their decisions without a cluster.

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
- the scaling loop takes settled, unsuspended Apps not held back by their spec; it reconciles
  settled Apps held back by their spec; an Event only when the count changes; pods grouped by
  namespace, App and role; the stream inputs' Kafka topics and the consumer group of an App; a
  pass decides, reports the count it decided (with its Event) and keeps the decision's history,
  and tells the driver pod the count when the pod says another; it observes each input's
  partitions and lag (unknown where Kafka told nothing), the driver pod with its progress, and
  the Running executors; without Kafka, the cap is the one the status last gave, else the
  Topics' declared one, and neither the decision nor a new driver's initial executors pass it;
- the environment: the App settings win over what the operator itself uses;
- REST paths of the App's objects, the spec hash of a StatefulSet, a refusal's message; App
  pods listed in one request, or one per namespace with Apps when the rights are namespaced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from rillet.driverapi import desires
from rillet.k8s import applying
from rillet.kafka.lag import TopicLag
from rillet.reconcile import (
    appnotes,
    appobservations,
    appobserving,
    appresolving,
    appstatus,
    apptargets,
    notes,
    parallelisms,
    scaling,
    statuses,
)
from rillet.reconcile.appobjects import AppEnvironment
from rillet.settings import AppSettings, KafkaSettings, SchemaRegistrySettings
from tests.unit import wordcount_inputs

ENV = AppEnvironment(kafka_bootstrap="kafka:9092")
NAMESPACE = wordcount_inputs.NAMESPACE
UID = wordcount_inputs.UID
NOW = datetime(2026, 1, 1, tzinfo=UTC)
READY = wordcount_inputs.READY
NO_REGISTRY = SchemaRegistrySettings(url=None)


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


def _status(reason: str, message: str) -> dict[str, Any]:
    return {"conditions": [{"type": "Ready", "reason": reason, "message": message}]}


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


def _app(reason: str | None, *, observed: int = 2, suspend: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"observedGeneration": observed}
    if reason:
        status |= _status(reason, "")
    return {
        "metadata": {"name": "clicks", "namespace": NAMESPACE, "uid": UID, "generation": 2},
        "spec": {"suspend": suspend},
        "status": status,
    }


@pytest.mark.parametrize(
    ("body", "scalable", "reconciled"),
    [
        (_app("Running"), True, False),
        (_app("DriverCrashLooping"), True, False),
        (_app("DriverStarting", observed=1), False, False),
        (_app("Running", suspend=True), False, False),
        (_app("WaitingForTopics"), False, True),
        (_app("TopicsNotCoPartitioned"), False, True),
        (_app("InvalidSpec"), False, True),
        (_app("WaitingForTopics", observed=1), False, False),
    ],
)
def test_which_apps_the_loop_scales_or_reconciles(
    body: dict[str, Any], scalable: bool, reconciled: bool
) -> None:
    assert apptargets.is_scalable(body) is scalable
    assert apptargets.needs_reconcile(body) is reconciled


def test_an_event_only_when_the_count_changes() -> None:
    decision = scaling.ScalingDecision(
        desired=4, cap=6, reason="LagAbovePerExecutorTarget", message="lag of 4000", history=()
    )
    assert appnotes.scale_note(4, decision) == ()
    (note,) = appnotes.scale_note(2, decision)
    assert (note.reason, note.message) == ("ExecutorsScaled", "executors 2 to 4: lag of 4000")
    assert appnotes.scale_note(None, decision)[0].message == "executors 4: lag of 4000"


def test_pods_grouped_by_namespace_app_and_role() -> None:
    def pod(namespace: str, app: str, role: str) -> dict[str, Any]:
        labels = {"rillet.io/app": app, "rillet.io/role": role}
        return {"metadata": {"namespace": namespace, "labels": labels}}

    pods = [pod("a", "x", "driver"), pod("a", "x", "executor"), pod("a", "x", "executor")]
    pods.append(pod("b", "x", "executor"))
    grouped = apptargets.group_pods(pods)
    assert {key: len(found) for key, found in grouped.items()} == {
        ("a", "x", "driver"): 1,
        ("a", "x", "executor"): 2,
        ("b", "x", "executor"): 1,
    }


def test_a_target_reads_the_kafka_topics_of_its_stream_inputs() -> None:
    found = wordcount_inputs.bodies()
    found["Topic"]["spec"]["topicName"] = "text.sentences"
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    assert target.group == f"rillet.{NAMESPACE}.wordcount"
    assert target.inputs == (
        appobservations.StreamInput(
            name="sentences",
            topic=f"{NAMESPACE}.text.sentences",
            from_start=True,
            declared_partitions=3,
        ),
    )
    assert target.key == (NAMESPACE, "wordcount")


def test_a_scaling_pass_observes_inputs_pods_and_progress() -> None:
    found = wordcount_inputs.bodies()
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    assert apptargets.observe_inputs(target, {}) == (
        appobservations.InputObservation(name="sentences", topic=f"{NAMESPACE}.sentences"),
    )
    lags = {(target.group, f"{NAMESPACE}.sentences"): TopicLag(partitions=3, lag=1200)}
    inputs = apptargets.observe_inputs(target, lags)
    assert inputs[0].lag == 1200
    driver = {
        "metadata": {"annotations": {"rillet.io/progress": '{"rowsPerSecond": 12.5}'}},
        "status": {"phase": "Running", "containerStatuses": [{"name": "driver", "ready": True}]},
    }
    running: dict[str, Any] = {"metadata": {}, "status": {"phase": "Running"}}
    pods: dict[apptargets.PodKey, list[Mapping[str, Any]]] = {
        (NAMESPACE, "wordcount", "driver"): [driver],
        (NAMESPACE, "wordcount", "executor"): [running, running, {"status": {}}],
    }
    decision = scaling.ScalingDecision(desired=2, cap=3, reason="r", message="m", history=())
    observation = apptargets.observe(target, inputs, decision, pods)
    assert observation.driver is not None
    assert observation.driver.ready
    assert (observation.executors_desired, observation.executors_ready) == (2, 2)
    assert (observation.executors_cap, observation.rows_per_second) == (3, 12.5)
    alone = apptargets.observe(target, inputs, decision, {})
    assert (alone.driver, alone.executors_ready) == (None, 0)


def test_a_scaling_pass_decides_reports_and_keeps_its_history() -> None:
    found = wordcount_inputs.bodies()
    found["App"]["status"] = {"observedGeneration": 1, "executors": {"desired": 1}}
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    lags = {(target.group, f"{NAMESPACE}.sentences"): TopicLag(partitions=3, lag=4000)}
    decision = scaling.plan_executors(
        apptargets.policy_of(found["App"]["spec"]),
        partitions=parallelisms.Parallelism(input_partitions=3),
        lag=4000,
        history=(),
        current=1,
        now=100.0,
    )
    scaled = apptargets.derive_pass(target, lags, {}, history=(), now=100.0, at=NOW)
    assert scaled.history == decision.history
    assert scaled.report.status_patch["executors"]["desired"] == decision.desired
    assert decision.desired > 1  # a lag of 4000 asks for more than the one executor asked for
    assert scaled.report.notes[0] == appnotes.scale_note(1, decision)[0]


def test_a_scaling_pass_tells_the_driver_pod_its_count_when_it_says_another() -> None:
    found = wordcount_inputs.bodies()
    found["App"]["status"] = {"observedGeneration": 1, "executors": {"desired": 1}}
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    lags = {(target.group, f"{NAMESPACE}.sentences"): TopicLag(partitions=3, lag=4000)}
    driver: dict[str, Any] = {"metadata": {"name": "wordcount-driver-0"}}
    pods: dict[apptargets.PodKey, list[Mapping[str, Any]]] = {
        (NAMESPACE, "wordcount", "driver"): [driver]
    }

    def pass_() -> apptargets.Pass:
        return apptargets.derive_pass(target, lags, pods, history=(), now=100.0, at=NOW)

    desired = pass_().report.status_patch["executors"]["desired"]
    assert pass_().driver_patch == ("wordcount-driver-0", desires.build_desired_patch(desired))
    driver["metadata"]["annotations"] = {"rillet.io/executors-desired": str(desired)}
    assert pass_().driver_patch is None  # the pod says it already
    assert (
        apptargets.derive_pass(target, lags, {}, history=(), now=1.0, at=NOW).driver_patch is None
    )


def test_the_cap_of_a_pass_without_kafka_is_the_last_known_or_the_declared_one() -> None:
    found = wordcount_inputs.bodies()  # its Topic declares 3 partitions
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    unknown = apptargets.observe_inputs(target, {})
    stateful = {
        "metadata": {"annotations": {"rillet.io/progress": '{"statePartitions": 8}'}},
    }

    declared = apptargets.parallelism_of(target, unknown, None)
    reported = apptargets.parallelism_of(target, unknown, stateful)
    found["App"]["status"] = {"partitions": 2, "statePartitions": 4}
    known = apptargets.parallelism_of(target, unknown, None)

    assert declared == parallelisms.Parallelism(input_partitions=3)
    assert known == parallelisms.Parallelism(input_partitions=2, state_partitions=4)
    assert reported == parallelisms.Parallelism(input_partitions=3, state_partitions=8)


def test_an_operator_that_has_not_read_kafka_keeps_a_driver_within_the_cap() -> None:
    found = wordcount_inputs.bodies()
    found["App"]["spec"]["scaling"] = {"minExecutors": 5, "maxExecutors": 8}
    found["App"]["status"] = {"partitions": 2}
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    parallelism = apptargets.parallelism_of(target, apptargets.observe_inputs(target, {}), None)

    decision = scaling.plan_executors(
        apptargets.policy_of(found["App"]["spec"]),
        partitions=parallelism,
        lag=None,
        history=(),
        current=None,
        now=0.0,
    )
    resolved = appresolving.resolve(found["App"], wordcount_inputs.views(*found.values()), ENV)

    assert (decision.desired, decision.cap) == (2, 2)
    assert resolved.objects is not None
    assert resolved.objects.spark_conf["spark.executor.instances"] == "2"


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


def _pods_on(driver_node: str) -> dict[apptargets.PodKey, list[Mapping[str, Any]]]:
    def pod(name: str, node: str, uid: str) -> dict[str, Any]:
        meta = {"name": name, "uid": uid}
        return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": "Running"}}

    return {
        (NAMESPACE, "wordcount", "driver"): [pod("wordcount-driver-0", driver_node, "u0")],
        (NAMESPACE, "wordcount", "executor"): [
            pod("wordcount-exec-1", "n1", "u1"),
            pod("wordcount-exec-2", "n2", "u2"),
        ],
    }


def test_executors_on_a_lost_node_are_reported_first_and_released_the_pass_after() -> None:
    found = wordcount_inputs.bodies()
    views = wordcount_inputs.views(found["Topic"], found["Table"])
    lost = frozenset({"n2"})

    def scaled() -> apptargets.Pass:
        target = apptargets.target_of(found["App"], views)
        return apptargets.derive_pass(
            target, {}, _pods_on("n1"), history=(), now=1.0, at=NOW, lost_nodes=lost
        )

    first = scaled()
    assert first.report.status_patch["executors"]["lost"] == 1
    assert [n.reason for n in first.report.notes if n.reason == "ExecutorsLost"] == [
        "ExecutorsLost"
    ]
    assert first.released == ()  # the status says so before the pod goes

    found["App"]["status"] = {"executors": {"lost": 1}}
    second = scaled()
    assert second.released == (("wordcount-exec-2", "u2"),)
    assert not [n for n in second.report.notes if n.reason == "ExecutorsLost"]  # told once


def test_executors_lost_with_their_driver_are_not_released() -> None:
    found = wordcount_inputs.bodies()
    found["App"]["status"] = {"executors": {"lost": 1}}
    target = apptargets.target_of(
        found["App"], wordcount_inputs.views(found["Topic"], found["Table"])
    )
    # The driver on the lost node too (as a checkpoint volume's executors always are): the
    # App waits for its driver, and new executors could start nowhere else.
    scaled = apptargets.derive_pass(
        target, {}, _pods_on("n2"), history=(), now=1.0, at=NOW, lost_nodes=frozenset({"n2"})
    )
    assert scaled.released == ()
