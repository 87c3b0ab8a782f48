"""Table data: invalid Rillet objects, and what the apiserver says when it refuses them.

Each case is a manifest the apiserver must reject, with a substring of its error message that
names the field; the manifest is sent both with `kubectl create` (what a first `kubectl apply`
does) and with `kubectl apply --server-side`. A case with `before` is an update: `before` is
applied first (it is valid) and `manifest` is then applied over it with server-side apply; these
exercise the transition rules (oldSelf).

The same table drives two tests: tests/integration/test_crds.py sends every case to the real
apiserver; tests/unit/test_api_validation.py checks that the pydantic models refuse every create
case too, and accept both sides of every update case (only the change is invalid).

This module joins the tables of each kind (invalid_topics.py, invalid_tables.py,
invalid_apps.py, invalid_app_inputs.py, invalid_app_outputs.py, and the sparkConf rows of
invalid_spark_confs.py); what they are made of (`Case`, and the valid objects they spoil) is in
invalid_cases.py.
"""

from __future__ import annotations

from tests.integration import (
    invalid_app_inputs,
    invalid_app_outputs,
    invalid_apps,
    invalid_spark_confs,
    invalid_tables,
    invalid_topics,
)
from tests.integration.invalid_cases import Case, app

CASES: tuple[Case, ...] = (
    *invalid_topics.CASES,
    *invalid_tables.CASES,
    *invalid_apps.CASES,
    *invalid_app_inputs.CASES,
    *invalid_app_outputs.CASES,
    # The sparkConf of an App reaching past the App (issue 39): one row per group of keys.
    *(
        Case(id_, app({"sparkConf": conf}), expect)
        for id_, conf, expect in invalid_spark_confs.refused()
    ),
)
