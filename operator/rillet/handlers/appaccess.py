"""Each App's own Kafka principal: provisioned before its driver starts, removed with the App.

On (the chart's `kafka.appPrincipals`), a reconcile first makes sure of the App's Secret
`<app>-kafka` (username, a password generated here once, the brokers' CA), of its SCRAM user
with that password, and of exactly the ACLs its spec needs (reconcile.kafkaaccess); only then
are the App's objects applied, so a changed spec never starts a driver before its ACLs. The
Secret is owned by the App; the user and its ACLs are removed by the App's delete handler,
which never holds the App for long: when Kafka stays unreachable, an Event names the user and
the App goes, and the operator's sweep (`principalsweeping`) removes the user later.

The Secret is made before the user, and only when no user of the name exists: a user without
the App's Secret is not Rillet's (PrincipalExists: left alone). A new token on the App's
annotation `rillet.io/rotate-credentials` sets a new password (Kafka first, then the Secret,
which records the token); the driver pod template carries the token, so the driver restarts.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import kopf

from rillet.handlers import deleting
from rillet.k8s.applying import AppKube, ForeignObjectError
from rillet.kafka.errors import KafkaUnavailableError
from rillet.kafka.principals import AccessError, PrincipalAdmin
from rillet.reconcile import appstatus, apptargets, kafkaaccess
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

    user: str = ""  # the App's SCRAM user: its Secret's, when that records one
    changes: tuple[str, ...] = ()
    rotated: bool = False  # a new password was set (rillet.io/rotate-credentials)
    problem: tuple[str, str] | None = None  # (reason, message)


@dataclass(frozen=True)
class _Credentials:
    """The App's login as its Secret holds it."""

    user: str
    password: str
    new: bool  # the Secret was just created (with this password)
    rotation: str | None  # the rotation token the password was made for


def _foreign_user(access: KafkaAccess) -> tuple[str, str]:
    message = (
        f"SCRAM user {access.user} exists in Kafka but no Secret {access.secret_name} records "
        "it, so Rillet did not make it (or lost its Secret): its password and ACLs are left "
        "alone and no driver starts. If it is a leftover of an earlier App of this name, "
        "delete that user in Kafka (every SCRAM mechanism, and its ACLs); if it belongs to "
        "someone else, give the App another name or namespace"
    )
    return (appstatus.PRINCIPAL_EXISTS, message)


@dataclass(frozen=True)
class AppAccess:
    """Provisions and removes App principals with the operator's admin rights."""

    admin: PrincipalAdmin
    ca_pem: str | None
    cluster: str  # this Kubernetes cluster's id in user names (kafkaaccess.cluster_id)

    def _secret_data(self, user: str, password: str) -> dict[str, str]:
        data = {kafkaaccess.USERNAME_KEY: user, kafkaaccess.PASSWORD_KEY: password}
        if self.ca_pem is not None:
            data[kafkaaccess.CA_KEY] = self.ca_pem
        return data

    async def _create_secret(self, access: KafkaAccess, kube: AppKube) -> _Credentials | None:
        """A new Secret for a new user; None if one appeared meanwhile (the caller reads it)."""
        password = secrets.token_urlsafe(PASSWORD_BYTES)
        meta = dict(access.secret["metadata"])
        if access.rotation:  # the token the App has now is this password's
            meta["annotations"] = {**(meta.get("annotations") or {}), **_rotated(access)}
        data = _encode(self._secret_data(access.user, password))
        if not await kube.create({**access.secret, "metadata": meta, "data": data}):
            return None
        return _Credentials(access.user, password, new=True, rotation=access.rotation)

    async def _credentials(self, access: KafkaAccess, kube: AppKube) -> _Credentials | None:
        """The App's user and password; None when a SCRAM user of its name exists that Rillet
        did not make. The Secret is always created before the user: a Secret means the user
        is the App's (a crash between the two included), no Secret that it is not."""
        existing = await kube.read_own_secret(access.namespace, access.secret_name)
        if existing is None:
            if await self.admin.exists(access.user):
                # Another reconcile of this App may have made both a moment ago.
                existing = await kube.read_own_secret(access.namespace, access.secret_name)
                if existing is None:
                    return None
            else:
                made = await self._create_secret(access, kube)
                if made is not None:
                    return made
                existing = await kube.read_own_secret(access.namespace, access.secret_name)
        return _kept(access, existing, self.cluster)

    async def _rotate(self, access: KafkaAccess, kube: AppKube, kept: _Credentials) -> _Credentials:
        """A new password: set in Kafka first, then in the Secret with the token. A crash
        between the two leaves the token unrecorded, so the next reconcile rotates again."""
        password = secrets.token_urlsafe(PASSWORD_BYTES)
        await self.admin.set_password(kept.user, password)
        patch = {
            "metadata": {"annotations": _rotated(access)},
            "data": _encode({kafkaaccess.PASSWORD_KEY: password}),
        }
        await kube.patch_secret(access.namespace, access.secret_name, patch)
        return _Credentials(kept.user, password, new=False, rotation=access.rotation)

    async def provision(self, access: KafkaAccess, kube: AppKube) -> Provisioned:
        """Secret, SCRAM user and ACLs of the App. Raises what the apiserver raises."""
        try:
            login = await self._credentials(access, kube)
            if login is None:
                return Provisioned(user=access.user, problem=_foreign_user(access))
            rotated = not login.new and kafkaaccess.rotation_due(
                requested=access.rotation, recorded=login.rotation
            )
            if rotated:
                login = await self._rotate(access, kube, login)
            plan = await self.admin.ensure(
                login.user, login.password, access.grants, new_password=login.new
            )
        except KafkaUnavailableError as error:
            message = f"cannot set up the App's Kafka principal: Kafka is unreachable ({error})"
            return Provisioned(problem=(appstatus.KAFKA_UNAVAILABLE, message))
        except (ForeignSecretError, ForeignObjectError) as error:
            return Provisioned(problem=(appstatus.OBJECT_NOT_OWNED, str(error)))
        except AccessError as error:
            message = f"cannot set up Kafka principal {kafkaaccess.principal(access.user)}: {error}"
            return Provisioned(problem=(appstatus.KAFKA_ACCESS_NOT_GRANTED, message))
        changes = [f"allowed {g.describe()}" for g in plan.create]
        changes += [f"revoked {g.describe()}" for g in plan.delete]
        if login.new:
            changes.insert(
                0, f"set the password of SCRAM user {login.user} (Secret {access.secret_name})"
            )
        return Provisioned(user=login.user, changes=tuple(changes), rotated=rotated)


def _rotated(access: KafkaAccess) -> dict[str, str | None]:
    return {kafkaaccess.ROTATED_ANNOTATION: access.rotation}


def _username(secret: Mapping[str, Any] | None) -> str | None:
    encoded = ((secret or {}).get("data") or {}).get(kafkaaccess.USERNAME_KEY)
    return base64.b64decode(encoded).decode() if encoded else None


class ForeignSecretError(AccessError):
    """The App's Secret records a username Rillet never gives this App."""


def _recorded_user(
    secret: Mapping[str, Any] | None, *, cluster: str, namespace: str, app: str
) -> str:
    """The App's user as its Secret records it (kafkaaccess.username_of); raises
    ForeignSecretError for a username Rillet never gives this App."""
    recorded = _username(secret)
    user = kafkaaccess.username_of(recorded, cluster=cluster, namespace=namespace, app=app)
    if user is None:
        names = kafkaaccess.app_usernames(cluster=cluster, namespace=namespace, app=app)
        raise ForeignSecretError(
            f"Secret {kafkaaccess.secret_name(app)} records username {recorded!r}, which Rillet "
            f"never gives this App ({' or '.join(names)}): Rillet did not write it. Delete the "
            "Secret (and the App's SCRAM user, if any) and the operator makes both anew"
        )
    return user


def _kept(access: KafkaAccess, secret: Mapping[str, Any] | None, cluster: str) -> _Credentials:
    """The login an existing Secret records (its username, if Rillet's, wins over the one a
    new App gets)."""
    password = _password(secret)
    if secret is None or password is None:
        raise AccessError(
            f"Secret {access.secret_name} has no {kafkaaccess.PASSWORD_KEY!r} key: delete it "
            f"and SCRAM user {access.user} in Kafka, and the operator makes both anew"
        )
    user = _recorded_user(secret, cluster=cluster, namespace=access.namespace, app=access.app)
    annotations = secret.get("metadata", {}).get("annotations") or {}
    return _Credentials(
        user, password, new=False, rotation=annotations.get(kafkaaccess.ROTATED_ANNOTATION)
    )


def build(app_settings: AppSettings, kafka: KafkaSettings, *, cluster: str) -> AppAccess | None:
    """The provisioner of App principals, None when they are off (see
    appresolving.kafka_login for what they need); `cluster`: kafkaaccess.cluster_id."""
    if not app_settings.kafka_principals:
        return None
    admin = PrincipalAdmin(
        kafka.client_config(),
        mechanism=kafka.sasl_mechanism or "",
        timeout=kafka.request_timeout_seconds,
    )
    ca = kafka.ssl_ca_location.read_text() if kafka.ssl_ca_location else None
    return AppAccess(admin=admin, ca_pem=ca, cluster=cluster)


async def remove(body: kopf.Body, access: AppAccess, kube: AppKube, *, retry: int) -> None:
    """Remove the deleted App's user and ACLs; never hold the App for long."""
    meta = body["metadata"]
    namespace, name = str(meta["namespace"]), str(meta["name"])
    if apptargets.standing_reason(body) == appstatus.PRINCIPAL_EXISTS:
        return  # the user of its name is not the App's: never removed with it
    try:
        secret = await kube.read_own_secret(namespace, kafkaaccess.secret_name(name))
        user = _recorded_user(secret, cluster=access.cluster, namespace=namespace, app=name)
    except (ForeignSecretError, ForeignObjectError) as error:
        kopf.warn(body, reason="KafkaPrincipalKept", message=f"no SCRAM user removed: {error}")
        return
    try:
        await access.admin.remove(user)
    except KafkaUnavailableError as error:
        deleting.retry_while_unreachable(error, retry=retry)
        kopf.warn(
            body,
            reason="KafkaPrincipalKept",
            message=f"SCRAM user {user} and its ACLs were not removed: Kafka stayed unreachable "
            f"({error}). The operator's sweep removes them once Kafka answers (a user of this "
            "cluster's id; remove by hand one of an older release, without it).",
        )
    except AccessError as error:
        kopf.warn(
            body,
            reason="KafkaPrincipalKept",
            message=f"SCRAM user {user} and its ACLs were not removed: {error}",
        )
