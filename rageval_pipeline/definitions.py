"""The code location's definitions: everything under `rageval_pipeline/defs/`, loaded the way
`dg` loads a project (`[tool.dg.project]` in pyproject.toml)."""

import dagster as dg

import rageval_pipeline.defs

defs = dg.components.load_defs(rageval_pipeline.defs)
