"""The stack's object store as data: its command line, credentials file, environment, Secret.

Test plan:
- `weed server` listens on the stack's address alone, on the ports chosen for it: every listener
  it would otherwise open on a default port (gRPC at +10000, Iceberg 8181, Lance 9101) is given
  or turned off, its data, logs and own sockets stay under the state directory (its gRPC sockets
  are at fixed paths in /tmp: remembered, to remove), no telemetry is sent.
- the S3 config names the stack's key, as SeaweedFS reads it (identities with credentials).
- `rillet dev env` of a stack with the store prints its endpoint, bucket and key under the
  names AWS SDKs read; a stack without the store prints none of them.
- the Secret users copy holds the key under the keys `spec.checkpoint.secretRef` defaults to.
- a fresh key is drawn for each stack, in AWS's shapes.
- the object store is built only for a stack that runs it, after everything else.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from rillet_devstack import objectstore, objectstoring, provisioning
from rillet_devstack import stack as devstack
from rillet_devstack.objectstore import ObjectStoreLayout, ObjectStoreState, Ports

PORTS = Ports(
    s3=41001,
    s3_grpc=41002,
    master=41003,
    master_grpc=41004,
    volume=41005,
    volume_grpc=41006,
    filer=41007,
    filer_grpc=41008,
    metrics=41009,
)


def _flags(args: list[str]) -> dict[str, str]:
    """The flags of `weed server` (after the subcommand), by name."""
    return dict(arg.lstrip("-").partition("=")[::2] for arg in args[args.index("server") + 1 :])


def test_server_listens_on_the_stack_address_and_chosen_ports_only() -> None:
    layout = ObjectStoreLayout(Path("/state/objectstore"))
    args = objectstore.server_args(Path("/cache/weed"), layout, address="10.99.0.1", ports=PORTS)
    flags = _flags(args)

    assert args[:3] == ["/cache/weed", "-logtostderr", "server"]  # no log files in /tmp
    assert flags["ip"] == flags["ip.bind"] == flags["metricsIp"] == "10.99.0.1"
    ports = {name: int(value) for name, value in flags.items() if ".port" in name or "Port" in name}
    assert ports == {
        "metricsPort": 41009,
        "master.port": 41003,
        "master.port.grpc": 41004,
        "volume.port": 41005,
        "volume.port.grpc": 41006,
        "filer.port": 41007,
        "filer.port.grpc": 41008,
        "s3.port": 41001,
        "s3.port.grpc": 41002,
        "s3.port.iceberg": 0,
        "s3.port.lance": 0,
    }
    assert flags["master.telemetry"] == "false"
    assert flags["s3"] == flags["filer"] == ""  # both started
    assert flags["s3.config"] == "/state/objectstore/s3.json"
    for path in ("dir", "filer.localSocket", "s3.localSocket"):
        assert flags[path].startswith("/state/objectstore/")
    assert [str(s) for s in objectstore.grpc_sockets(PORTS)] == [
        "/tmp/seaweedfs-master-grpc-41004.sock",
        "/tmp/seaweedfs-volume-grpc-41006.sock",
        "/tmp/seaweedfs-filer-grpc-41008.sock",
        "/tmp/seaweedfs-s3-grpc-41002.sock",
    ]


def test_s3_config_names_the_key() -> None:
    config = json.loads(objectstore.s3_config_text(access_key="AKEXAMPLE", secret_key="s3cr3t"))

    (identity,) = config["identities"]
    assert identity["credentials"] == [{"accessKey": "AKEXAMPLE", "secretKey": "s3cr3t"}]
    assert {"Read", "Write", "List"} <= set(identity["actions"])


def _stack(store: ObjectStoreState | None) -> devstack.StackState:
    return devstack.StackState(
        processes=[],
        kubeconfig=Path("/state/kubeconfig"),
        apiserver="https://10.99.0.1:6443",
        kafka_bootstrap="10.99.0.1:9092",
        kafka_brokers=1,
        object_store=store,
    )


def test_env_of_a_stack_with_the_store_says_how_to_reach_it() -> None:
    store = ObjectStoreState(
        endpoint=objectstore.endpoint("10.99.0.1", PORTS), access_key="AK", secret_key="SK"
    )

    env = _stack(store).environment()

    assert env["RILLET_S3_ENDPOINT"] == "http://10.99.0.1:41001"
    assert env["RILLET_S3_BUCKET"] == "rillet"
    assert env["RILLET_S3_ACCESS_KEY_ID"] == "AK"
    assert env["RILLET_S3_SECRET_ACCESS_KEY"] == "SK"
    assert "SK" not in repr(store)
    assert not {"RILLET_S3_ENDPOINT", "RILLET_S3_ACCESS_KEY_ID"} & set(_stack(None).environment())


def test_recorded_store_survives_the_state_file() -> None:
    state = _stack(ObjectStoreState(endpoint="http://10.99.0.1:1", access_key="A", secret_key="S"))

    loaded = devstack.StackState.model_validate_json(state.model_dump_json())

    assert loaded.object_store == state.object_store


def test_secret_holds_the_key_under_the_default_secret_ref_keys() -> None:
    secret = objectstore.credentials_secret(access_key="AK", secret_key="SK")

    assert secret["metadata"] == {"name": "rillet-objectstore", "namespace": "default"}
    decoded = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert decoded == {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"}


def test_each_stack_gets_a_fresh_key() -> None:
    first, second = objectstoring.new_key(), objectstoring.new_key()

    assert first != second
    assert len(first[0]) == 20
    assert first[0].isalnum()
    assert len(first[1]) == 40


def test_object_store_built_only_for_a_stack_that_runs_it() -> None:
    plain = provisioning.artefacts(with_node=True)
    with_store = provisioning.artefacts(with_node=True, with_object_store=True)

    assert provisioning.SEAWEEDFS not in plain
    assert with_store == (*plain, provisioning.SEAWEEDFS)
