"""The run spec: everything the driver of one App needs, with every reference resolved.

Pydantic models (frozen, unknown keys refused) the operator writes as JSON into the App's
ConfigMap (`render`) and `rillet drive` reads back (`parse`); `rillet run` builds one in
process. A run spec carries the version of this contract (`CONTRACT_VERSION`): a driver refuses
a run spec of another version (`ContractMismatchError`), since the operator and the runtime
image (an App's image, pinned by the user) are released apart.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Final, Literal

import pydantic
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field

from rillet.api.v1alpha1 import appflows, appoutputs, appresources, fields, tables

# The version of the run spec's meaning: raise it when a driver of the previous version would
# run a run spec of this one wrongly (a field it cannot ignore), not when a field with a
# default is added (older drivers read a run spec that leaves it unset).
CONTRACT_VERSION: Final = 1
# The key of the version in the run spec's JSON, written even at its default.
VERSION_KEY: Final = "contract_version"
# The version of a run spec without the key: every run spec written before it was.
UNVERSIONED: Final = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WindowSpec(_Frozen):
    """A Table's time window, in milliseconds."""

    type: tables.WindowType
    size_ms: int
    step_ms: int | None = None
    expiry_ms: int


class KafkaLogin(_Frozen):
    """How the driver logs in to Kafka: the settings here, the credentials in the files of a
    Secret mounted at `credentials_dir` (username, password, ca.crt), never in the run spec."""

    security_protocol: Literal["SASL_PLAINTEXT", "SASL_SSL"]
    sasl_mechanism: Literal["SCRAM-SHA-256", "SCRAM-SHA-512"]
    credentials_dir: str
    ca: bool = Field(default=False, description="Whether the directory holds ca.crt.")


class SchemaRegistry(_Frozen):
    """How the driver reaches the schema registry (Confluent's REST API): its URL here, the
    basic-auth credentials in the files of a Secret mounted at `credentials_dir` (username,
    password), never in the run spec."""

    url: str = Field(description="Base URL of the Confluent-compatible API.")
    credentials_dir: str | None = Field(default=None, description="Absent: no credentials.")
    request_timeout_seconds: float = Field(
        default=10.0, gt=0, description="How long one request waits for an answer."
    )


class AvroSpec(_Frozen):
    """Where an Avro key's or value's schema comes from (recordschemas.AvroSchema), with the
    subject resolved; the driver reads the registry at start."""

    subject: str = Field(description="The registry subject (<topic>-value by default).")
    inline_schema: str | None = Field(default=None, description="The schema as Avro JSON.")
    version: int | None = Field(
        default=None,
        description="A registered version of the subject; absent: reading, the latest; "
        "writing, the inline or derived schema, registered.",
    )


class ProtobufSpec(_Frozen):
    """Where a Protobuf key's or value's schema comes from (recordschemas.ProtobufSchema), with
    the subject resolved; the driver reads the registry (and compiles text) at start."""

    subject: str = Field(description="The registry subject (<topic>-value by default).")
    inline_schema: str | None = Field(default=None, description="The schema as .proto text.")
    message: str | None = Field(
        default=None, description="The message's full name; absent: the schema's first."
    )
    version: int | None = Field(
        default=None,
        description="A registered version of the subject; absent: reading, the latest; "
        "writing, the inline or derived schema, registered.",
    )


class EventTimeSpec(_Frozen):
    """An input's event-time column and allowed lateness (Spark's watermark delay)."""

    column: str
    allowed_lateness_ms: int


class LookupSpec(_Frozen):
    """A Table that a topic input's records look up by key (appflows.Lookup)."""

    table: str = Field(description="The Table's input (its InputSpec's name).")
    key_columns: tuple[str, ...] = Field(description="The input's columns that form the key.")


class InputSpec(_Frozen):
    """One view of the pipeline: a Kafka topic read as a stream, or a Table read as its state."""

    name: str = Field(description="Name of the view (and of the DataFrame given to Python).")
    kind: Literal["topic", "table"]
    topic: str = Field(description="Kafka topic read (a Table's changelog topic for tables).")
    format: fields.Format = Field(description="Encoding of the record values.")
    value_schema: str | None = Field(default=None, description="Spark DDL of json values.")
    avro: AvroSpec | None = Field(default=None, description="The reader schema of avro values.")
    protobuf: ProtobufSpec | None = Field(
        default=None, description="The reader schema and message of protobuf values."
    )
    starting_offsets: appflows.StartingOffsets = "latest"
    key_format: fields.Format = Field(default="string", description="Encoding of record keys.")
    window: WindowSpec | None = None
    broadcast: bool = Field(default=False, description="A global Table: broadcast in joins.")
    partitions: int | None = Field(default=None, description="Partitions, when known.")
    event_time: EventTimeSpec | None = Field(
        default=None, description="Where the watermark comes from (topic inputs)."
    )
    max_offsets_per_trigger: int | None = Field(
        default=None, description="Most records a micro-batch reads from this input."
    )
    lookups: tuple[LookupSpec, ...] = Field(
        default=(), description="Tables each record looks up (topic inputs)."
    )


class OutputSpec(_Frozen):
    """One streaming query: a result of the pipeline written to a Topic or upserted to a Table."""

    id: str = Field(description="Stable id: names the query and its checkpoint directory.")
    kind: Literal["topic", "table"]
    topic: str
    result: str | None = Field(default=None, description="The result (view) to write.")
    key_columns: tuple[str, ...] = ()
    value_columns: tuple[str, ...] | None = None
    mode: appoutputs.OutputMode
    key_format: fields.Format = "string"
    value_format: fields.Format = "json"
    key_avro: AvroSpec | None = Field(default=None, description="For keyFormat avro.")
    value_avro: AvroSpec | None = Field(default=None, description="For valueFormat avro.")
    key_protobuf: ProtobufSpec | None = Field(default=None, description="For keyFormat protobuf.")
    value_protobuf: ProtobufSpec | None = Field(
        default=None, description="For valueFormat protobuf."
    )
    window: WindowSpec | None = None
    exactly_once: bool = Field(default=False, description="Written in Kafka transactions.")


class PipelineSpec(_Frozen):
    """The pipeline: Spark SQL statements, or a Python "module:function"."""

    sql: str | None = None
    python: str | None = None


class TriggerSpec(_Frozen):
    """When micro-batches run; all unset means back to back."""

    processing_time_ms: int | None = None
    available_now: bool = False
    real_time_ms: int | None = None


def back_to_back(trigger: TriggerSpec) -> bool:
    """Whether the App's batches run back to back: no trigger, or processingTime 0."""
    return not (trigger.available_now or trigger.real_time_ms or trigger.processing_time_ms)


class RunSpec(_Frozen):
    """Everything the driver of one App needs, with every reference resolved."""

    contract_version: int = Field(
        default=CONTRACT_VERSION, description="The version of this contract it was written for."
    )
    app: str
    namespace: str
    consumer_group: str
    bootstrap_servers: str
    kafka_config: dict[str, str] = Field(
        default_factory=dict,
        # The runtime adds the login's credentials here, in memory: never shown.
        repr=False,
        description="Extra Kafka client settings (librdkafka names), for Spark and "
        "confluent-kafka.",
    )
    kafka_login: KafkaLogin | None = None
    schema_registry: SchemaRegistry | None = Field(
        default=None, description="The schema registry, for avro and protobuf keys and values."
    )
    checkpoint_location: str
    checkpoint_on_loss: appresources.CheckpointLossPolicy = Field(
        default="Stall", description="What the driver does when a Table's checkpoint is lost."
    )
    inputs: tuple[InputSpec, ...]
    pipeline: PipelineSpec
    outputs: tuple[OutputSpec, ...]
    dead_letter_topic: str | None = None
    dead_letter_exactly_once: bool = False
    trigger: TriggerSpec = TriggerSpec()
    shuffle_partitions: int
    spark_conf: dict[str, str] = Field(default_factory=dict)
    max_offsets_per_trigger: int | None = None

    @property
    def stream_inputs(self) -> tuple[InputSpec, ...]:
        """The inputs read as streams (topics), in order."""
        return tuple(i for i in self.inputs if i.kind == "topic")


def output_checkpoint(spec: RunSpec, output: OutputSpec) -> str:
    """Checkpoint directory of an output's query."""
    return f"{spec.checkpoint_location.rstrip('/')}/outputs/{output.id}"


def dead_letter_checkpoint(spec: RunSpec, item: InputSpec) -> str:
    """Checkpoint directory of the query routing an input's bad records to the dead-letter topic."""
    return f"{spec.checkpoint_location.rstrip('/')}/dead-letters/{item.name}"


class ContractMismatchError(Exception):
    """The run spec was written for another version of the contract than the driver reads.

    The driver's termination message starts with this class's name, which the operator reads
    into the App's status (reconcile.appstatus, reason DriverContractMismatch).
    """


def mismatch_message(found: Any) -> str:
    """Why a driver refuses a run spec of contract version `found`, and what to do."""
    if isinstance(found, int) and found > CONTRACT_VERSION:
        action = (
            "set the App's spec.image to the runtime image of the operator's release "
            "(or roll the operator back)"
        )
    else:
        action = (
            "upgrade the operator to the release of the App's runtime image "
            "(or set spec.image to the runtime image of the operator's release)"
        )
    return (
        f"the run spec is of contract version {found}, this runtime image reads version "
        f"{CONTRACT_VERSION}: the operator and the App's runtime image come from different "
        f"Rillet releases; {action}"
    )


def check_version(document: Any) -> None:
    """Raise ContractMismatchError when a parsed run spec is of another contract version."""
    if not isinstance(document, dict):
        return  # not a run spec at all: validation says so
    found = document.get(VERSION_KEY, UNVERSIONED)
    if found != CONTRACT_VERSION:
        raise ContractMismatchError(mismatch_message(found))


def render(run_spec: RunSpec) -> str:
    """The run spec as the JSON the driver reads: the one writer.

    Fields at their defaults are left out: the driver fills them in, and a runtime image older
    than a field (an App's image is the user's, pinned) still reads a run spec that leaves the
    field unset, instead of refusing a key it does not know. That holds for the contract version
    too while it is the first: runtime images from before the version existed refuse the key. A
    later version is always written, so a driver of an older version refuses the run spec.
    """
    document = run_spec.model_dump(mode="json", exclude_defaults=True)
    if run_spec.contract_version != UNVERSIONED:
        document = {VERSION_KEY: run_spec.contract_version, **document}
    return pydantic_core.to_json(document).decode()


def parse(text: str, *, source: str) -> RunSpec:
    """The run spec in `text` (from `source`, named in errors): the one reader.

    Raises ContractMismatchError for a run spec of another contract version, ValueError saying
    what is wrong otherwise, without the values (the Kafka settings may hold secrets).
    """
    with contextlib.suppress(json.JSONDecodeError):  # not JSON: validation below says where
        check_version(json.loads(text))
    try:
        return RunSpec.model_validate_json(text)
    except pydantic.ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in error.errors(include_input=False, include_url=False)
        )
        raise ValueError(f"{source} is not a run spec: {problems}") from None
