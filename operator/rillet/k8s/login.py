"""Credentials for the official client: the in-cluster ServiceAccount, else the kubeconfig,
exactly as kopf's own login finds them."""

from __future__ import annotations

from kubernetes import config


def load_config() -> None:
    """Point the official client at the cluster this process runs in (or the kubeconfig's)."""
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
