"""Rillet API v1alpha1 (group rillet.io): the pydantic models of Topic, Table and App.

These models are the single source of truth of the API: the CRDs (crds/), their copies in the
Helm chart and docs/api.md are generated from them by `rillet.crdgen`. Import the modules, not
their names: `from rillet.api.v1alpha1 import topics` then `topics.Topic`. Any package may
import them; they import no I/O library and no other Rillet package.
"""
