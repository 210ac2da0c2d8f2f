"""The gate policy as one resource: `data/gate.yaml`, read once by each step process that needs
it, so a step never reads the file twice and every step of a run sees the file the run opened."""

from pathlib import Path

import dagster as dg
from pydantic import PrivateAttr

from rageval_pipeline.core.gate.policy import GatePolicy, policy_or_defaults
from rageval_pipeline.defs.resources import Settings

POLICY_FILE = "gate.yaml"


class GatePolicyResource(dg.ConfigurableResource):
    """The gate policy of the data folder (`<data>/gate.yaml`, or `path` in run config); a
    missing file is the defaults of docs/gate.md, as for `rageval gate`. A bad file is one
    InputError naming file, line and field, raised by the step that needs the policy."""

    settings: dg.ResourceDependency[Settings]
    path: str | None = None

    _policy: GatePolicy | None = PrivateAttr(default=None)

    @property
    def file(self) -> Path:
        return Path(self.path) if self.path else self.settings.data / POLICY_FILE

    @property
    def policy(self) -> GatePolicy:
        """The policy, read on first use and kept for the life of this resource."""
        if self._policy is None:
            self._policy = policy_or_defaults(self.file)
        return self._policy
