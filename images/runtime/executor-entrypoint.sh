#!/bin/bash
# The Spark executor of the runtime image (installed as /opt/rillet/bin/spark-executor).
#
# pip's pyspark carries Spark's jars but not the entrypoint of the apache/spark image. An executor
# pod runs this with the argument `executor`, which Spark's pod builder appends. Spark hands the
# executor its settings as environment variables: SPARK_JAVA_OPT_<n> (JVM options, in order,
# including the --add-opens flags Java 17 needs), SPARK_DRIVER_URL, SPARK_EXECUTOR_* and so on.
# The main class is KubernetesExecutorBackend (from pyspark's spark-kubernetes jar), not
# CoarseGrainedExecutorBackend. The Kafka connector jars go on the classpath as well.
#
# `spark-executor archive PATH` (run once by the image build) writes a class-data sharing archive
# of the classes an executor loads as it starts: an executor then maps them, parsed and verified,
# instead of reading them from some 250 jars (its JVM spent 5 s before Spark's first log line on
# the 2-core node, three executors starting at once). The JVM uses an archive only for the very
# classpath it was written with, so the classpath is spelled out here in a fixed order: sorted
# jars (a `jars/*` wildcard is expanded in directory order, which differs from one filesystem to
# another), and the configuration directory last (an archive allows entries after its own).
set -euo pipefail

: "${SPARK_HOME:?SPARK_HOME must name the pyspark package directory}"
: "${JAVA_HOME:?JAVA_HOME must name the JDK}"

shopt -s nullglob
jars=("${SPARK_HOME}"/jars/*.jar)
if [ -n "${RILLET_SPARK_JARS:-}" ]; then
    # spark.jars is comma-separated.
    IFS=, read -r -a extra <<< "${RILLET_SPARK_JARS}"
    jars+=("${extra[@]}")
fi
classpath="$(IFS=:; echo "${jars[*]}"):${SPARK_CONF_DIR:-/opt/spark/conf}"
backend=org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend

if [ "${1:-}" = archive ] && [ -n "${2:-}" ]; then
    # Start an executor against a driver that is not there: it loads what it loads up to the
    # driver connection (logging, Hadoop's security, Spark's RPC and Netty), gives up after its
    # retries and exits, and the JVM writes the archive as it exits.
    "${JAVA_HOME}/bin/java" -XX:ArchiveClassesAtExit="$2.tmp" -Xmx256m -cp "${classpath}" \
        "${backend}" --driver-url spark://CoarseGrainedScheduler@127.0.0.1:9 \
        --executor-id 0 --cores 1 --app-id class-archive --hostname 127.0.0.1 \
        --resourceProfileId 0 --podName class-archive > "$2.log" 2>&1 || true
    if [ ! -s "$2.tmp" ]; then
        echo "spark-executor: no archive written; the executor said:" >&2
        cat "$2.log" >&2
        exit 1
    fi
    mv "$2.tmp" "$2" && rm -f "$2.log"
    exit 0
fi
if [ "${1:-}" != executor ]; then
    echo "spark-executor: expected 'executor' (or 'archive PATH'), got: $*" >&2
    exit 22
fi

# Numeric order of <n>: SPARK_JAVA_OPT_10 comes after SPARK_JAVA_OPT_9.
readarray -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n \
    | sed 's/[^=]*=\(.*\)/\1/g' || true)
if [ -n "${RILLET_SPARK_EXECUTOR_CLASS_ARCHIVE:-}" ] && [ -r "${RILLET_SPARK_EXECUTOR_CLASS_ARCHIVE}" ]; then
    # An archive of another JDK or other jars is ignored by the JVM (-Xshare:auto).
    java_opts+=("-XX:SharedArchiveFile=${RILLET_SPARK_EXECUTOR_CLASS_ARCHIVE}")
fi

# tini -s: reap the JVM's orphans even when this is not PID 1 (the pod's command replaces the
# image's tini entrypoint).
exec tini -s -- "${JAVA_HOME}/bin/java" "${java_opts[@]}" \
    -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
    -cp "${classpath}" \
    "${backend}" \
    --driver-url "${SPARK_DRIVER_URL}" \
    --executor-id "${SPARK_EXECUTOR_ID}" \
    --cores "${SPARK_EXECUTOR_CORES}" \
    --app-id "${SPARK_APPLICATION_ID}" \
    --hostname "${SPARK_EXECUTOR_POD_IP}" \
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
    --podName "${SPARK_EXECUTOR_POD_NAME}"
