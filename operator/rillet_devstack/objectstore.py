"""The stack's S3 object store (SeaweedFS's `weed server`), as data: where it keeps its files,
its command line, its credentials file, and what users get to reach it (variables, a Secret).

`rillet dev up --object-store` runs it (objectstoring) on the stack's address, so pods on every
node reach it, with one bucket and one access key made for that stack: a development stack's
throwaway key, printed by `rillet dev env` as Kafka's admin password is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rillet_devstack import secretobjects

BUCKET = "rillet"
# The Secret users copy into their namespaces; its keys are those `spec.checkpoint.secretRef`
# reads by default, and the variables AWS SDKs (and Hadoop's S3A) read from the environment.
SECRET_NAME = "rillet-objectstore"
SECRET_NAMESPACE = "default"
ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
# SeaweedFS accepts signatures for any region; SDKs need one to sign.
REGION = "us-east-1"
# Small volumes: SeaweedFS grows several at once per bucket, each up to this size on disk.
VOLUME_SIZE_LIMIT_MB = 64


class ObjectStoreState(BaseModel):
    """How to reach the running object store: its S3 endpoint, bucket and key."""

    endpoint: str
    bucket: str = BUCKET
    access_key: str
    secret_key: str = Field(repr=False)
    # Where `weed server` puts its gRPC sockets (not configurable): removed if it was killed.
    sockets: list[Path] = []

    def environment(self) -> dict[str, str]:
        """What `rillet dev env` prints for it: the endpoint, the bucket and the key (under
        names of its own: `eval "$(rillet dev env)"` must not replace a user's AWS keys)."""
        return {
            "RILLET_S3_ENDPOINT": self.endpoint,
            "RILLET_S3_BUCKET": self.bucket,
            "RILLET_S3_ACCESS_KEY_ID": self.access_key,
            "RILLET_S3_SECRET_ACCESS_KEY": self.secret_key,
        }


@dataclass(frozen=True)
class Ports:
    """Every port `weed server` listens on, each given explicitly: left to itself it derives
    gRPC ports (+10000) and opens others (Iceberg 8181, Lance 9101) that may be taken."""

    s3: int
    s3_grpc: int
    master: int
    master_grpc: int
    volume: int
    volume_grpc: int
    filer: int
    filer_grpc: int
    metrics: int


@dataclass(frozen=True)
class ObjectStoreLayout:
    """The object store's files under the stack's state directory."""

    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def s3_config(self) -> Path:
        return self.root / "s3.json"

    @property
    def log(self) -> Path:
        return self.root / "weed.log"


def s3_config(*, access_key: str, secret_key: str) -> dict[str, Any]:
    """The S3 gateway's identities: one, allowed everything, with the stack's key. With any
    identity configured, the gateway refuses anonymous and unknown-key requests."""
    return {
        "identities": [
            {
                "name": "rillet",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }


def s3_config_text(*, access_key: str, secret_key: str) -> str:
    return json.dumps(s3_config(access_key=access_key, secret_key=secret_key), indent=2)


def endpoint(address: str, ports: Ports) -> str:
    return f"http://{address}:{ports.s3}"


def grpc_sockets(ports: Ports) -> list[Path]:
    """The Unix sockets `weed server` makes for its gRPC ports, at paths it does not let one
    choose (it removes them when it exits on SIGTERM)."""
    services = {
        "master": ports.master_grpc,
        "volume": ports.volume_grpc,
        "filer": ports.filer_grpc,
        "s3": ports.s3_grpc,
    }
    return [Path(f"/tmp/seaweedfs-{name}-grpc-{port}.sock") for name, port in services.items()]


def server_args(weed: Path, layout: ObjectStoreLayout, *, address: str, ports: Ports) -> list[str]:
    """`weed server` with master, volume, filer and S3 gateway on `address` alone.

    It logs to its output only (else also to files in /tmp), its other Unix sockets go under
    the layout (not /tmp), and it reports nothing to SeaweedFS's telemetry service (on by
    default)."""
    return [
        str(weed),
        "-logtostderr",
        "server",
        f"-ip={address}",
        f"-ip.bind={address}",
        f"-dir={layout.data}",
        f"-metricsIp={address}",
        f"-metricsPort={ports.metrics}",
        f"-master.port={ports.master}",
        f"-master.port.grpc={ports.master_grpc}",
        f"-master.volumeSizeLimitMB={VOLUME_SIZE_LIMIT_MB}",
        "-master.telemetry=false",
        f"-volume.port={ports.volume}",
        f"-volume.port.grpc={ports.volume_grpc}",
        # As many volumes as the disk's free space allows (the default, 8, runs out at the
        # second bucket: each takes several at once).
        "-volume.max=0",
        # The volume server waits this long after its last heartbeat before it exits (10 s by
        # default): a stack stops faster, and nothing else reads from it meanwhile.
        "-volume.preStopSeconds=1",
        "-filer",
        f"-filer.port={ports.filer}",
        f"-filer.port.grpc={ports.filer_grpc}",
        f"-filer.localSocket={layout.root / 'filer.sock'}",
        "-s3",
        f"-s3.port={ports.s3}",
        f"-s3.port.grpc={ports.s3_grpc}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.localSocket={layout.root / 's3.sock'}",
        f"-s3.config={layout.s3_config}",
    ]


def credentials_secret(*, access_key: str, secret_key: str) -> dict[str, Any]:
    """The Secret with the stack's key, in namespace default. A Secret is read from its Pod's
    own namespace: an App elsewhere needs a copy, made from `rillet dev env`'s values
    (`kubectl create secret generic rillet-objectstore -n <namespace>
    --from-literal=AWS_ACCESS_KEY_ID=$RILLET_S3_ACCESS_KEY_ID --from-literal=...`)."""
    values = {ACCESS_KEY_ID: access_key, SECRET_ACCESS_KEY: secret_key}
    return secretobjects.opaque_secret(SECRET_NAME, SECRET_NAMESPACE, values)
