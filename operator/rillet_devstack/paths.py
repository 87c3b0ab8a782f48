"""Where the local stack keeps its built artefacts (cache) and its running state.

Both live outside the repository: the cache is keyed by component version and survives
`rillet dev down`; the state directory holds data, logs, certificates and the kubeconfig of the
stack that runs now.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Root of built and downloaded artefacts (`RILLET_CACHE_DIR`, else XDG cache)."""
    explicit = os.environ.get("RILLET_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "rillet"


def state_dir() -> Path:
    """Root of the running stack's data, logs and credentials (`RILLET_STATE_DIR`, else XDG)."""
    explicit = os.environ.get("RILLET_STATE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "rillet" / "devstack"
