"""The schema registry's credentials in the namespace of each App with Avro or Protobuf, from
the operator's own.

Pods mount only Secrets of their own namespace, so an App that reads or writes Avro or Protobuf
gets the Secret `<app>-schema-registry` (built without data:
reconcile.appobjects.registrycredentials), holding the username and password the operator was
given (RILLET_SCHEMA_REGISTRY_*, from the chart's `schemaRegistry.existingSecret`). Each
reconcile applies it, with its data, before the App's other objects, so its data follows the
operator's credentials: a rotation reaches every App when the operator restarts with the new
ones (it resumes each App). A Secret of that name that the operator did not make is never
written, nor taken over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from rillet.k8s.applying import AppKube, ForeignObjectError
from rillet.reconcile.appobjects import registrycredentials
from rillet.settings import SchemaRegistrySettings


@dataclass(frozen=True)
class RegistryCredentials:
    """The operator's credentials for the registry (the password shown nowhere, repr included)."""

    username: str
    password: SecretStr

    async def write(self, secret: Mapping[str, Any], kube: AppKube, **ownership: Any) -> str | None:
        """Apply the App's (or a Table server's) Secret with the credentials; the problem (for
        InvalidSpec) when a Secret of its name is someone else's (`ownership`: how to tell,
        registrycredentials.foreign_secret_problem). Raises applying.ApplyRefusedError when
        the apiserver refuses it, and what the apiserver raises."""
        meta = secret["metadata"]
        try:
            observed = await kube.read_own_secret(str(meta["namespace"]), str(meta["name"]))
        except ForeignObjectError as error:
            return str(error)
        problem = registrycredentials.foreign_secret_problem(observed, secret, **ownership)
        if problem is not None:
            return problem
        data = registrycredentials.secret_data(
            username=self.username, password=self.password.get_secret_value()
        )
        # The password joins the Secret here, in the request's body only: k8s.applying logs no
        # body, and a refusal's message is the apiserver's, which names a Secret's fields, not
        # their values.
        await kube.apply_all([{**secret, "data": data}])
        return None


def build(settings: SchemaRegistrySettings) -> RegistryCredentials | None:
    """The credentials Avro Apps' drivers get, None when the operator has none."""
    if not settings.url or not settings.username or settings.password is None:
        return None
    return RegistryCredentials(username=settings.username, password=settings.password)
