"""The operator-driver contract: run-spec versions, the driver pod's Spark conf, built once.

Test plan:
- the operator writes the contract version into a run spec of a later version than the first,
  and leaves it out at the first (runtime images from before the version refuse the key); the
  driver reads back the run spec it was given;
- a run spec without a version is of the first version (every run spec written before it was);
- a run spec of another version is refused with a message saying the operator and the runtime
  image differ and which to change, and `rillet drive` writes that refusal (with its type, which
  reconcile.appstatus recognizes) to the termination log;
- the Spark conf a driver pod runs with is the operator's, not rebuilt from the run spec, and is
  the conf the driver built for itself before (run spec's conf, then the operator's);
- without an operator (`rillet run`), an s3a:// checkpoint gets the App's store endpoint, which
  the run spec does not carry, through the run options.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from rillet.cli import apps
from rillet.driverapi import runspecs, wiring
from rillet.reconcile import appstatus, manifests, sparkdefaults
from rillet.reconcile.appobjects import contexts, drivers, sparkconfs
from rillet.runtime.driver import driving
from rillet.runtime.pod import incluster

EXAMPLES = Path(__file__).parents[2] / "examples"
UID = "7d3c0a8e-0000-4000-8000-000000000001"


def _documents() -> list[dict[str, Any]]:
    documents = list(yaml.safe_load_all((EXAMPLES / "wordcount.yaml").read_text("utf-8")))
    for document in documents:
        if document["kind"] == "App":
            document["metadata"] |= {"namespace": "team", "uid": UID}
    return documents


def _context() -> contexts.AppContext:
    documents = _documents()
    app = manifests.parse_manifests(documents).apps["wordcount"]
    run_spec = manifests.build_run_spec_from_manifests(
        documents, bootstrap_servers="kafka:9092", checkpoint_location="/operator/default"
    )
    return contexts.build_context(app, run_spec, contexts.AppEnvironment(kafka_bootstrap="k:9092"))


def test_the_run_spec_carries_a_later_contract_version_and_reads_back() -> None:
    context = _context()

    text = drivers.render_run_spec(context)

    assert runspecs.CONTRACT_VERSION == runspecs.UNVERSIONED
    assert runspecs.VERSION_KEY not in json.loads(text)  # what runtime images before it read
    assert runspecs.parse(text, source="run-spec.json") == context.run_spec
    later = context.run_spec.model_copy(update={"contract_version": 2})
    assert json.loads(runspecs.render(later))[runspecs.VERSION_KEY] == 2


def test_a_run_spec_without_a_version_is_of_the_first_one() -> None:
    document = json.loads(runspecs.render(_context().run_spec))
    document.pop(runspecs.VERSION_KEY, None)

    parsed = runspecs.parse(json.dumps(document), source="old.json")

    assert parsed.contract_version == runspecs.UNVERSIONED == runspecs.CONTRACT_VERSION


@pytest.mark.parametrize(
    ("found", "advice"),
    [
        (runspecs.CONTRACT_VERSION + 1, "set the App's spec.image to the runtime image"),
        (0, "upgrade the operator"),
        ("x", "upgrade the operator"),
    ],
)
def test_a_run_spec_of_another_version_is_refused_saying_what_to_do(
    found: Any, advice: str
) -> None:
    document = {**json.loads(runspecs.render(_context().run_spec)), runspecs.VERSION_KEY: found}

    with pytest.raises(runspecs.ContractMismatchError) as caught:
        runspecs.parse(json.dumps(document), source="run-spec.json")

    message = str(caught.value)
    assert message == runspecs.mismatch_message(found)
    assert f"contract version {found}" in message
    assert "operator and the App's runtime image come from different Rillet releases" in message
    assert advice in message


def test_drive_writes_a_contract_mismatch_as_the_status_reads_it(tmp_path: Path) -> None:
    document = json.loads(runspecs.render(_context().run_spec)) | {runspecs.VERSION_KEY: 99}
    spec_path = tmp_path / "run-spec.json"
    spec_path.write_text(json.dumps(document))
    log = tmp_path / "termination-log"
    app = typer.Typer()
    apps.register(app)

    result = CliRunner().invoke(
        app,
        ["drive", str(spec_path), "--termination-log", str(log)],
        env={"RILLET_SPARK_JARS": "/img/a.jar"},
    )

    assert result.exit_code == 1
    written = log.read_text().strip()
    assert written.startswith(appstatus.CONTRACT_MISMATCH_ERROR)
    assert written.removeprefix(appstatus.CONTRACT_MISMATCH_ERROR) == runspecs.mismatch_message(99)


def test_the_driver_pod_runs_the_operators_conf_as_it_built_it_before() -> None:
    context = _context()
    sent = wiring.render_spark_conf(sparkconfs.build_spark_conf(context))
    pod = incluster.PodIdentity(
        pod_name="wc-driver-0", pod_ip="10.0.0.7", namespace="team", app_name="wordcount"
    )
    received = incluster.build_drive_conf(
        operator_conf=wiring.parse_spark_conf_json(sent),
        pod=pod,
        app_name=context.run_spec.app,
        jars="/img/a.jar",
        executor_pod_template=wiring.EXECUTOR_TEMPLATE_PATH,
    )
    options = driving.RunOptions(spark_conf=received, run_conf_included=True)

    conf = driving.session_conf(context.run_spec, options)

    run_conf = sparkdefaults.build_spark_conf(context.run_spec)
    assert conf == {**run_conf, **received}  # what the driver built for itself before
    assert conf.items() >= run_conf.items()


def test_without_an_operator_the_driver_builds_the_run_specs_conf() -> None:
    spec = _context().run_spec
    options = driving.RunOptions(spark_conf={"spark.ui.enabled": "false"})

    conf = driving.session_conf(spec, options)

    assert conf == {**sparkdefaults.build_spark_conf(spec), "spark.ui.enabled": "false"}


def test_without_an_operator_an_s3a_checkpoint_gets_the_apps_endpoint() -> None:
    spec = _context().run_spec.model_copy(update={"checkpoint_location": "s3a://b/wc"})
    options = driving.RunOptions(checkpoint_endpoint="http://127.0.0.1:8333")

    conf = driving.session_conf(spec, options)

    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:8333"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.sql.streaming.checkpointFileManagerClass"] == (
        sparkdefaults.S3A_CHECKPOINT_FILE_MANAGER
    )
