"""Running the stack's object store: `weed server` with a fresh key, the bucket, the Secret.

The store is ready once its S3 gateway, asked with the stack's key, has made the bucket: that
takes the master, a volume server, the filer and the gateway all working.
"""

from __future__ import annotations

import dataclasses
import secrets
from pathlib import Path

import urllib3
from minio import Minio
from minio.error import S3Error

from rillet_devstack import controlplane, objectstore, processes, provisioning, stack
from rillet_devstack.controlplane import ControlPlaneLayout
from rillet_devstack.objectstore import ObjectStoreLayout, ObjectStoreState, Ports
from rillet_devstack.processes import ProcessRecord

PROCESS_NAME = "seaweedfs"
READY_TIMEOUT = 90.0
# On SIGTERM its filer waits some 15 s for the volume server it stopped first (measured 17 s):
# more than other processes get, so that it rarely needs SIGKILL.
STOP_GRACE = 45.0


def new_key() -> tuple[str, str]:
    """A random access key id and secret, in the shapes AWS uses (20 and 40 characters)."""
    return secrets.token_hex(10).upper(), secrets.token_urlsafe(30)


def free_ports() -> Ports:
    """Distinct free ports for every listener (a port just released can be handed out again)."""
    chosen: list[int] = []
    while len(chosen) < len(dataclasses.fields(Ports)):
        if (port := processes.free_port()) not in chosen:
            chosen.append(port)
    return Ports(*chosen)


def s3_client(state: ObjectStoreState) -> Minio:
    """An S3 client of the store with its key. Its requests fail fast (no retries, short
    timeouts): a poll retries them itself."""
    return Minio(
        state.endpoint.removeprefix("http://"),
        access_key=state.access_key,
        secret_key=state.secret_key,
        secure=False,
        region=objectstore.REGION,  # else the client asks the store for each bucket's region
        http_client=urllib3.PoolManager(timeout=urllib3.Timeout(connect=5, read=30), retries=False),
    )


def start(weed: Path, root: Path, *, address: str) -> tuple[ProcessRecord, ObjectStoreState]:
    """Start `weed server` under `root` on `address` with a new key; return its record and how
    to reach it (once `wait_ready` says it serves)."""
    layout = ObjectStoreLayout(root)
    layout.data.mkdir(parents=True, exist_ok=True)
    access_key, secret_key = new_key()
    layout.s3_config.touch(mode=0o600)  # the secret key is in it
    layout.s3_config.write_text(
        objectstore.s3_config_text(access_key=access_key, secret_key=secret_key)
    )
    ports = free_ports()
    args = objectstore.server_args(weed, layout, address=address, ports=ports)
    record = processes.start(PROCESS_NAME, args, log=layout.log, cwd=layout.root)
    state = ObjectStoreState(
        endpoint=objectstore.endpoint(address, ports),
        access_key=access_key,
        secret_key=secret_key,
        sockets=objectstore.grpc_sockets(ports),
    )
    return record, state


def wait_ready(record: ProcessRecord, state: ObjectStoreState) -> None:
    """Poll until the gateway has made the bucket (or has it already)."""
    s3 = s3_client(state)

    def bucket_made() -> bool:
        try:
            s3.make_bucket(state.bucket)
        except S3Error as error:  # made by an earlier poll whose answer was lost
            if error.code != "BucketAlreadyOwnedByYou":
                raise
        return s3.bucket_exists(state.bucket)

    processes.wait_ready(
        record, bucket_made, timeout=READY_TIMEOUT, what=f"serving bucket {state.bucket}"
    )


def create_secret(layout: ControlPlaneLayout, state: ObjectStoreState) -> None:
    """The Secret users copy (objectstore.credentials_secret), in namespace default."""
    from kubernetes import utils

    secret = objectstore.credentials_secret(
        access_key=state.access_key, secret_key=state.secret_key
    )
    utils.create_from_dict(controlplane.api_client(layout), secret)  # type: ignore[no-untyped-call]


def run(state: stack.StackState, layout: ControlPlaneLayout, *, root: Path, address: str) -> None:
    """Start the store for a starting stack (recorded at once with how to reach it, so `down`
    stops it), wait until it serves the bucket, and create the Secret."""
    weed = provisioning.SEAWEEDFS.directory / "weed"
    record, store = start(weed, root, address=address)
    state.object_store = store  # with the record: what `down` cleans up after it
    stack.record_started(state, record)
    wait_ready(record, store)
    create_secret(layout, store)


def stop(record: ProcessRecord, store: ObjectStoreState | None) -> list[str]:
    """Stop `weed server`, waiting out its slow exit, and remove the sockets it left if it was
    killed; its name if it was running."""
    running = processes.is_alive(record)
    processes.stop(record, grace_seconds=STOP_GRACE)
    for socket in store.sockets if store else []:
        socket.unlink(missing_ok=True)
    return [record.name] if running else []
