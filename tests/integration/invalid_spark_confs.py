"""Table data: the sparkConf of an App reaching past the App, and what the apiserver says.

One representative key per group and prefix of api/v1alpha1/appsparkconf.py (the pods, code
from outside the image, the security settings, secret-looking keys), unsafe JVM options, and
an executor ServiceAccount other than the App's own. invalid_crs.py turns each row into a Case
(id `app-reach-<id>`): tests/integration/test_crds.py sends it to the real apiserver
(`-k app-reach`), tests/unit/test_api_validation.py to the pydantic models.
"""

from __future__ import annotations

from typing import Final

_MANAGED: Final = "which Rillet manages: use the fields of the App instead"
_PODS: Final = "a Kubernetes setting of Spark: the operator builds the pods of the App"
_CODE: Final = "which loads code or files into the JVMs of the App"
_SECURITY: Final = "which keeps the traffic, files and secrets of the App to itself"
_SECRET: Final = "which looks like a secret: sparkConf is stored and shown in clear text"
_JAVA: Final = "to options other than -XX flags"

# (id, key, value, expected message after "sparkConf sets <key>")
KEYS: Final[tuple[tuple[str, str, str, str], ...]] = (
    ("driver-memory", "spark.driver.memory", "8g", _MANAGED),
    ("default-java-options", "spark.executor.defaultJavaOptions", "-XX:+UseG1GC", _MANAGED),
    ("dynamic-allocation", "spark.dynamicAllocation.maxExecutors", "99", _MANAGED),
    ("host-path", "spark.kubernetes.executor.volumes.hostPath.root.mount.path", "/host", _PODS),
    ("k8s-secret", "spark.kubernetes.driver.secrets.other-app-kafka", "/secrets", _PODS),
    ("pod-template", "spark.kubernetes.executor.podTemplateFile", "/tmp/pod.yaml", _PODS),
    ("driver-master", "spark.kubernetes.driver.master", "https://attacker:443", _PODS),
    ("upload-path", "spark.kubernetes.file.upload.path", "s3a://elsewhere/up", _PODS),
    ("node-selector", "spark.kubernetes.node.selector.pool", "system", _PODS),
    ("driver-account", "spark.kubernetes.authenticate.driver.serviceAccountName", "admin", _PODS),
    ("pull-policy", "spark.kubernetes.container.image.pullPolicy", "Never", _PODS),
    ("driver-env", "spark.kubernetes.driverEnv.JAVA_TOOL_OPTIONS", "-javaagent:/a.jar", _PODS),
    ("jars", "spark.jars", "https://attacker/evil.jar", _CODE),
    ("jars-packages", "spark.jars.packages", "com.evil:agent:1.0", _CODE),
    ("jars-repositories", "spark.jars.repositories", "https://attacker/maven", _CODE),
    ("jars-ivy", "spark.jars.ivySettings", "/tmp/ivy.xml", _CODE),
    ("plugins", "spark.plugins", "com.evil.Plugin", _CODE),
    ("listeners", "spark.extraListeners", "com.evil.Listener", _CODE),
    ("sql-extensions", "spark.sql.extensions", "com.evil.Extensions", _CODE),
    ("query-listeners", "spark.sql.queryExecutionListeners", "com.evil.Listener", _CODE),
    ("stream-listeners", "spark.sql.streaming.streamingQueryListeners", "com.evil.L", _CODE),
    ("catalog", "spark.sql.catalog.evil", "com.evil.Catalog", _CODE),
    ("class-path", "spark.driver.extraClassPath", "/tmp/evil.jar", _CODE),
    ("library-path", "spark.executor.extraLibraryPath", "/tmp", _CODE),
    ("files", "spark.files", "https://attacker/x", _CODE),
    ("archives", "spark.archives", "https://attacker/x.zip", _CODE),
    ("py-files", "spark.submit.pyFiles", "https://attacker/x.py", _CODE),
    ("executor-env", "spark.executorEnv.LD_PRELOAD", "/tmp/evil.so", _CODE),
    ("hive-jars", "spark.sql.hive.metastore.jars", "maven", _CODE),
    ("discovery-script", "spark.executor.resource.gpu.discoveryScript", "/tmp/x.sh", _CODE),
    ("run-sql-on-files", "spark.sql.runSQLOnFiles", "true", _SECURITY),
    ("ui", "spark.ui.enabled", "true", _SECURITY),
    ("authenticate", "spark.authenticate", "false", _SECURITY),
    ("network-crypto", "spark.network.crypto.enabled", "false", _SECURITY),
    ("io-encryption", "spark.io.encryption.enabled", "false", _SECURITY),
    ("ssl", "spark.ssl.enabled", "false", _SECURITY),
    ("acls", "spark.acls.enable", "false", _SECURITY),
    ("redaction", "spark.redaction.regex", "nothing", _SECURITY),
    ("warehouse", "spark.sql.warehouse.dir", "/var/run/secrets", _SECURITY),
    ("kerberos", "spark.kerberos.keytab", "/tmp/keytab", _SECURITY),
    ("s3a-secret-key", "spark.hadoop.fs.s3a.secret.key", "abc", _SECRET),
    ("s3a-access-key", "spark.hadoop.fs.s3a.access.key", "abc", _SECRET),
    ("session-token", "spark.hadoop.fs.s3a.session.token", "abc", _SECRET),
    ("account-key", "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net", "k", _SECRET),
    ("password-any-case", "spark.myapp.DbPassWord", "hunter2", _SECRET),
    ("jaas", "spark.myapp.sasl.JAAS.config", "x", _SECRET),
    ("credential-path", "spark.hadoop.hadoop.security.credential.provider.path", "x", _SECRET),
)

# (id, extraJavaOptions of the executors)
JAVA_OPTIONS: Final[tuple[tuple[str, str], ...]] = (
    ("java-agent", "-XX:+UseG1GC -javaagent:/tmp/agent.jar"),
    ("java-agentlib", "-agentlib:jdwp=transport=dt_socket,server=y,address=5005"),
    ("java-jmx", "-Dcom.sun.management.jmxremote.port=9010"),
    ("java-on-oom", "-XX:OnOutOfMemoryError=reboot"),
    ("java-boot-class-path", "-Xbootclasspath/a:/tmp/evil.jar"),
    ("java-argument-file", "@/tmp/arguments"),
)

EXECUTOR_ACCOUNT_MESSAGE: Final = (
    "sparkConf spark.kubernetes.executor.serviceAccountName may only name the ServiceAccount "
    "of the App, <app>-driver"
)


def refused() -> list[tuple[str, dict[str, str], str]]:
    """(id, sparkConf, expected message) of every row."""
    rows = [
        (f"app-reach-{id_}", {key: value}, f"sparkConf sets {key}, {expect}")
        for id_, key, value, expect in KEYS
    ]
    rows += [
        (
            f"app-reach-{id_}",
            {"spark.executor.extraJavaOptions": value},
            f"sparkConf sets spark.executor.extraJavaOptions {_JAVA}",
        )
        for id_, value in JAVA_OPTIONS
    ]
    rows.append(
        (
            "app-reach-executor-account",
            {"spark.kubernetes.executor.serviceAccountName": "default"},
            EXECUTOR_ACCOUNT_MESSAGE,
        )
    )
    return rows
