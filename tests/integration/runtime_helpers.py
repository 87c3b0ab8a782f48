"""Helpers of the runtime's integration tests: manifests with private topics, Kafka I/O, drivers.

Every test runs Apps against the real Kafka of the local stack with topics of its own (under
its `kafka_prefix`, deleted after it): the example manifests are loaded as they are and only
their Kafka topic names (spec.topicName) and partition counts are changed. Apps run either in
this process (`run_app`, sharing one local SparkSession: a memory sink or view a test names
itself gets a unique name) or as a `python -m rillet.cli run` subprocess (`cli_run`, in a
process group of its own that `killed_at_exit` ends as a whole).
Every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tenacity import retry, retry_if_exception, stop_after_delay, wait_fixed

from rillet.cli import apps
from rillet.driverapi import runspecs
from rillet.reconcile import manifests
from rillet.runtime.batches import listening
from rillet.runtime.driver import driving, localspark
from rillet.tables import tables, watermarks
from rillet_devstack import spark as devspark
from tests.integration.polling import wait_for

REPO = Path(__file__).parents[2]
EXAMPLES = REPO / "examples"


def unique(prefix: str, name: str) -> str:
    """A Kafka topic name under the test's prefix."""
    return f"{prefix}.{name}"


def load_manifests(source: Path | str) -> list[dict[str, Any]]:
    """YAML documents from a file or a string."""
    text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def privatize(
    documents: list[dict[str, Any]],
    prefix: str,
    *,
    partitions: Mapping[str, int] | None = None,
) -> dict[str, str]:
    """Give every Topic and Table a Kafka topic under `prefix`; returns object -> topic name.

    `partitions` sets spec.partitions of the named Topics and Tables.
    """
    names: dict[str, str] = {}
    for document in documents:
        if document.get("kind") in ("Topic", "Table"):
            name = document["metadata"]["name"]
            spec = document.setdefault("spec", {})
            spec["topicName"] = names[name] = unique(prefix, name)
            if partitions and name in partitions:
                spec["partitions"] = partitions[name]
    return names


def write_manifests(documents: list[dict[str, Any]], path: Path) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False), encoding="utf-8")
    return path


def create_topics(admin: AdminClient, topics: Sequence[NewTopic]) -> None:
    for future in admin.create_topics(list(topics)).values():
        future.result(timeout=30)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[str | bytes | None, str | bytes | None]],
    *,
    partitions: int | None = None,
    timestamps: Iterable[int] | None = None,
) -> int:
    """Produce (key, value) records; round-robin over `partitions` when given. Returns the count."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    stamps = iter(timestamps) if timestamps is not None else None
    count = 0
    for index, (key, value) in enumerate(records):
        extra: dict[str, Any] = {}
        if partitions:
            extra["partition"] = index % partitions
        if stamps is not None:
            extra["timestamp"] = next(stamps)
        producer.produce(topic, key=key, value=value, **extra)
        count += 1
        if count % 10_000 == 0:
            producer.flush(30)
    assert producer.flush(30) == 0
    return count


def read_topic(bootstrap: str, topic: str) -> list[tables.Entry]:
    """Every record of a topic, up to its current end."""
    return tables.read_changelog(bootstrap_servers=bootstrap, topic=topic, timeout=60)


def headers_of(
    bootstrap: str, topic: str, *, timeout: float = 60
) -> list[tuple[bytes | None, dict[str, str]]]:
    """(value, headers) of every record of a topic (up to its end offsets when called)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test.{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: watermarks.watermarks(consumer, topic, p, timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        found: list[tuple[bytes | None, dict[str, str]]] = []
        deadline = time.monotonic() + timeout
        # Positions, not a count of records: a transaction's commit marker takes an offset too.
        filled = [TopicPartition(topic, p) for p in partitions if ends[p] > 0]
        while any(
            position.offset < ends[position.partition] for position in consumer.position(filled)
        ):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"read {len(found)} records of {topic}, not to its end {ends}, in {timeout}s"
                )
            for message in consumer.consume(num_messages=1000, timeout=5):
                assert message.error() is None, message.error()
                raw = message.headers() or []
                pairs = raw.items() if isinstance(raw, dict) else raw  # consumers get a list
                headers = {
                    key: value.decode() if isinstance(value, bytes) else value
                    for key, value in pairs
                    if value is not None
                }
                found.append((message.value(), headers))
        return found
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """High watermark of each partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test.{uuid.uuid4().hex}"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: watermarks.watermarks(consumer, topic, p, timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


def _coordinator_moving(error: BaseException) -> bool:
    """A group's coordinator loading or moving (a fresh cluster's first group): ask again."""
    if not isinstance(error, KafkaException) or not error.args:
        return False
    cause = error.args[0]  # a KafkaError, or a message for errors the client makes up
    return isinstance(cause, KafkaError) and cause.code() in {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }


@retry(
    retry=retry_if_exception(_coordinator_moving),
    stop=stop_after_delay(30),
    wait=wait_fixed(0.2),
    reraise=True,
)
def _committed(consumer: Consumer, wanted: list[TopicPartition]) -> list[TopicPartition]:
    return consumer.committed(wanted, timeout=10)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """Offsets the consumer group has committed on a topic (absent partitions left out)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = _committed(consumer, [TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
    finally:
        consumer.close()


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


def cli_env() -> dict[str, str]:
    jars = ",".join(str(jar) for jar in devspark.spark_jars())
    return {**os.environ, apps.JARS_ENV: jars, "PYTHONUNBUFFERED": "1"}


@contextmanager
def killed_at_exit(
    process: subprocess.Popen[bytes], *, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """The process of a `cli_run` while inside; on the way out its whole process group (Python
    and the JVM it started) is SIGKILLed, whatever the test did: a hung driver, or one that
    was only sent SIGTERM, leaves nothing running into later tests. If the test failed while
    the driver still ran, its threads' stacks are first added to its `log`: where it hung."""
    try:
        yield process
    except BaseException as error:
        if log is not None and process.poll() is None:
            dump_stacks(process, log)
            error.add_note(f"the driver's Python and JVM thread stacks are at the end of {log}")
        raise
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _group(pgid: int) -> list[int]:
    """The processes of a process group (from /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError):  # gone meanwhile
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                members.append(int(stat.parent.name))
    return members


def jvms(process: subprocess.Popen[bytes]) -> list[int]:
    """The JVMs of a `cli_run` driver's process group."""
    found = []
    for pid in _group(process.pid):
        with suppress(OSError):  # gone meanwhile
            if Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                found.append(pid)
    return found


def maps(pid: int, path: Path) -> bool:
    """Whether the process has the file mapped into its memory."""
    return f" {path}\n" in Path(f"/proc/{pid}/maps").read_text()


def dump_stacks(process: subprocess.Popen[bytes], log: Path) -> None:
    """Have a `cli_run` driver print every thread's stack into its log: Python's (SIGUSR1,
    faulthandler) and its JVM's (SIGQUIT, the JVM's thread dump)."""
    with suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGUSR1)
    for pid in jvms(process):  # SIGQUIT would end anything but a JVM
        with suppress(OSError):
            os.kill(pid, signal.SIGQUIT)
    with suppress(AssertionError):  # a JVM too stuck to answer still leaves Python's stacks
        wait_for(
            lambda: "Full thread dump" in log.read_text(errors="replace"),
            timeout=10,
            what="the JVM's thread dump",
        )


def cli_run(manifest: Path, *args: str, log: Path) -> subprocess.Popen[bytes]:
    """`python -m rillet.cli run` in a session of its own (so its JVM can be killed with it:
    use it inside `killed_at_exit`)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "rillet.cli", "run", str(manifest), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=cli_env(),
            start_new_session=True,
        )


def start_driver(
    manifest: Path, bootstrap: str, workdir: Path, *extra: str, per_batch: int
) -> subprocess.Popen[bytes]:
    """`rillet run` of the manifest's App with its checkpoint and log in `workdir`, batches of
    at most `per_batch` records (use inside `killed_at_exit`)."""
    return cli_run(
        manifest,
        "-b",
        bootstrap,
        "--checkpoint-dir",
        str(workdir / "checkpoint"),
        "--max-offsets-per-trigger",
        str(per_batch),
        *extra,
        log=workdir / "driver.log",
    )


def run_driver_to_end(manifest: Path, bootstrap: str, workdir: Path, *, per_batch: int) -> None:
    """Restart the App's driver from its checkpoint in `workdir` with --available-now, and
    fail unless it gets through what its inputs hold and exits 0."""
    process = start_driver(manifest, bootstrap, workdir, "--available-now", per_batch=per_batch)
    with killed_at_exit(process, log=workdir / "driver.log") as driver:
        assert driver.wait(timeout=300) == 0, (workdir / "driver.log").read_text()[-3000:]


def copied_positions(bootstrap: str, topic: str) -> Counter[tuple[int, int]]:
    """How often each source record, by the (partition, offset) its copy is keyed by, is in
    `topic` (read_committed)."""
    keys = [json.loads(e.key or b"null") for e in read_topic(bootstrap, topic)]
    return Counter((k["partition"], k["offset"]) for k in keys)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m rillet.cli ...`, captured."""
    return subprocess.run(
        [sys.executable, "-m", "rillet.cli", *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
        check=False,
    )


def json_values(entries: Iterable[tables.Entry]) -> list[Any]:
    return [json.loads(e.value) for e in entries if e.value is not None]


_PAYMENTS_FILTER = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: payments}
spec: {partitions: %d}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: payments-valid}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: payments-dlq}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: payments-filter, namespace: shop}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: payments
      topicRef: {name: payments}
      schema: "id STRING, amount DECIMAL(10,2)"
      startingOffsets: earliest
  pipeline:
    sql: SELECT id, amount FROM payments WHERE amount > 0
  outputs:
    - topicRef: {name: payments-valid}
      keyColumns: [id]
  deadLetterTopic:
    topicRef: {name: payments-dlq}
"""


def payments_filter(partitions: int = 1) -> str:
    """Manifests of an App that keeps payments with a positive amount and dead-letters records
    it cannot read: its input Topic (`partitions` of them), its output and dead-letter Topics."""
    return _PAYMENTS_FILTER % partitions
