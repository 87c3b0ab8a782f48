"""A pipeline module that raises as it is imported, as a user's may (a setting read at import
time that the image lacks): test_runtime_python_errors names it in an App's entrypoint."""

from __future__ import annotations

raise RuntimeError("SECTIONS_URL is not set: the pipeline cannot load its section map")
