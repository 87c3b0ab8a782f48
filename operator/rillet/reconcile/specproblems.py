"""A spec the models refuse, said in one line a status condition and an Event can carry.

The apiserver's schema refuses most bad specs at apply, but an object stored before a rule was
added (CEL ratcheting keeps it) still reaches the operator: its reconcile reports the problem
instead of failing.
"""

from __future__ import annotations

import pydantic


def one_line(error: ValueError) -> str:
    """A builder's or the models' error in one line per problem, without pydantic's URLs."""
    if isinstance(error, pydantic.ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in error.errors(include_input=False, include_url=False)
        )
    return str(error)
