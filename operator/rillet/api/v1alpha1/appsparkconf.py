"""The Spark settings an App's `sparkConf` may not hold, and why: one group of keys per reason.

An App's author is a tenant of a shared cluster. What the App runs is theirs; what reaches past
the App is not: the pods the operator builds (volumes, Secrets, ServiceAccounts, pod templates,
node placement, the apiserver Spark talks to), code or files fetched from outside the image
(packages, repositories, plugins, listeners, class paths), the settings that keep the App's
traffic and files to itself (authentication, encryption, the UI, ACLs, SQL over raw files), and
secrets written in clear text. Each group below says which keys, why, and what to do instead; each
becomes one CEL rule of the App's CRD (message included) and the same check in pydantic.

The audit behind the groups: Spark 4's configuration, running-on-kubernetes and security pages.
Tuning keys (spark.sql.*, spark.locality.wait, memory fractions, S3A options through
spark.hadoop.fs.s3a.*) stay the App's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Final

from rillet.api.v1alpha1 import rules


@dataclasses.dataclass(frozen=True, kw_only=True)
class KeyGroup:
    """Keys refused for one reason: exact `keys`, keys starting with one of `prefixes`, or keys
    `pattern` (RE2 and Python alike, searched anywhere in the key) finds; `allowed` are exempt.
    `advice` completes "sparkConf sets <key>, " and says what to do instead."""

    keys: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()
    pattern: str | None = None
    allowed: frozenset[str] = frozenset()
    advice: str

    def holds(self, key: str) -> bool:
        """Whether this group refuses `key`."""
        if key in self.allowed:
            return False
        return (
            key in self.keys
            or key.startswith(self.prefixes)
            or (self.pattern is not None and re.search(self.pattern, key) is not None)
        )

    def cel(self) -> str:
        """The CEL condition "this group refuses k"."""
        tests = []
        if self.keys:
            tests.append(f"k in {rules.cel_list(self.keys)}")
        if self.prefixes:
            tests.append(f"{rules.cel_list(self.prefixes)}.exists(p, k.startsWith(p))")
        if self.pattern is not None:
            tests.append(f"k.matches({rules.cel_string(self.pattern)})")
        held = " || ".join(tests)
        if self.allowed:
            return f"(!(k in {rules.cel_list(self.allowed)}) && ({held}))"
        return f"({held})"

    def rule(self) -> rules.Rule:
        """The group as a rule on the sparkConf map."""
        condition = self.cel()
        return rules.every_key(
            passes=f"!{condition}",
            fails=condition,
            failing=lambda conf: [key for key in conf if self.holds(key)],
            message=f"sparkConf sets a key {self.advice}",
            lead="sparkConf sets ",
            tail=f", {self.advice}",
        )


# Derived from the App's fields (or from where it runs): a user value would be overwritten, or
# would break the driver or the scaling.
MANAGED: Final = KeyGroup(
    keys=frozenset(
        {
            "spark.app.name",
            "spark.blockManager.port",
            "spark.driver.blockManager.port",
            "spark.driver.bindAddress",
            "spark.driver.cores",
            "spark.driver.host",
            "spark.driver.memory",
            "spark.driver.port",
            "spark.executor.cores",
            "spark.executor.instances",
            "spark.executor.memory",
            "spark.executor.memoryOverhead",
            "spark.master",
            "spark.sql.streaming.checkpointLocation",
            "spark.submit.deployMode",
            # Rillet's JVM defaults (reconcile.sparkdefaults.jvm_defaults): flags of the App's
            # own go in extraJavaOptions (JAVA_OPTIONS below).
            "spark.driver.defaultJavaOptions",
            "spark.executor.defaultJavaOptions",
        }
    ),
    prefixes=("spark.dynamicAllocation.",),
    advice="which Rillet manages: use the fields of the App instead (image, scaling, driver, "
    "executor, checkpoint)",
)

# The executors' ServiceAccount may be the driver's own (workload identity, e.g. EKS IRSA: see
# docs/running-on-a-cluster.md); the App-level rule EXECUTOR_ACCOUNT_IS_THE_DRIVERS checks that.
EXECUTOR_ACCOUNT: Final = "spark.kubernetes.executor.serviceAccountName"
# spark.kubernetes.*: the pods Spark makes and how it talks to the apiserver. The operator owns
# the pod specs: volumes (hostPath), Secrets, ServiceAccounts, pod templates, node selectors,
# driver.master (where the token goes), file.upload.path, the image and its pull policy (a cached
# image of another tenant), environment. Only how fast executors are asked for stays the App's.
KUBERNETES: Final = KeyGroup(
    prefixes=("spark.kubernetes.",),
    allowed=frozenset(
        {
            "spark.kubernetes.allocation.batch.size",
            "spark.kubernetes.allocation.batch.delay",
            EXECUTOR_ACCOUNT,
        }
    ),
    advice="a Kubernetes setting of Spark: the operator builds the pods of the App (image, "
    "resources, volumes, secrets, service accounts, placement) and Spark may not change them; "
    "use the fields of the App (image, driver, executor, scaling), or ask the platform team",
)

# Code or files from outside the App's image, or run as each JVM starts: the image is what a
# platform reviews and admits; these would load more behind its back.
CODE: Final = KeyGroup(
    keys=frozenset(
        {
            "spark.jars",
            "spark.files",
            "spark.archives",
            "spark.pyFiles",
            "spark.submit.pyFiles",
            "spark.plugins",
            "spark.plugins.defaultList",
            "spark.extraListeners",
            "spark.sql.extensions",
            "spark.sql.queryExecutionListeners",
            "spark.sql.streaming.streamingQueryListeners",
            "spark.sql.catalogImplementation",
            "spark.driver.extraClassPath",
            "spark.executor.extraClassPath",
            "spark.driver.extraLibraryPath",
            "spark.executor.extraLibraryPath",
        }
    ),
    prefixes=(
        "spark.jars.",  # packages, repositories, ivy, ivySettings, excludes
        "spark.sql.catalog.",
        "spark.sql.hive.",  # metastore.jars=maven downloads jars
        "spark.executorEnv.",  # JAVA_TOOL_OPTIONS, LD_PRELOAD, PYTHONPATH
        "spark.driver.resource.",  # discoveryScript runs a script; resources shape the pods
        "spark.executor.resource.",
    ),
    advice="which loads code or files into the JVMs of the App (jars, packages, plugins, "
    "listeners, extensions, catalogs, class paths, environment): build them into the image "
    "of the App instead (docs/python-pipelines.md)",
)

# What keeps an App's traffic, files and secrets to itself: Rillet sets these for every App
# (reconcile.sparkdefaults.SECURITY_DEFAULTS) or leaves them at Spark's safe defaults.
SECURITY: Final = KeyGroup(
    keys=frozenset(
        {
            "spark.sql.runSQLOnFiles",
            "spark.sql.warehouse.dir",
            "spark.redaction.regex",
            "spark.acls.enable",
            "spark.admin.acls",
            "spark.admin.acls.groups",
            "spark.modify.acls",
            "spark.modify.acls.groups",
            "spark.view.acls",
            "spark.view.acls.groups",
            "spark.user.groups.mapping",
        }
    ),
    prefixes=(
        "spark.authenticate",
        "spark.network.crypto.",
        "spark.io.encryption.",
        "spark.ssl.",
        "spark.ui.",
        "spark.sql.redaction.",
        "spark.kerberos.",
        "spark.security.",
    ),
    advice="which keeps the traffic, files and secrets of the App to itself (authentication, "
    "encryption, the UI, ACLs, redaction, SQL over files): Rillet sets it the same for every App",
)

# Case-insensitive, anywhere in the key. `credentials.provider` (S3A's choice of a credential
# chain, e.g. IRSA's) holds no secret and is not matched.
SECRET_PATTERN: Final = (
    "(?i)(password|passwd|secret|token|access[.]key|account[.]key|private[.]?key|jaas|"
    "credential[.]provider[.]path)"
)
SECRETS: Final = KeyGroup(
    pattern=SECRET_PATTERN,
    advice="which looks like a secret: sparkConf is stored and shown in clear text (the App, its "
    "ConfigMap, the pods); keep secrets in a Secret of the namespace, as checkpoint.secretRef "
    "does for the object store, or use workload identity",
)

GROUPS: Final = (MANAGED, KUBERNETES, CODE, SECURITY, SECRETS)


def refusals(key: str) -> list[KeyGroup]:
    """The groups that refuse `key` (several may: spark.ssl.keyPassword is both)."""
    return [group for group in GROUPS if group.holds(key)]


def is_reserved(key: str) -> bool:
    """Whether an App's sparkConf may not set `key`."""
    return bool(refusals(key))


# extraJavaOptions: -XX flags (boolean, or with a plain number or word) and -Xss only. Not
# agents (-javaagent, -agentlib, -agentpath), class paths, system properties (-D: JMX ports,
# class loaders, security managers), argument files (@file), nor commands run on an error.
_XX_FLAG = "-XX:([+-][A-Za-z0-9]+|[A-Za-z0-9]+=[A-Za-z0-9.]+)"
_JVM_OPTION = f"({_XX_FLAG}|-Xss[0-9]+[kKmMgG]?)"
JVM_OPTIONS_PATTERN: Final = f"^ *{_JVM_OPTION}( +{_JVM_OPTION})* *$"
# Flags whose value is a command the JVM runs.
JVM_COMMAND_FLAGS: Final = "-XX:On(OutOfMemory)?Error="
JAVA_OPTIONS_KEYS: Final = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def java_options_fit(value: str) -> bool:
    """Whether `value` of an extraJavaOptions key holds only the JVM flags allowed."""
    # fullmatch: RE2's `$` (CEL) ends the text, where Python's search would allow a last "\n".
    return (
        re.fullmatch(JVM_OPTIONS_PATTERN, value) is not None
        and re.search(JVM_COMMAND_FLAGS, value) is None
    )


def _java_options_unfit(conf: Mapping[str, str]) -> list[str]:
    return [key for key in JAVA_OPTIONS_KEYS if key in conf and not java_options_fit(conf[key])]


_JAVA_OPTIONS_UNFIT = (
    f"(k in {rules.cel_list(JAVA_OPTIONS_KEYS)} && "
    f"(!self[k].matches({rules.cel_string(JVM_OPTIONS_PATTERN)}) || "
    f"self[k].matches({rules.cel_string(JVM_COMMAND_FLAGS)})))"
)
_JAVA_OPTIONS_ADVICE = (
    "to options other than -XX flags (such as -XX:+UseG1GC or -XX:MaxRAMPercentage=75) and "
    "-Xss: agents, class paths, system properties (-D), argument files and commands are refused "
    "(they load code or open ports outside the image of the App)"
)
JAVA_OPTIONS: Final = rules.every_key(
    passes=f"!{_JAVA_OPTIONS_UNFIT}",
    fails=_JAVA_OPTIONS_UNFIT,
    failing=_java_options_unfit,
    message=f"sparkConf sets extraJavaOptions {_JAVA_OPTIONS_ADVICE}",
    lead="sparkConf sets ",
    tail=f" {_JAVA_OPTIONS_ADVICE}",
)

RULES: Final = rules.RuleSet((*(group.rule() for group in GROUPS), JAVA_OPTIONS))
