#!/bin/bash
# The Spark executor of the runtime image (installed as /opt/rillet/bin/spark-executor).
#
# pip's pyspark carries Spark's jars but not the entrypoint of the apache/spark image. An executor
# pod runs this with the argument `executor`, which Spark's pod builder appends. Spark hands the
# executor its settings as environment variables: SPARK_JAVA_OPT_<n> (JVM options, in order,
# including the --add-opens flags Java 17 needs), SPARK_DRIVER_URL, SPARK_EXECUTOR_* and so on.
# The main class is KubernetesExecutorBackend (from pyspark's spark-kubernetes jar), not
# CoarseGrainedExecutorBackend. The Kafka connector jars go on the classpath as well.
set -euo pipefail

if [ "${1:-}" != executor ]; then
    echo "spark-executor: expected 'executor', got: $*" >&2
    exit 22
fi
: "${SPARK_HOME:?SPARK_HOME must name the pyspark package directory}"
: "${JAVA_HOME:?JAVA_HOME must name the JDK}"

# Numeric order of <n>: SPARK_JAVA_OPT_10 comes after SPARK_JAVA_OPT_9.
readarray -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n \
    | sed 's/[^=]*=\(.*\)/\1/g' || true)

classpath="${SPARK_CONF_DIR:-/opt/spark/conf}:${SPARK_HOME}/jars/*"
if [ -n "${RILLET_SPARK_JARS:-}" ]; then
    # spark.jars is comma-separated, a classpath colon-separated.
    classpath="${classpath}:${RILLET_SPARK_JARS//,/:}"
fi

# tini -s: reap the JVM's orphans even when this is not PID 1 (the pod's command replaces the
# image's tini entrypoint).
exec tini -s -- "${JAVA_HOME}/bin/java" "${java_opts[@]}" \
    -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
    -cp "${classpath}" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "${SPARK_DRIVER_URL}" \
    --executor-id "${SPARK_EXECUTOR_ID}" \
    --cores "${SPARK_EXECUTOR_CORES}" \
    --app-id "${SPARK_APPLICATION_ID}" \
    --hostname "${SPARK_EXECUTOR_POD_IP}" \
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
    --podName "${SPARK_EXECUTOR_POD_NAME}"
