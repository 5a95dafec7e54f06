"""gatecfg: declarative history gates for nightly ML training runs.

The names in `__all__` are the public Python API (docs/api.md); every submodule is private. They load on
first use, so `import gatecfg` (and `gatecfg lint`) stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0.dev0"

if TYPE_CHECKING:
    from gatecfg.api import evaluate, lint, load_gates
    from gatecfg.errors import (
        GatecfgError,
        GateFileError,
        InputError,
        Location,
        Problem,
        RecordError,
        StoreError,
    )
    from gatecfg.pytest_plugin import GateMetrics
    from gatecfg.report import RunReport
    from gatecfg.resolve import GateTree, ResolvedGate, ResolvedTest
    from gatecfg.verdicts import GateVerdicts, Verdict

# Public name -> the private module that defines it.
_EXPORTS = {
    "evaluate": "gatecfg.api",
    "lint": "gatecfg.api",
    "load_gates": "gatecfg.api",
    "RunReport": "gatecfg.report",
    "GateMetrics": "gatecfg.pytest_plugin",
    "GateVerdicts": "gatecfg.verdicts",
    "Verdict": "gatecfg.verdicts",
    "GateTree": "gatecfg.resolve",
    "ResolvedTest": "gatecfg.resolve",
    "ResolvedGate": "gatecfg.resolve",
    "Problem": "gatecfg.errors",
    "Location": "gatecfg.errors",
    "GatecfgError": "gatecfg.errors",
    "InputError": "gatecfg.errors",
    "GateFileError": "gatecfg.errors",
    "RecordError": "gatecfg.errors",
    "StoreError": "gatecfg.errors",
}

__all__ = [
    "GateFileError",
    "GateMetrics",
    "GateTree",
    "GateVerdicts",
    "GatecfgError",
    "InputError",
    "Location",
    "Problem",
    "RecordError",
    "ResolvedGate",
    "ResolvedTest",
    "RunReport",
    "StoreError",
    "Verdict",
    "__version__",
    "evaluate",
    "lint",
    "load_gates",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gatecfg' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
