"""The only code that manages Kafka principals: an App's SCRAM user and its ACLs.

Every call is idempotent and reads Kafka before it writes: a reconcile cut off at any point is
finished by the next one. A failure raises `AccessError` with Kafka's reason, or
`KafkaUnavailableError` when no broker answered (the refused login of the operator included).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
from collections.abc import Iterable, Mapping
from typing import Any, Final, cast

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from rillet.kafka.errors import KafkaUnavailableError, error_code, is_unreachable
from rillet.kafka.topicrequests import failure_of
from rillet.reconcile import kafkaaccess
from rillet.reconcile.kafkaaccess import Grant, GrantPlan

# Kafka's default and minimum for SCRAM-SHA-512 is 4096; 8192 as Strimzi's User Operator uses.
SCRAM_ITERATIONS: Final = 8192
_MECHANISMS: Final = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}
_NOT_FOUND: Final = {KafkaError.RESOURCE_NOT_FOUND}


class AccessError(RuntimeError):
    """Kafka refused to manage a principal (the operator's own rights, most often)."""


def _raise(error: BaseException, doing: str) -> None:
    """Turn a failed call into KafkaUnavailableError or AccessError naming what was done."""
    failure = failure_of(error)
    if is_unreachable(error):
        raise KafkaUnavailableError(failure.message) from None
    hint = ""
    if failure.code in {"CLUSTER_AUTHORIZATION_FAILED", "SECURITY_DISABLED"}:
        hint = (
            ": the operator's principal needs ALTER on the CLUSTER resource (a super user), and "
            "the brokers an authorizer and SCRAM, for per-App principals"
        )
    raise AccessError(f"Kafka refused to {doing} ({failure.code}: {failure.message}){hint}")


def _wait(future: concurrent.futures.Future[Any], timeout: float, doing: str) -> Any:
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise KafkaUnavailableError(f"no answer within {timeout:g}s to {doing}") from None
    except KafkaException as error:
        _raise(error, doing)


def _binding(user: str, grant: Grant, kind: type[AclBinding] = AclBinding) -> AclBinding:
    """The ACL of a grant; as an AclBindingFilter (a subclass), the filter matching it alone."""
    return kind(
        ResourceType[grant.resource_type],
        grant.name,
        ResourcePatternType[grant.pattern],
        kafkaaccess.principal(user),
        "*",
        AclOperation[grant.operation],
        AclPermissionType.ALLOW,
    )


def _grant(binding: AclBinding) -> Grant | None:
    """A binding as a Grant; None for one Rillet never makes (a DENY, a host, ...)."""
    if binding.permission_type != AclPermissionType.ALLOW or binding.host != "*":
        return None
    kinds = {"TOPIC", "GROUP", "TRANSACTIONAL_ID"}
    patterns = {"LITERAL", "PREFIXED"}
    operations = {"READ", "WRITE", "DESCRIBE_CONFIGS"}
    kind, pattern = _enum_name(binding.restype), _enum_name(binding.resource_pattern_type)
    operation = _enum_name(binding.operation)
    if kind not in kinds or pattern not in patterns or operation not in operations:
        return None
    return Grant(kind, binding.name, pattern, operation)  # type: ignore[arg-type]


def _enum_name(value: enum.Enum | str | int) -> str:
    return value.name if isinstance(value, enum.Enum) else str(value)


def _all_of(user: str) -> AclBindingFilter:
    # None matches any resource name and any host.
    return AclBindingFilter(
        ResourceType.ANY,
        None,  # type: ignore[arg-type]
        ResourcePatternType.ANY,
        kafkaaccess.principal(user),
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


class PrincipalAdmin:
    """SCRAM users and their ACLs, through one AdminClient (blocking calls run in a thread)."""

    def __init__(
        self, client_config: Mapping[str, Any], *, mechanism: str, timeout: float = 15.0
    ) -> None:
        if mechanism not in _MECHANISMS:
            raise ValueError(
                f"per-App principals are SCRAM users: the operator's SASL mechanism is "
                f"{mechanism!r}, not one of {', '.join(_MECHANISMS)}"
            )
        self._client = AdminClient({**client_config, "log_level": 3})
        self._mechanism = _MECHANISMS[mechanism]
        self._timeout = timeout

    def _mechanisms(self, user: str) -> list[ScramMechanism]:
        """The SCRAM mechanisms `user` has a credential of; [] when there is no such user."""
        futures = cast(
            dict[str, concurrent.futures.Future[Any]],
            self._client.describe_user_scram_credentials([user]),
        )
        try:
            description = futures[user].result(timeout=self._timeout)
        except KafkaException as error:
            if error_code(error) in _NOT_FOUND:
                return []
            _raise(error, f"describe SCRAM user {user}")
        except concurrent.futures.TimeoutError:
            raise KafkaUnavailableError(f"no answer within {self._timeout:g}s") from None
        return [info.mechanism for info in description.scram_credential_infos]

    def _has_user(self, user: str) -> bool:
        return bool(self._mechanisms(user))

    def _set_password(self, user: str, password: str) -> None:
        upsert = UserScramCredentialUpsertion(
            user, ScramCredentialInfo(self._mechanism, SCRAM_ITERATIONS), password.encode()
        )
        futures = self._client.alter_user_scram_credentials([upsert])
        _wait(futures[user], self._timeout, f"set the password of SCRAM user {user}")

    def _current_grants(self, user: str) -> set[Grant]:
        doing = f"list the ACLs of {kafkaaccess.principal(user)}"
        bindings = _wait(self._client.describe_acls(_all_of(user)), self._timeout, doing)
        return {grant for grant in map(_grant, bindings) if grant is not None}

    def _apply_plan(self, user: str, plan: GrantPlan) -> None:
        if plan.create:
            created = self._client.create_acls([_binding(user, g) for g in plan.create])
            for grant, future in zip(plan.create, created.values(), strict=True):
                _wait(future, self._timeout, f"allow {grant.describe()}")
        if plan.delete:
            filters = [_binding(user, g, AclBindingFilter) for g in plan.delete]
            deleted = self._client.delete_acls(cast(list[AclBindingFilter], filters))
            for grant, future in zip(plan.delete, deleted.values(), strict=True):
                _wait(future, self._timeout, f"revoke {grant.describe()}")

    def _ensure(
        self, user: str, password: str, grants: Iterable[Grant], *, new_password: bool
    ) -> GrantPlan:
        # A new password (a new Secret) is always set: the user may exist with an older one.
        if new_password or not self._has_user(user):
            self._set_password(user, password)
        plan = kafkaaccess.plan_grants(self._current_grants(user), grants)
        self._apply_plan(user, plan)
        return plan

    async def exists(self, user: str) -> bool:
        """Whether Kafka holds a SCRAM credential of `user` (of any mechanism)."""
        return await asyncio.to_thread(self._has_user, user)

    async def set_password(self, user: str, password: str) -> None:
        """Give `user` (created if need be) the password `password`, of the operator's mechanism."""
        await asyncio.to_thread(self._set_password, user, password)

    def _users(self) -> list[str]:
        future = cast(
            concurrent.futures.Future[Any], self._client.describe_user_scram_credentials()
        )
        described = _wait(future, self._timeout, "list the SCRAM users")
        return sorted(described or {})

    async def users(self) -> list[str]:
        """Every SCRAM user Kafka holds."""
        return await asyncio.to_thread(self._users)

    async def ensure(
        self, user: str, password: str, grants: Iterable[Grant], *, new_password: bool = False
    ) -> GrantPlan:
        """Make `user` a SCRAM user with `password` and exactly `grants`; returns the changes."""
        return await asyncio.to_thread(
            self._ensure, user, password, frozenset(grants), new_password=new_password
        )

    def _remove(self, user: str) -> None:
        doing = f"revoke the ACLs of {kafkaaccess.principal(user)}"
        deleted = self._client.delete_acls([_all_of(user)])
        for future in deleted.values():
            _wait(future, self._timeout, doing)
        # Every mechanism: a credential of another one (set by hand, or by an operator of
        # another SASL mechanism) would otherwise still log in as the App.
        # One request per mechanism: Kafka refuses a request that alters one user twice.
        for mechanism in self._mechanisms(user):
            removal: list[UserScramCredentialAlteration] = [
                UserScramCredentialDeletion(user, mechanism)
            ]
            futures = self._client.alter_user_scram_credentials(removal)
            _wait(futures[user], self._timeout, f"delete SCRAM user {user}")

    async def remove(self, user: str) -> None:
        """Revoke every ACL of `user` and delete its SCRAM credentials, of every mechanism
        (all: if there)."""
        await asyncio.to_thread(self._remove, user)
