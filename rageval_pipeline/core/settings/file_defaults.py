"""The defaults of the byte limits every data file read checks (`FileLimits` takes them from
here), in a module that imports no pydantic: reading a run file needs none, and `rageval eval`
imports it in another thread while the run is read (`core.io.bounds`)."""

from rageval_pipeline.core.settings.environ import any_named

FILE_BYTES = 64 << 20
# A run of 10,000 queries x 1,000 results at ~45 bytes a line is ~450 MB; reading one takes
# about 2.5 times its size in memory (docs/limits.md).
DATA_BYTES = 512 << 20
DECOMPRESSED_BYTES = 512 << 20
BYTE_DEFAULTS = {
    "file_bytes": FILE_BYTES,
    "data_bytes": DATA_BYTES,
    "decompressed_bytes": DECOMPRESSED_BYTES,
}
ENV_PREFIX = "RAGEVAL_MAX_"


def byte_limit_default(name: str) -> int | None:
    """The default of byte limit `name` while no `RAGEVAL_MAX_*` variable is set, else None
    (then the settings model reads and checks the environment); None for a limit kept only
    there."""
    if any_named(ENV_PREFIX):
        return None
    return BYTE_DEFAULTS.get(name)
