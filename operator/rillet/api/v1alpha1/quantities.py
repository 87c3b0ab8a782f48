"""Kubernetes memory quantities as numbers, and the least memory a Spark JVM starts with.

The least memory of a driver or executor pod follows from Spark and from how Rillet splits a
pod's memory (reconcile.appobjects.sparkconfs): Spark refuses to start a JVM whose heap, as the
JVM reports it (Runtime.maxMemory), is under 450 MiB ("System memory ... must be at least
471859200": 1.5 times its 300 MiB reserve), and the default collector (ParallelGC, set by
reconcile.sparkdefaults) reports about 89% of -Xmx: a heap of 505 MiB at least. An executor's
heap is 75% of its pod and a driver's 50%, so below the minimums here the pod crash-loops; the
apiserver refuses them at apply instead.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Final

from rillet.api.v1alpha1 import rules

_QUANTITY: Final = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)([A-Za-z]*)")
_MEMORY_UNITS: Final = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}

# Heaps of 525 and 512 MiB: 468 and 455 MiB as ParallelGC reports them (module docstring).
MIN_EXECUTOR_MEMORY: Final = "700Mi"
MIN_DRIVER_MEMORY: Final = "1Gi"


def memory_bytes(quantity: int | str) -> int:
    """A Kubernetes memory quantity ("2Gi", "1.5G", 1073741824) in bytes, rounded down."""
    match = _QUANTITY.fullmatch(str(quantity))
    if match is None or match[2] not in _MEMORY_UNITS:
        raise ValueError(f"not a memory quantity: {quantity!r}")
    return int(Decimal(match[1]) * _MEMORY_UNITS[match[2]])


def memory_mib(quantity: int | str) -> int:
    """A Kubernetes memory quantity in whole MiB, rounded down."""
    return memory_bytes(quantity) // 2**20


def at_least(minimum: str, *, message: str) -> rules.Rule:
    """A rule on a memory quantity field (an integer of bytes, or a quantity string): at least
    `minimum`. A string the field's pattern refuses passes here: its pattern's error is enough."""
    floor = memory_bytes(minimum)

    def check(value: int | str) -> bool:
        return memory_bytes(value) >= floor

    return rules.Rule(
        rule=f"type(self) == int ? self >= {floor} : "
        f"(!isQuantity(self) || !quantity(self).isLessThan(quantity('{minimum}')))",
        message=message,
        check=check,
    )
