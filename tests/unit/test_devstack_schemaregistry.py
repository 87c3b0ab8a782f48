"""The stack's schema registry as data, without starting it.

Test plan:
- the JDK it runs on is the newest of release 21 or later among the candidates (this machine's
  default 17 cannot load its classes), none when there is no such JDK;
- it listens on the stack's address only, with basic auth and Confluent's BACKWARD rule, and
  its password is in its settings file, never on its command line;
- the Secret users copy holds the user, the password and the URL (base64, as a Secret's data).
"""

from __future__ import annotations

import base64
from pathlib import Path

from rillet_devstack import schemaregistry
from rillet_devstack.schemaregistry import SchemaRegistryLayout, SchemaRegistryState


def _jdk(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").touch()
    (home / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
    return home


def test_the_newest_jdk_of_release_21_or_later_runs_it(tmp_path: Path) -> None:
    debian = _jdk(tmp_path, "java-17-openjdk-amd64", "17.0.15")
    temurin21 = _jdk(tmp_path, "temurin-21", "21.0.5")
    temurin25 = _jdk(tmp_path, "temurin-25-jdk-amd64", "25.0.3")
    broken = tmp_path / "no-release"
    broken.mkdir()

    found = schemaregistry.find_java([debian, broken, temurin25, temurin21])

    assert found == temurin25 / "bin" / "java"
    assert schemaregistry.find_java([debian, broken]) is None


def test_it_listens_on_the_stacks_address_with_basic_auth_and_backward_compatibility() -> None:
    settings = schemaregistry.properties(
        address="10.99.0.1", port=4000, management_port=4001, password="pw-123"
    )

    assert settings["quarkus.http.host"] == settings["quarkus.management.host"] == "10.99.0.1"
    assert (settings["quarkus.http.port"], settings["quarkus.management.port"]) == ("4000", "4001")
    assert settings["quarkus.http.auth.basic"] == "true"
    assert settings["quarkus.security.users.embedded.users.rillet"] == "pw-123"
    assert settings["apicurio.rules.global.compatibility"] == "BACKWARD"
    assert "quarkus.security.users.embedded.users.rillet=pw-123\n" in (
        schemaregistry.properties_text(settings)
    )
    assert schemaregistry.url("10.99.0.1", 4000) == "http://10.99.0.1:4000/apis/ccompat/v7"


def test_its_command_line_holds_no_password_and_keeps_temporary_files_in_its_directory(
    tmp_path: Path,
) -> None:
    layout = SchemaRegistryLayout(tmp_path / "registry")

    args = schemaregistry.server_args(Path("/jdk/bin/java"), Path("/cache/registry"), layout)

    assert args[0] == "/jdk/bin/java"
    assert args[-2:] == ["-jar", "/cache/registry/quarkus-run.jar"]
    assert f"-Djava.io.tmpdir={layout.scratch}" in args
    assert not any("password" in arg or "users.embedded" in arg for arg in args)


def test_the_secret_and_the_environment_give_the_user_password_and_url() -> None:
    state = SchemaRegistryState(url="http://10.99.0.1:4000/apis/ccompat/v7", password="pw-123")

    secret = schemaregistry.credentials_secret(password="pw-123", registry_url=state.url)

    assert secret["metadata"] == {"name": "rillet-schema-registry", "namespace": "default"}
    decoded = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert decoded == {"username": "rillet", "password": "pw-123", "url": state.url}
    assert state.environment() == {
        "RILLET_SCHEMA_REGISTRY_URL": state.url,
        "RILLET_SCHEMA_REGISTRY_USERNAME": "rillet",
        "RILLET_SCHEMA_REGISTRY_PASSWORD": "pw-123",
    }
    assert state.client_config()["basic.auth.user.info"] == "rillet:pw-123"
    assert "pw-123" not in repr(state)
