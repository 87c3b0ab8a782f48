"""A Table's server (`rillet table serve`) run by a test as a process of its own, as in its pod:
a producer that remembers where each key went, the server on free ports, a lookup and its
readiness over HTTP, and `rillet table get --server` as a user runs it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

import httpx
from confluent_kafka import KafkaError, Message, Producer

from rillet_devstack import processes

CLI = (sys.executable, "-m", "rillet.cli")
TABLE = "profiles"


class TrackedProducer:
    """A producer that remembers the partition of each key's last acknowledged record."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap})
        self.partition_of: dict[bytes, int] = {}

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        assert error is None, error
        key = message.key()
        if key is not None:
            self.partition_of[key] = message.partition() or 0

    def send(self, key: bytes | None, value: bytes | None) -> None:
        self.producer.produce(self.topic, key=key, value=value, on_delivery=self._delivered)

    def flush(self) -> None:
        assert self.producer.flush(30) == 0


@contextlib.contextmanager
def serving(
    bootstrap: str,
    topic: str,
    store: Path,
    *,
    formats: tuple[str, str] = ("json", "json"),
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
) -> Iterator[tuple[str, str]]:
    """`rillet table serve` on a free port (`formats`: of keys and values; `env`: more of its
    environment; `options`: more of its command line); the URLs of its lookups and of its
    metrics. Stopped (SIGTERM) afterwards."""
    port, metrics_port = processes.free_port(), processes.free_port()
    command = [
        *CLI,
        "table",
        "serve",
        TABLE,
        f"--topic={topic}",
        f"--key-format={formats[0]}",
        f"--value-format={formats[1]}",
        f"--port={port}",
        f"--metrics-port={metrics_port}",
        f"--store-dir={store}",
        "--refresh-seconds=1",
        "--host=127.0.0.1",
        # A server of one's own outside the cluster; the pods' RBAC authorization is
        # test_table_server_on_node's.
        "--authorization=none",
        *options,
    ]
    log = store.parent / f"server-{port}.log"
    # The registry only as `env` gives it (a shell of `rillet dev env` has its user in env).
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("RILLET_SCHEMA_")}
    environment = {**inherited, "RILLET_KAFKA_BOOTSTRAP": bootstrap, **(env or {})}
    with (
        log.open("wb") as out,
        subprocess.Popen(command, stdout=out, stderr=out, env=environment) as server,
    ):
        try:
            yield f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}"
        finally:
            server.terminate()
            server.wait(timeout=30)
    assert server.returncode == 0, log.read_text()[-3000:]


def get(url: str, key: str) -> httpx.Response:
    return httpx.get(f"{url}/tables/{TABLE}/{quote(key, safe='')}", timeout=10)


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    except httpx.TransportError:  # not listening yet
        return False


def table_get(
    url: str, topic: str, key: str, key_format: str = "json"
) -> subprocess.CompletedProcess[str]:
    # -b: nothing listens there, so the answer can only come from the server.
    options = ["--topic", topic, "--key-format", key_format, "--server", url, "-b", "127.0.0.1:1"]
    return subprocess.run(
        [*CLI, "table", "get", TABLE, key, *options],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
