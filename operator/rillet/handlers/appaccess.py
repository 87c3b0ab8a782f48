"""Each App's own Kafka principal: provisioned before its driver starts, removed with the App.

On (the chart's `kafka.appPrincipals`), a reconcile first makes sure of the App's Secret
`<app>-kafka` (username, a password generated here once, the brokers' CA), of its SCRAM user
with that password, and of exactly the ACLs its spec needs (reconcile.kafkaaccess); only then
are the App's objects applied, so a changed spec never starts a driver before its ACLs. The
Secret is owned by the App; the user and its ACLs are removed by the App's delete handler,
which never holds the App for long: when Kafka stays unreachable, an Event names the user to
remove by hand and the App goes.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import kopf

from rillet.handlers import deleting
from rillet.k8s.applying import AppKube
from rillet.kafka.admin import KafkaUnavailableError
from rillet.kafka.principals import AccessError, PrincipalAdmin
from rillet.reconcile import appstatus, kafkaaccess
from rillet.reconcile.appobjects.credentials import KafkaAccess
from rillet.settings import AppSettings, KafkaSettings

PASSWORD_BYTES: Final = 32


def _encode(data: Mapping[str, str]) -> dict[str, str]:
    return {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}


def _password(secret: Mapping[str, Any] | None) -> str | None:
    encoded = ((secret or {}).get("data") or {}).get(kafkaaccess.PASSWORD_KEY)
    return base64.b64decode(encoded).decode() if encoded else None


@dataclass(frozen=True)
class Provisioned:
    """What provisioning did (for an Event), or why it could not (for the status)."""

    changes: tuple[str, ...] = ()
    problem: tuple[str, str] | None = None  # (reason, message)


@dataclass(frozen=True)
class AppAccess:
    """Provisions and removes App principals with the operator's admin rights."""

    admin: PrincipalAdmin
    ca_pem: str | None

    def _secret_data(self, user: str, password: str) -> dict[str, str]:
        data = {kafkaaccess.USERNAME_KEY: user, kafkaaccess.PASSWORD_KEY: password}
        if self.ca_pem is not None:
            data[kafkaaccess.CA_KEY] = self.ca_pem
        return data

    async def _password(self, access: KafkaAccess, kube: AppKube) -> tuple[str, bool]:
        """The App's password, and whether it was just made (its Secret created)."""
        existing = await kube.read_secret(access.namespace, access.secret_name)
        if existing is None:
            password = secrets.token_urlsafe(PASSWORD_BYTES)
            secret = {**access.secret, "data": _encode(self._secret_data(access.user, password))}
            if await kube.create(secret):
                return password, True
            # Another reconcile of this App created it a moment ago: use its password.
            existing = await kube.read_secret(access.namespace, access.secret_name)
        kept = _password(existing)
        if kept is None:
            raise AccessError(
                f"Secret {access.secret_name} has no {kafkaaccess.PASSWORD_KEY!r} key: delete it "
                "and the operator makes a new one"
            )
        return kept, False

    async def provision(self, access: KafkaAccess, kube: AppKube) -> Provisioned:
        """Secret, SCRAM user and ACLs of the App. Raises what the apiserver raises."""
        try:
            password, new = await self._password(access, kube)
            plan = await self.admin.ensure(access.user, password, access.grants, new_password=new)
        except KafkaUnavailableError as error:
            message = f"cannot set up the App's Kafka principal: Kafka is unreachable ({error})"
            return Provisioned(problem=(appstatus.KAFKA_UNAVAILABLE, message))
        except AccessError as error:
            message = f"cannot set up Kafka principal {kafkaaccess.principal(access.user)}: {error}"
            return Provisioned(problem=(appstatus.KAFKA_ACCESS_NOT_GRANTED, message))
        changes = [f"allowed {g.describe()}" for g in plan.create]
        changes += [f"revoked {g.describe()}" for g in plan.delete]
        if new:
            changes.insert(
                0, f"set the password of SCRAM user {access.user} (Secret {access.secret_name})"
            )
        return Provisioned(changes=tuple(changes))


def build(app_settings: AppSettings, kafka: KafkaSettings) -> AppAccess | None:
    """The provisioner of App principals, None when they are off (see
    appresolving.kafka_login for what they need)."""
    if not app_settings.kafka_principals:
        return None
    admin = PrincipalAdmin(
        kafka.client_config(),
        mechanism=kafka.sasl_mechanism or "",
        timeout=kafka.request_timeout_seconds,
    )
    ca = kafka.ssl_ca_location.read_text() if kafka.ssl_ca_location else None
    return AppAccess(admin=admin, ca_pem=ca)


async def remove(body: kopf.Body, access: AppAccess, *, retry: int) -> None:
    """Remove the deleted App's user and ACLs; never hold the App for long."""
    meta = body["metadata"]
    user = kafkaaccess.principal_name(namespace=str(meta["namespace"]), app=str(meta["name"]))
    try:
        await access.admin.remove(user)
    except KafkaUnavailableError as error:
        deleting.retry_while_unreachable(error, retry=retry)
        kopf.warn(
            body,
            reason="KafkaPrincipalKept",
            message=f"SCRAM user {user} and its ACLs were not removed: Kafka stayed unreachable "
            f"({error}). Remove them by hand.",
        )
    except AccessError as error:
        kopf.warn(
            body,
            reason="KafkaPrincipalKept",
            message=f"SCRAM user {user} and its ACLs were not removed: {error}",
        )
