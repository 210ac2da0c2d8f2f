"""The code location's definitions: everything under `rageval_pipeline/defs/`, loaded the way
`dg` loads a project (`[tool.dg.project]` in pyproject.toml). Bad input met while loading is one
line (`defs/failures.py`), not the trace of Dagster's loader."""

import dagster as dg

import rageval_pipeline.defs
from rageval_pipeline.defs.failures import load_refusal

try:
    defs = dg.components.load_defs(rageval_pipeline.defs)
except Exception as exc:
    refused = load_refusal(exc)
    if refused is None:
        raise
    raise refused from None
