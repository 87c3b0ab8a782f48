"""The driver in its pod: settings, the loop beside the App, what `rillet drive` refuses (the
reason of a failure in one line: test_runtime_failure_summaries).

Test plan:
- the pod's identity comes from the downward-API variables (empty = unset); the operator's
  Spark conf JSON must be an object of scalars (errors never quote values);
- the driver conf: the operator's settings, defaults for the app name and jars, the pod's
  address and name always; a k8s master without POD_IP or POD_NAME is refused;
- the loop reads the desired count (on its pod) every tick and applies it, reports progress on
  its first tick, when due and after a scale action, never patches the same value twice, retries a
  failed patch, and keeps going when its pod cannot be read (one warning per new problem); a
  changed count is applied at once; outside a cluster the App runs without the loop;
- `rillet drive` refuses a bad run spec, a missing template, a missing pod address, before
  starting Spark, with the reason on stderr and in the termination log (exit 1).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from rillet.cli import apps
from rillet.driverapi import reports, wiring
from rillet.reconcile import manifests
from rillet.runtime.pod import incluster, reporting, scaling

EXAMPLES = Path(__file__).parents[2] / "examples"
POD = incluster.PodIdentity(pod_name="wc-0", pod_ip="10.0.0.7", namespace="ns", app_name="wc")


def test_pod_identity_from_the_environment() -> None:
    pod = incluster.PodIdentity.from_environ(
        {"POD_NAME": "wc-0", "POD_IP": "10.0.0.7", "POD_NAMESPACE": "", "RILLET_APP_NAME": "wc"}
    )
    assert pod == incluster.PodIdentity(
        pod_name="wc-0", pod_ip="10.0.0.7", namespace=None, app_name="wc"
    )


def test_spark_conf_json() -> None:
    text = json.dumps({"spark.master": "k8s://x", "spark.executor.instances": 2, "b": False})
    assert wiring.parse_spark_conf_json(text) == {
        "spark.master": "k8s://x",
        "spark.executor.instances": "2",
        "b": "false",
    }
    assert wiring.parse_spark_conf_json(None) == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"secret-value', "is not JSON"),
        ('["secret-value"]', "must be a JSON object"),
        ('{"a": {"secret-value": 1}}', "a must be a string"),
    ],
)
def test_bad_spark_conf_json_is_refused_without_quoting_it(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        wiring.parse_spark_conf_json(text)
    assert "secret-value" not in str(caught.value)


def test_driver_conf_adds_the_pod_and_keeps_the_operators_choices() -> None:
    conf = incluster.build_drive_conf(
        operator_conf={
            "spark.master": "k8s://https://kubernetes.default.svc:443",
            "spark.jars": "/op/a.jar",
            "spark.driver.host": "wrong",
        },
        pod=POD,
        app_name="wc",
        jars="/img/a.jar,/img/b.jar",
        executor_pod_template="/etc/rillet/executor-pod-template.yaml",
    )
    assert conf == {
        "spark.app.name": "wc",
        "spark.jars": "/op/a.jar",
        "spark.master": "k8s://https://kubernetes.default.svc:443",
        "spark.driver.host": "10.0.0.7",
        "spark.kubernetes.driver.pod.name": "wc-0",
        "spark.kubernetes.executor.podTemplateFile": "/etc/rillet/executor-pod-template.yaml",
    }
    local = incluster.build_drive_conf(
        operator_conf={},
        pod=incluster.PodIdentity(pod_name=None, pod_ip=None, namespace=None, app_name=None),
        app_name="wc",
        jars="/img/a.jar",
        executor_pod_template=None,
    )
    assert local == {"spark.app.name": "wc", "spark.jars": "/img/a.jar"}


def test_a_driver_on_kubernetes_needs_its_pod_address_and_name() -> None:
    nobody = incluster.PodIdentity(pod_name=None, pod_ip=None, namespace=None, app_name=None)
    k8s = {"spark.master": "k8s://https://kubernetes.default.svc:443"}
    assert incluster.missing_pod_settings(k8s, nobody) == ["POD_IP", "POD_NAME"]
    assert incluster.missing_pod_settings(k8s, POD) == []
    assert incluster.missing_pod_settings({"spark.master": "local[1]"}, nobody) == []


class FakeKube:
    def __init__(self, desired: int | None) -> None:
        self.pod_name = "wc-driver-0"
        self.desired = desired
        self.read_error: Exception | None = None
        self.patch_error: Exception | None = None
        self.patched: list[dict[str, Any]] = []
        self.closed = False
        self.changes: queue.Queue[int | None] = queue.Queue()

    def read_desired(self) -> int | None:
        if self.read_error is not None:
            raise self.read_error
        return self.desired

    def watch_desired(self, timeout_seconds: int) -> Iterator[int | None]:
        """Each count put in `changes` (it becomes the pod's); a watch request ends when
        none comes for a while, as the apiserver's do."""
        while True:
            try:
                self.desired = self.changes.get(timeout=0.05)
            except queue.Empty:
                return
            yield self.desired

    def patch_progress(self, report: reports.Progress) -> None:
        if self.patch_error is not None:
            raise self.patch_error
        self.patched.append(json.loads(report.to_json()))

    def close(self) -> None:
        self.closed = True


class FakeSpark:
    def __init__(self, ids: list[str]) -> None:
        self.executors = [scaling.ExecutorState(id=i, active_tasks=0) for i in ids]
        self.calls: list[tuple[str, Any]] = []

    def configured_instances(self) -> str | None:
        return str(len(self.executors))

    def registered(self) -> list[scaling.ExecutorState]:
        return list(self.executors)

    def request_total(self, total: int) -> bool:
        self.calls.append(("request", total))
        return True

    def kill(self, ids: Any) -> bool:
        self.calls.append(("kill", tuple(ids)))
        self.executors = [e for e in self.executors if e.id not in ids]
        return True


def _loop(kube: FakeKube, spark: FakeSpark, now: list[float]) -> incluster.InClusterLoop:
    return incluster.InClusterLoop(
        kube=kube,
        scaler=scaling.Scaler(spark),
        tally=reporting.BatchTally(),
        application_id="spark-1",
        clock=lambda: now[0],
        report_seconds=5.0,
    )


def test_the_loop_scales_and_reports() -> None:
    now, kube, spark = [0.0], FakeKube(desired=None), FakeSpark(["1", "2"])
    loop = _loop(kube, spark, now)

    loop.tick()  # no desired count: only the start-up target and the first report
    assert spark.calls == [("request", 2)]
    assert [p["executors"] for p in kube.patched] == [2]
    assert kube.patched[0]["applicationId"] == "spark-1"

    now[0] = 2.0
    loop.tick()  # not due, nothing changed
    assert len(kube.patched) == 1

    kube.desired = 1
    now[0] = 4.0
    loop.tick()  # a scale action reports at once
    assert spark.calls[1:] == [("kill", ("2",)), ("request", 1)]
    assert [p["executors"] for p in kube.patched] == [2, 1]

    now[0] = 10.0
    loop.tick()  # due, but the same value: no patch
    assert len(kube.patched) == 2


class CallingSpark(FakeSpark):
    """A FakeSpark that says when it was asked for executors."""

    def __init__(self, ids: list[str]) -> None:
        super().__init__(ids)
        self.asked = threading.Event()

    def request_total(self, total: int) -> bool:
        self.asked.set()
        return super().request_total(total)


def test_a_changed_count_is_applied_at_once_not_at_the_next_period() -> None:
    kube, spark = FakeKube(desired=2), CallingSpark(["1", "2"])
    loop = incluster.InClusterLoop(
        kube=kube,
        scaler=scaling.Scaler(spark),
        tally=reporting.BatchTally(),
        application_id="spark-1",
        scale_seconds=3600,  # the period alone would not apply it within the test
    )
    loop.start()
    try:
        assert spark.asked.wait(timeout=10), "the first step"
        spark.asked.clear()
        kube.changes.put(1)
        assert spark.asked.wait(timeout=10), "the new count was not applied"
    finally:
        loop.stop()
    assert spark.calls == [("request", 2), ("kill", ("2",)), ("request", 1)]
    assert kube.closed


def test_the_loop_survives_failed_reads_and_patches(caplog: pytest.LogCaptureFixture) -> None:
    now, kube, spark = [0.0], FakeKube(desired=3), FakeSpark(["1"])
    kube.read_error = RuntimeError("connection refused")
    kube.patch_error = RuntimeError("forbidden")
    loop = _loop(kube, spark, now)

    with caplog.at_level(logging.DEBUG, logger="rillet.runtime.pod.incluster"):
        loop.tick()
        now[0] = 6.0
        loop.tick()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "reading pod wc-driver-0 failed: connection refused" in warnings[0].getMessage()
    assert kube.patched == []

    kube.read_error = kube.patch_error = None
    now[0] = 8.0
    loop.tick()
    assert spark.calls == [("request", 1), ("request", 3)]
    assert [p["executors"] for p in kube.patched] == [1]


def test_outside_a_cluster_the_app_runs_without_the_loop(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    spark: Any = object()  # never touched without a cluster

    with (
        caplog.at_level(logging.WARNING),
        incluster.alongside(spark, pod=POD, tally=reporting.BatchTally()),
    ):
        pass

    assert "not in a cluster" in caplog.text


def _spec_file(tmp_path: Path) -> Path:
    documents = list(yaml.safe_load_all((EXAMPLES / "wordcount.yaml").read_text()))
    spec = manifests.build_run_spec_from_manifests(
        [d for d in documents if isinstance(d, dict)],
        bootstrap_servers="kafka:9092",
        app_name=None,
        checkpoint_location="/var/lib/rillet/checkpoints",
        namespace="ns",
    )
    path = tmp_path / "run-spec.json"
    path.write_text(spec.model_dump_json())
    return path


def _drive(args: list[str], env: dict[str, str]) -> Any:
    app = typer.Typer()
    apps.register(app)
    return CliRunner().invoke(app, ["drive", *args], env=env)


K8S_CONF = json.dumps({"spark.master": "k8s://https://kubernetes.default.svc:443"})


@pytest.mark.parametrize(
    ("spec", "extra", "env", "reason"),
    [
        ("bad", [], {}, "is not a run spec: app: Field required"),
        ("missing", [], {}, "cannot read the run spec"),
        ("good", ["--executor-pod-template", "/no/such.yaml"], {}, "no file /no/such.yaml"),
        ("good", [], {"RILLET_SPARK_CONF_JSON": K8S_CONF}, "POD_IP, POD_NAME not set"),
        ("good", [], {"RILLET_SPARK_CONF_JSON": "{"}, "RILLET_SPARK_CONF_JSON is not JSON"),
        ("good", [], {"RILLET_SPARK_JARS": ""}, "RILLET_SPARK_JARS is not set"),
    ],
)
def test_drive_refuses_what_it_cannot_run(
    tmp_path: Path, spec: str, extra: list[str], env: dict[str, str], reason: str
) -> None:
    spec_path = {
        "good": _spec_file(tmp_path),
        "missing": tmp_path / "absent.json",
        "bad": tmp_path / "bad.json",
    }[spec]
    (tmp_path / "bad.json").write_text('{"kafka_config": {"sasl.password": "hunter2"}}')
    log = tmp_path / "termination-log"
    environment = {"RILLET_SPARK_JARS": "/img/a.jar", "POD_NAME": "", "POD_IP": "", **env}

    result = _drive([str(spec_path), *extra, "--termination-log", str(log)], environment)

    assert result.exit_code == 1
    assert reason in result.output
    assert reason in log.read_text()
    assert "hunter2" not in result.output + log.read_text()
