"""Table data: invalid Apps (required fields, names, scaling and resources, checkpoint, trigger,
sparkConf, dead letters), and what the apiserver says when it refuses them. Part of the table
invalid_crs.py joins; an App's inputs and outputs have tables of their own
(invalid_app_inputs.py, invalid_app_outputs.py).
"""

from __future__ import annotations

from tests.integration.invalid_cases import DROP, Case, app, app_input

CASES: tuple[Case, ...] = (
    # --- App: required fields and types
    Case("app-image-missing", app({"image": DROP}), "spec.image: Required value"),
    Case("app-image-empty", app({"image": ""}), "spec.image"),
    Case("app-inputs-empty", app({"inputs": []}), "spec.inputs"),
    Case("app-outputs-missing", app({"outputs": DROP}), "spec.outputs: Required value"),
    Case("app-suspend-string", app({"suspend": "yes"}), "spec.suspend"),
    Case("app-unknown-spec-field", app({"replicas": 3}), "spec.replicas"),
    Case(
        "app-unknown-nested-field", app({"scaling": {"maxExecutor": 3}}), "spec.scaling.maxExecutor"
    ),
    Case("app-name-too-long", app(name="a" * 48), "metadata.name of an App names its pods"),
    Case("app-name-with-dot", app(name="word.count"), "metadata.name of an App names its pods"),
    Case(
        "app-name-starts-with-digit",
        app(name="1wordcount"),
        "metadata.name of an App names its pods",
    ),
    # --- App: Kafka topic names
    Case(
        "app-external-input-internal",
        app({"inputs": [app_input(topicRef=DROP, external={"topicName": "__transaction_state"})]}),
        "cannot start with '_'",
    ),
    Case(
        "app-dead-letter-internal",
        app({"deadLetterTopic": {"topicName": "_dead"}}),
        "cannot start with '_'",
    ),
    # --- App: scaling and resources
    Case(
        "app-min-executors-above-max",
        app({"scaling": {"minExecutors": 5, "maxExecutors": 2}}),
        "scaling.minExecutors must not exceed scaling.maxExecutors",
    ),
    Case(
        "app-min-executors-above-default-max",
        app({"scaling": {"minExecutors": 9}}),
        "scaling.minExecutors must not exceed scaling.maxExecutors",
    ),
    Case(
        "app-max-executors-zero",
        app({"scaling": {"maxExecutors": 0}}),
        "spec.scaling.maxExecutors in body should be greater than or equal to 1",
    ),
    Case(
        "app-min-executors-negative",
        app({"scaling": {"minExecutors": -1}}),
        "spec.scaling.minExecutors in body should be greater than or equal to 0",
    ),
    Case(
        "app-lag-target-zero",
        app({"scaling": {"lagTarget": 0}}),
        "spec.scaling.lagTarget in body should be greater than or equal to 1",
    ),
    Case(
        "app-lag-target-past-int64",
        app({"scaling": {"lagTarget": 2**63}}),
        "spec.scaling.lagTarget",
    ),
    Case(
        "app-driver-cpu-past-int32",
        app({"driver": {"cpu": 2**31}}),
        "spec.driver.cpu in body should be less than or equal to 2147483647",
    ),
    Case(
        "app-executor-memory-past-int64",
        app({"executor": {"memory": 2**63}}),
        "spec.executor.memory",
    ),
    Case(
        "app-executor-memory-bytes-unit",
        app({"executor": {"memory": "2GB"}}),
        "spec.executor.memory in body should match",
    ),
    Case(
        "app-driver-memory-milli",
        app({"driver": {"memory": "512m"}}),
        "spec.driver.memory in body should match",
    ),
    Case(
        "app-driver-cpu-words",
        app({"driver": {"cpu": "two"}}),
        "spec.driver.cpu in body should match",
    ),
    Case("app-executor-cpu-float", app({"executor": {"cpu": 1.5}}), "spec.executor.cpu"),
    # Below these Spark refuses to start the JVM: the pods would crash-loop.
    Case(
        "app-executor-memory-under-700Mi",
        app({"executor": {"memory": "512Mi"}}),
        "executor.memory must be at least 700Mi",
    ),
    Case(
        "app-executor-memory-decimal-under-700Mi",
        app({"executor": {"memory": "0.7G"}}),  # 700,000,000 bytes: under 734,003,200
        "executor.memory must be at least 700Mi",
    ),
    Case(
        "app-driver-memory-bytes-under-1Gi",
        app({"driver": {"memory": 2**30 - 1}}),
        "driver.memory must be at least 1Gi",
    ),
    # --- App: checkpoint (S3A credentials and endpoint need an s3a:// location)
    Case(
        "app-checkpoint-secret-on-volume",
        app({"checkpoint": {"secretRef": {"name": "store"}}}),
        "checkpoint.secretRef and checkpoint.endpoint apply only to an s3a:// location: set "
        "checkpoint.location to s3a://<bucket>/<path>, or remove them",
    ),
    Case(
        "app-checkpoint-endpoint-on-gs",
        app({"checkpoint": {"location": "gs://bucket/app", "endpoint": "http://store:8333"}}),
        "checkpoint.secretRef and checkpoint.endpoint apply only to an s3a:// location",
    ),
    Case(
        "app-checkpoint-endpoint-not-a-url",
        app({"checkpoint": {"location": "s3a://bucket/app", "endpoint": "store:8333"}}),
        "spec.checkpoint.endpoint in body should match",
    ),
    # An App's own Secret must not be named as the Secrets Rillet makes for Apps end.
    *(
        Case(
            f"app-checkpoint-secret-named{suffix}",
            app(
                {
                    "checkpoint": {
                        "location": "s3a://bucket/app",
                        "secretRef": {"name": f"billing{suffix}"},
                    }
                }
            ),
            "a Secret an App names cannot end in -kafka, -spark-auth or -schema-registry: Rillet "
            "makes Secrets of those names for Apps",
        )
        for suffix in ("-kafka", "-spark-auth", "-schema-registry")
    ),
    Case(
        "app-checkpoint-secret-key-slash",
        app(
            {
                "checkpoint": {
                    "location": "s3a://bucket/app",
                    "secretRef": {"name": "store", "accessKeyIdKey": "a/b"},
                }
            }
        ),
        "spec.checkpoint.secretRef.accessKeyIdKey in body should match",
    ),
    # --- App: trigger, sparkConf, dead letters
    Case(
        "app-trigger-two-kinds",
        app({"trigger": {"processingTime": "10s", "availableNow": True}}),
        "trigger needs exactly one of processingTime, availableNow or realTime",
    ),
    Case(
        "app-trigger-empty",
        app({"trigger": {}}),
        "trigger needs exactly one of processingTime, availableNow or realTime",
    ),
    Case(
        "app-trigger-words",
        app({"trigger": {"processingTime": "10 seconds"}}),
        "spec.trigger.processingTime in body should match",
    ),
    Case(
        "app-trigger-available-now-false",
        app({"trigger": {"availableNow": False}}),
        "trigger.availableNow can only be true",
    ),
    Case(
        "app-spark-conf-master",
        app({"sparkConf": {"spark.master": "local[*]"}}),
        "sparkConf sets spark.master, which Rillet manages",
    ),
    Case(
        "app-spark-conf-dynamic-allocation",
        app(
            {
                "sparkConf": {
                    "spark.sql.shuffle.partitions": "8",
                    "spark.dynamicAllocation.enabled": "true",
                }
            }
        ),
        "sparkConf sets spark.dynamicAllocation.enabled, which Rillet manages",
    ),
    Case(
        "app-spark-conf-number",
        app({"sparkConf": {"spark.sql.shuffle.partitions": 8}}),
        "spec.sparkConf.spark.sql.shuffle.partitions",
    ),
    Case(
        "app-dead-letter-both",
        app({"deadLetterTopic": {"topicRef": {"name": "dlq"}, "topicName": "dlq"}}),
        "deadLetterTopic needs exactly one of topicRef or topicName",
    ),
    Case(
        "app-dead-letter-bad-ref-name",
        app({"deadLetterTopic": {"topicRef": {"name": "DLQ"}}}),
        "spec.deadLetterTopic.topicRef.name in body should match",
    ),
)
