"""Apps of the runtime tests run in this process: one local SparkSession shared by the tests (a
memory sink or view a test names itself gets a unique name), the run spec built from manifests,
and an App run to the end of its inputs (`run_app`), kept running (`running`), or waited on as a
driver process waits (`driven`). Every wait has a deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rillet.driverapi import runspecs
from rillet.reconcile import manifests
from rillet.runtime.batches import listening
from rillet.runtime.driver import driving, localspark
from rillet_devstack import spark as devspark


def spark_conf() -> dict[str, str]:
    """Spark settings of the tests' local session: the connector jars, no UI."""
    jars = [str(jar) for jar in devspark.spark_jars()]
    return localspark.local_spark_conf(jars=jars, master="local[2]")


def build_spec(
    documents: list[dict[str, Any]],
    *,
    bootstrap: str,
    checkpoint: Path,
    app: str | None = None,
    available_now: bool = True,
    schema_registry: runspecs.SchemaRegistry | None = None,
    **overrides: Any,
) -> runspecs.RunSpec:
    spec = manifests.build_run_spec_from_manifests(
        documents,
        bootstrap_servers=bootstrap,
        app_name=app,
        checkpoint_location=str(checkpoint),
        schema_registry=schema_registry,
    )
    if available_now:
        overrides["trigger"] = runspecs.TriggerSpec(available_now=True)
    return spec.model_copy(update=overrides)


def start_app(
    spec: runspecs.RunSpec, *, on_batch: Sequence[listening.BatchHandler] = ()
) -> driving.Driver:
    """Start an App's queries in this process's SparkSession."""
    spark = driving.build_session(
        spec, driving.RunOptions(master="local[2]", spark_conf=spark_conf())
    )
    driver = driving.Driver(spark, spec, on_batch=on_batch)
    try:
        driver.start()
    except BaseException:
        driver.close_catalog()  # refused before it ran: nobody else will close it
        raise
    return driver


def run_app(
    spec: runspecs.RunSpec,
    *,
    on_batch: Sequence[listening.BatchHandler] = (),
    timeout: float = 300,
) -> driving.Driver:
    """Run an App with an availableNow trigger to the end of its inputs, in this process;
    fail if it has not got there within `timeout` s."""
    driver = start_app(spec, on_batch=on_batch)
    try:
        wait_to_end(driver, timeout=timeout)
    finally:
        driver.stop()
        driver.close_catalog()  # its registry client's connections
    return driver


def wait_to_end(driver: driving.Driver, *, timeout: float = 300) -> None:
    """Wait until every query of an availableNow App has ended; fail after `timeout` s."""
    expired = threading.Event()
    timer = threading.Timer(timeout, expired.set)
    timer.start()
    try:
        driver.wait(stop=expired)
    finally:
        timer.cancel()
    if expired.is_set():
        raise AssertionError(f"App {driver.spec.app} did not end within {timeout}s")


@contextmanager
def running(
    spec: runspecs.RunSpec, *, on_batch: Sequence[listening.BatchHandler] = ()
) -> Iterator[driving.Driver]:
    """An App running continuously in this process while inside."""
    driver = start_app(spec, on_batch=on_batch)
    try:
        yield driver
    finally:
        driver.stop()
        driver.close_catalog()  # its registry client's connections


@contextmanager
def driven(spec: runspecs.RunSpec) -> Iterator[driving.Driver]:
    """An App running in this process as a driver process runs it, its queries waited on (so
    that one stopped by an Avro schema id it did not know is planned again) while inside; a
    failure of the App fails the block."""
    driver = start_app(spec)
    stop = threading.Event()
    failures: list[BaseException] = []

    def wait() -> None:
        try:
            driver.wait(stop)
        except Exception as error:  # raised in the test's thread, below
            failures.append(error)

    waiter = threading.Thread(target=wait, name=f"driver-{spec.app}", daemon=True)
    waiter.start()
    try:
        yield driver
    finally:
        stop.set()
        waiter.join(timeout=60)
        driver.stop()
        driver.close_catalog()  # its registry client's connections
    if failures:
        raise failures[0]
