"""How an App runs: its executor scaling, pod resources, checkpoint and trigger.

`apps.AppSpec` assembles them with the parts in `appflows` (inputs, pipeline, outputs).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from rillet.api.v1alpha1 import fields, objects, quantities, rules

MAX_EXECUTORS = 1000


class Scaling(objects.WireModel):
    """How many executors run the App, scaled on Kafka lag."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.Rule(
            # Guarded: the apiserver checks the CRD's default ({}) before filling nested defaults.
            rule="!has(self.minExecutors) || !has(self.maxExecutors) || "
            "self.minExecutors <= self.maxExecutors",
            message="scaling.minExecutors must not exceed scaling.maxExecutors: lower "
            "minExecutors or raise maxExecutors",
            field_path=".minExecutors",
            check=lambda s: s.min_executors <= s.max_executors,
        ),
    )

    min_executors: Annotated[int, Field(ge=0, le=MAX_EXECUTORS)] = Field(
        default=1,
        description="Fewest executors, also when there is no lag (0 lets the driver alone run).",
    )
    max_executors: Annotated[int, Field(ge=1, le=MAX_EXECUTORS)] = Field(
        default=8,
        description="Most executors. More executors than input partitions would sit idle, so the "
        "operator also caps the count at the partition count.",
    )
    executor_cores: Annotated[int, Field(ge=1, le=64)] = Field(
        default=1,
        description="Task slots per executor (spark.executor.cores); one task reads one "
        "partition at a time.",
    )
    lag_target: Annotated[int, Field(ge=1, le=fields.INT64_SCHEMA_MAX)] = Field(
        default=1000,
        description="Records of lag each executor is expected to absorb: desired executors = "
        "total lag / lagTarget, within the bounds.",
    )
    stabilization_window_seconds: Annotated[int, Field(ge=0, le=3600)] = Field(
        default=60,
        description="Seconds a lower executor count must be wanted before scaling down.",
    )


# Below these, Spark refuses to start the pod's JVM and the pod crash-loops (quantities).
DriverMemory = Annotated[
    fields.MemoryQuantity,
    quantities.at_least(
        quantities.MIN_DRIVER_MEMORY,
        message=f"driver.memory must be at least {quantities.MIN_DRIVER_MEMORY}: Spark does not "
        "start a driver with a heap under about 505 MiB, and the heap is half the pod's memory",
    ),
]
ExecutorMemory = Annotated[
    fields.MemoryQuantity,
    quantities.at_least(
        quantities.MIN_EXECUTOR_MEMORY,
        message=f"executor.memory must be at least {quantities.MIN_EXECUTOR_MEMORY}: Spark does "
        "not start an executor with a heap under about 505 MiB, and the heap is three quarters "
        "of the pod's memory",
    ),
]


class DriverResources(objects.WireModel):
    """CPU and memory of the Spark driver pod."""

    cpu: fields.CpuQuantity = Field(default="1", description='CPU request, e.g. "1" or "500m".')
    memory: DriverMemory = Field(
        default="1Gi",
        description=f'Memory of the driver pod, e.g. "2Gi"; at least '
        f"{quantities.MIN_DRIVER_MEMORY} (half of it is the JVM's heap).",
    )


class ExecutorResources(objects.WireModel):
    """CPU and memory of each Spark executor pod."""

    cpu: fields.CpuQuantity | None = Field(
        default=None,
        description='CPU request, e.g. "2" or "1500m". Defaults to scaling.executorCores.',
    )
    memory: ExecutorMemory = Field(
        default="2Gi",
        description=f'Memory of each executor pod, e.g. "2Gi"; at least '
        f"{quantities.MIN_EXECUTOR_MEMORY} (three quarters of it are the JVM's heap).",
    )


CheckpointLossPolicy = Literal["Stall", "Recompute", "StartFresh"]

# A key of a Secret's data (what the apiserver accepts as one).
SecretKey = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")]
# The URL of an S3-compatible store: scheme, host and port, nothing after.
ENDPOINT_PATTERN = r"^https?://[^/?#\s]+/?$"
S3A_SCHEME = "s3a://"

# How the names of the Secrets Rillet makes for an App end (`<app>-kafka`, `<app>-spark-auth`,
# `<app>-schema-registry`; reconcile.naming and kafkaaccess build them). The apiserver keeps an
# executor from reading such a Secret of another App (the chart's driver-pods policy), so an App
# naming one as its own would never start: refused at apply instead, with the reason.
RILLET_SECRET_SUFFIXES = ("-kafka", "-spark-auth", "-schema-registry")

UserSecretName = Annotated[
    fields.ObjectName,
    rules.Rule(
        rule=f"!{rules.cel_list(RILLET_SECRET_SUFFIXES)}.exists(s, self.endsWith(s))",
        message="a Secret an App names cannot end in -kafka, -spark-auth or -schema-registry: "
        "Rillet makes Secrets of those names for Apps (their Kafka passwords, Spark keys and "
        "schema registry credentials), and no App's pods may read another App's; rename the "
        "Secret, e.g. to <name>-s3",
        check=lambda name: not name.endswith(RILLET_SECRET_SUFFIXES),
    ),
]


class CheckpointSecretRef(objects.WireModel):
    """A Secret in the App's namespace holding the object store's access key pair."""

    name: UserSecretName = Field(
        description="The Secret's name (not ending in -kafka, -spark-auth or -schema-registry: "
        "those are the names of Secrets Rillet makes for Apps)."
    )
    access_key_id_key: SecretKey = Field(
        default="AWS_ACCESS_KEY_ID", description="The key of the Secret holding the access key id."
    )
    secret_access_key_key: SecretKey = Field(
        default="AWS_SECRET_ACCESS_KEY",
        description="The key of the Secret holding the secret access key.",
    )


def _s3a_settings_need_s3a(checkpoint: Checkpoint) -> bool:
    unused = checkpoint.secret_ref is None and checkpoint.endpoint is None
    return unused or (checkpoint.location or "").startswith(S3A_SCHEME)


class Checkpoint(objects.WireModel):
    """Where Spark keeps the App's offsets and state between restarts, and what to do if it is
    lost."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.Rule(
            rule="(!has(self.secretRef) && !has(self.endpoint)) || "
            f"(has(self.location) && self.location.startsWith('{S3A_SCHEME}'))",
            message="checkpoint.secretRef and checkpoint.endpoint apply only to an s3a:// "
            "location: set checkpoint.location to s3a://<bucket>/<path>, or remove them",
            check=_s3a_settings_need_s3a,
        ),
    )

    location: Annotated[str, Field(min_length=1, max_length=1024)] | None = Field(
        default=None,
        description="A directory: a path on the App's checkpoint volume (relative to it, e.g. "
        "clicks/v2), or a URL with a scheme such as s3a://bucket/apps/clicks, hdfs://, gs:// or "
        "abfs:// (then the App gets no volume). Absent: the App's name on its volume. Changing "
        "it restarts the App from startingOffsets with empty state.",
    )
    on_loss: CheckpointLossPolicy = Field(
        default="Stall",
        description="When a Table output's checkpoint holds no offsets but the Table already "
        "holds data (the volume or bucket was lost, or location changed): Stall (the default) "
        "starts nothing and reports CheckpointLost, so a correct Table is never overwritten by "
        "counts restarted from what the inputs still retain; restore the checkpoint, or choose: "
        "Recompute reads every input from its earliest offset, only when the inputs still hold "
        "their whole history (no record deleted by retention or compaction; checked at start); "
        "StartFresh starts from startingOffsets and overwrites the Table's keys as they come. "
        "Set it back to Stall once the App runs again.",
    )
    secret_ref: CheckpointSecretRef | None = Field(
        default=None,
        description="For an s3a:// location: the Secret with the store's access key pair, given "
        "to the driver and executors as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment "
        "variables (secretKeyRef: the values appear in no Rillet object or log). Leave it out "
        "with workload identity, which needs no Secret: EKS Pod Identity or a node's instance "
        "profile is found by S3A's default credential chain; EKS IRSA also takes sparkConf "
        "spark.hadoop.fs.s3a.aws.credentials.provider: "
        "software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider. "
        "(GKE Workload Identity signs Google Cloud Storage requests, not S3 ones: its S3 "
        "interoperability takes HMAC keys in this Secret.)",
    )
    endpoint: Annotated[str, Field(max_length=1024, pattern=ENDPOINT_PATTERN)] | None = Field(
        default=None,
        description="For an s3a:// location: the URL of an S3-compatible store (MinIO, "
        "SeaweedFS, Ceph), e.g. http://minio.storage:9000; buckets are then addressed by path "
        "(path-style access) and TLS follows the scheme. Absent: AWS S3.",
    )


class Trigger(objects.WireModel):
    """When micro-batches run: exactly one of processingTime, availableNow or realTime."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.exactly_one(
            "processingTime",
            "availableNow",
            "realTime",
            message="trigger needs exactly one of processingTime, availableNow or realTime: keep "
            "one (or remove trigger to run batches back to back)",
        ),
        rules.Rule(
            rule="!has(self.availableNow) || self.availableNow",
            message="trigger.availableNow can only be true: remove trigger to run continuously",
            field_path=".availableNow",
            check=lambda t: t.available_now in {None, True},
        ),
    )

    processing_time: fields.Duration | None = Field(
        default=None,
        description="Start a micro-batch every interval, e.g. 10s (0s: back to back).",
    )
    available_now: bool | None = Field(
        default=None,
        description="true: process what is available now, then stop (the App completes).",
    )
    real_time: Annotated[fields.Duration, fields.positive_duration("trigger.realTime")] | None = (
        Field(
            default=None,
            description="Spark real-time mode with this checkpoint interval, e.g. 5m: lowest "
            "latency, one long task per partition (needs a core per partition).",
        )
    )
