"""How a Topic or Table object maps to a Kafka topic name."""

from __future__ import annotations

from rillet.api.v1alpha1 import fields


def kafka_topic_name(
    *,
    object_name: str,
    namespace: str,
    spec_topic_name: str | None,
    prefix_namespace: bool,
    recorded: str | None = None,
) -> str:
    """spec.topicName, else metadata.name; prefixed `<namespace>.` when the operator is set to
    (the default: no namespace can then name another's topic on a shared Kafka).

    An object keeps the form it already has (`recorded`, its status.topicName) when the setting
    changes: an upgrade to the prefixing default must not move an App's data to a new, empty
    topic. A changed spec.topicName is a new name, and takes the setting's form."""
    base = spec_topic_name or object_name
    prefixed = f"{namespace}.{base}"
    if recorded in (prefixed, base):
        return recorded
    return prefixed if prefix_namespace else base


def name_problem(name: str) -> str | None:
    """Why Rillet will not manage Kafka topic `name`, or None: Kafka would refuse it (the
    prefixed form can outgrow the limit), or it is an internal topic. The apiserver refuses
    both in a new spec; an object stored before that rule still meets them here."""
    if name.startswith("_"):
        return (
            f"Kafka topic {name} is an internal topic (its name starts with '_'): Rillet neither "
            f"changes nor deletes it; set spec.topicName to a name that starts with a letter or "
            f"digit"
        )
    if len(name) > fields.KAFKA_TOPIC_NAME_MAX_LENGTH:
        return (
            f"Kafka topic name {name[:40]}... is {len(name)} characters, more than Kafka's "
            f"{fields.KAFKA_TOPIC_NAME_MAX_LENGTH}: set a shorter spec.topicName"
        )
    return None


# The Kubernetes objects of an App. Every name derives from the App's name, which the API keeps
# to 45 characters (apps.APP_NAME_MAX_LENGTH) so that each of these fits its own limit.


def app_driver_name(app: str) -> str:
    """Name of the driver's StatefulSet, headless Service and ServiceAccount (and of the Role
    and RoleBinding an older release made)."""
    return f"{app}-driver"


def app_driver_binding_name(app: str) -> str:
    """Name of the RoleBinding of the driver ClusterRole to the driver's ServiceAccount (not
    `<app>-driver`: an older release's binding of that name points at a Role, for good)."""
    return f"{app}-driver-rights"


def app_driver_pod_name(app: str) -> str:
    """Name of the driver pod (the only pod of the driver StatefulSet)."""
    return f"{app_driver_name(app)}-0"


def app_run_config_name(app: str) -> str:
    """Name of the ConfigMap holding the run spec, Spark conf and executor pod template."""
    return f"{app}-run"


def app_schema_registry_secret_name(app: str) -> str:
    """Name of the Secret holding the schema registry's credentials for an Avro App's driver."""
    return f"{app}-schema-registry"


def app_spark_auth_secret_name(app: str) -> str:
    """Name of the Secret holding the key Spark's traffic within the App is authenticated with."""
    return f"{app}-spark-auth"


def app_network_policy_name(app: str) -> str:
    """Name of the NetworkPolicy admitting the App's own pods (and monitoring) to its pods."""
    return f"{app}-spark"


def app_checkpoint_claim_name(app: str) -> str:
    """Name of the driver's checkpoint PersistentVolumeClaim (the StatefulSet names it
    `<volumeClaimTemplate>-<pod>`)."""
    return f"checkpoint-{app_driver_pod_name(app)}"


def app_executor_pod_prefix(app: str) -> str:
    """Prefix of executor pod names: Spark names them `<prefix>-exec-<id>`."""
    return app


def consumer_group(*, namespace: str, app: str) -> str:
    """The Kafka consumer group an App commits its processed offsets to."""
    return f"rillet.{namespace}.{app}"
