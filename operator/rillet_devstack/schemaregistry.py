"""The stack's schema registry (Apicurio Registry), as data: its files, its configuration, how
users reach it (variables, a Secret).

Apicurio Registry is a registry people run in production; it serves the Confluent Schema
Registry REST API under `/apis/ccompat/v7`, the URL every Confluent client (confluent-kafka's
serializers, Spark jobs, Kafka Connect) is given. Confluent's own registry is not published on
a registry this machine reaches (packages.confluent.io). `rillet dev up --schema-registry` runs
it (schemaregistering) on the stack's address, so pods on every node reach it, with schemas in
memory (a development stack's registry starts empty, as its Kafka does) and basic auth on, with
a throwaway user and password made for that stack, in a Secret users can copy.

Its settings are in a file (`config/application.properties` of its working directory, which
Quarkus reads), not on its command line: the password never shows in `ps`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rillet_devstack import secretobjects

# The Confluent-compatible API of Apicurio Registry 3.
CCOMPAT_PATH = "/apis/ccompat/v7"
USERNAME = "rillet"
# The Secret users copy into their namespaces; its keys are those the operator's
# schemaRegistry.credentialsSecret reads.
SECRET_NAME = "rillet-schema-registry"
SECRET_NAMESPACE = "default"
USERNAME_KEY = "username"
PASSWORD_KEY = "password"
# Confluent's registry checks each new version against the latest under BACKWARD by default;
# Apicurio checks nothing unless told (NONE). Set as Confluent users expect.
COMPATIBILITY = "BACKWARD"
HEAP = "256m"
# Apicurio Registry 3 is compiled for Java 21 (class file version 65).
JAVA_FEATURE = 21
# Seconds a client request waits for the registry's answer.
REQUEST_TIMEOUT_SECONDS = 10.0


class SchemaRegistryState(BaseModel):
    """How to reach the running registry: its Confluent-compatible URL and the stack's user."""

    url: str
    username: str = USERNAME
    password: str = Field(repr=False)

    def environment(self) -> dict[str, str]:
        """What `rillet dev env` prints for it (as the object store's key and Kafka's admin
        password are: a development stack's throwaway credentials)."""
        return {
            "RILLET_SCHEMA_REGISTRY_URL": self.url,
            "RILLET_SCHEMA_REGISTRY_USERNAME": self.username,
            "RILLET_SCHEMA_REGISTRY_PASSWORD": self.password,
        }

    def client_config(self) -> dict[str, Any]:
        """confluent-kafka's SchemaRegistryClient configuration for it. With a timeout per
        request (the client retries one that timed out): a CI run's test waited 15 minutes for
        an answer the registry's log says it gave."""
        return {
            "url": self.url,
            "basic.auth.user.info": f"{self.username}:{self.password}",
            "timeout": REQUEST_TIMEOUT_SECONDS,
        }


@dataclass(frozen=True)
class SchemaRegistryLayout:
    """The registry's files under the stack's state directory (its working directory)."""

    root: Path

    @property
    def properties(self) -> Path:
        return self.root / "config" / "application.properties"

    @property
    def log(self) -> Path:
        return self.root / "registry.log"

    @property
    def scratch(self) -> Path:
        """Where the JVM and Vert.x put their temporary files (else /tmp)."""
        return self.root / "tmp"


def properties(*, address: str, port: int, management_port: int, password: str) -> dict[str, str]:
    """Quarkus and Apicurio settings: listen on `address` only, basic auth with one user,
    Confluent's default compatibility rule."""
    return {
        "quarkus.http.host": address,
        "quarkus.http.port": str(port),
        "quarkus.management.host": address,
        "quarkus.management.port": str(management_port),
        "quarkus.http.auth.basic": "true",
        "quarkus.security.users.embedded.enabled": "true",
        "quarkus.security.users.embedded.plain-text": "true",
        f"quarkus.security.users.embedded.users.{USERNAME}": password,
        f"quarkus.security.users.embedded.roles.{USERNAME}": "sr-admin",
        "apicurio.rules.global.compatibility": COMPATIBILITY,
        # No UI and no telemetry of its own: a registry for clients.
        "apicurio.ui.enabled": "false",
        "quarkus.analytics.disabled": "true",
    }


def properties_text(settings: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def server_args(java: Path, home: Path, layout: SchemaRegistryLayout) -> list[str]:
    """The registry's JVM: a small heap, temporary files under the layout, no perf data file in
    /tmp (the host is left as it was found)."""
    return [
        str(java),
        f"-Xmx{HEAP}",
        "-XX:+UseSerialGC",
        "-XX:-UsePerfData",
        f"-Djava.io.tmpdir={layout.scratch}",
        f"-Dvertx.cacheDirBase={layout.scratch / 'vertx'}",
        "-jar",
        str(home / "quarkus-run.jar"),
    ]


def url(address: str, port: int) -> str:
    return f"http://{address}:{port}{CCOMPAT_PATH}"


def credentials_secret(*, password: str, registry_url: str) -> dict[str, Any]:
    """The Secret with the stack's registry user, in namespace default (`url` beside them, for
    reference: it is no secret)."""
    values = {USERNAME_KEY: USERNAME, PASSWORD_KEY: password, "url": registry_url}
    return secretobjects.opaque_secret(SECRET_NAME, SECRET_NAMESPACE, values)


def java_feature(home: Path) -> int | None:
    """The feature release (17, 21, 25) of the JDK at `home`, from its `release` file."""
    release = home / "release"
    if not release.is_file():
        return None
    for line in release.read_text().splitlines():
        if line.startswith("JAVA_VERSION="):
            version = line.split("=", 1)[1].strip().strip('"')
            head = version.split(".", 1)[0]
            return int(head) if head.isdigit() else None
    return None


def find_java(candidates: list[Path], *, at_least: int = JAVA_FEATURE) -> Path | None:
    """The `bin/java` of the newest JDK among `candidates` (JDK homes) at `at_least` or later."""
    usable = [
        (feature, home)
        for home in candidates
        if (feature := java_feature(home)) is not None
        and feature >= at_least
        and (home / "bin" / "java").is_file()
    ]
    return max(usable)[1] / "bin" / "java" if usable else None
