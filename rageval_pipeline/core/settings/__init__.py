"""Configuration from the environment, in one place (docs/configuration.md).

- `base`: `EnvGroup`, the pydantic-settings base every group derives from.
- `limits`, `locations`, `providers`: the groups (limits on outside input, folders and the
  deployment, the LLM providers).
- `catalog`: every group with its prefix, and the generated docs/configuration.md.
- `environ`: the one module touching the process environment, for names a file gives and for
  variables set for libraries; it imports no pydantic, unlike the rest.
"""
