"""Running the stack's schema registry: Apicurio Registry on a JDK >= 21, a fresh password, the
Secret.

The registry is ready once its Confluent-compatible API answers the stack's user: Quarkus
serves only after the storage and the security chain are up.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import httpx

from rillet_devstack import controlplane, processes, provisioning, schemaregistry, stack
from rillet_devstack.controlplane import ControlPlaneLayout
from rillet_devstack.processes import ProcessRecord
from rillet_devstack.schemaregistry import SchemaRegistryLayout, SchemaRegistryState

PROCESS_NAME = "schema-registry"
READY_TIMEOUT = 120.0
JDK_HOMES = Path("/usr/lib/jvm")


class NoJavaError(RuntimeError):
    """No JDK recent enough for the registry; the message says what to install."""


def java() -> Path:
    """A `java` of release 21 or later: JAVA_HOME's, or the newest under /usr/lib/jvm (this
    machine's default JDK is 17, with Temurin 25 beside it)."""
    homes = [Path(home)] if (home := os.environ.get("JAVA_HOME")) else []
    homes += sorted(JDK_HOMES.glob("*")) if JDK_HOMES.is_dir() else []
    found = schemaregistry.find_java(homes)
    if found is None:
        raise NoJavaError(
            f"the schema registry (Apicurio Registry) needs Java {schemaregistry.JAVA_FEATURE} "
            f"or later, and neither JAVA_HOME nor {JDK_HOMES} has one: install a JDK >= "
            f"{schemaregistry.JAVA_FEATURE} (e.g. Temurin 25)"
        )
    return found


def start(root: Path, *, address: str) -> tuple[ProcessRecord, SchemaRegistryState]:
    """Start the registry under `root` on `address` with a new password; return its record and
    how to reach it (once `wait_ready` says it serves)."""
    layout = SchemaRegistryLayout(root)
    layout.properties.parent.mkdir(parents=True, exist_ok=True)
    layout.scratch.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(24)
    port, management = processes.free_port(), processes.free_port()  # never the same one
    settings = schemaregistry.properties(
        address=address, port=port, management_port=management, password=password
    )
    layout.properties.touch(mode=0o600)  # the password is in it
    layout.properties.write_text(schemaregistry.properties_text(settings))
    home = provisioning.SCHEMA_REGISTRY.directory / "registry"
    args = schemaregistry.server_args(java(), home, layout)
    record = processes.start(PROCESS_NAME, args, log=layout.log, cwd=layout.root)
    state = SchemaRegistryState(url=schemaregistry.url(address, port), password=password)
    return record, state


def answers(state: SchemaRegistryState) -> bool:
    """Whether the registry lists its subjects to the stack's user."""
    try:
        response = httpx.get(
            f"{state.url}/subjects", auth=(state.username, state.password), timeout=5
        )
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def wait_ready(record: ProcessRecord, state: SchemaRegistryState) -> None:
    processes.wait_ready(
        record, lambda: answers(state), timeout=READY_TIMEOUT, what="serving its API"
    )


def create_secret(layout: ControlPlaneLayout, state: SchemaRegistryState) -> None:
    """The Secret users copy (schemaregistry.credentials_secret), in namespace default."""
    from kubernetes import utils

    secret = schemaregistry.credentials_secret(password=state.password, registry_url=state.url)
    utils.create_from_dict(controlplane.api_client(layout), secret)  # type: ignore[no-untyped-call]


def run(state: stack.StackState, layout: ControlPlaneLayout, *, root: Path, address: str) -> None:
    """Start the registry for a starting stack (recorded at once, so `down` stops it), wait
    until it serves, and create the Secret."""
    record, registry = start(root, address=address)
    state.schema_registry = registry
    stack.record_started(state, record)
    wait_ready(record, registry)
    create_secret(layout, registry)
