"""The limits on everything that comes from outside (docs/limits.md): families of bounds, each
overridden by `{PREFIX}_{FIELD}`. A family used under several prefixes (`NetLimits`: the BEIR
download, the HTTP search adapter, the LLM clients) takes its per-use defaults from here, so
docs/configuration.md shows the values in force."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from rageval_pipeline.core.settings.base import EnvGroup


class FileLimits(EnvGroup):
    """Bounds on a file a user writes and on quoting its values; `RAGEVAL_MAX_*`."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_MAX_")

    file_bytes: int = Field(64 << 20, ge=1, description="bytes in one file a user writes")
    depth: int = Field(64, ge=1, description="levels of nested objects and arrays")
    yaml_alias_nodes: int = Field(10_000, ge=1, description="nodes YAML aliases expand to")
    quote_chars: int = Field(200, ge=1, description="characters of a value quoted in an error")
    decompressed_bytes: int = Field(
        8 << 30, ge=1, description="bytes a gzipped data file (run, qrels) may decompress to"
    )


class ArchiveLimits(EnvGroup):
    """Bounds on what extracting one archive may create (zip bombs); `RAGEVAL_ARCHIVE_*`."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_ARCHIVE_")

    max_members: int = Field(10_000, ge=1, description="files and folders in the archive")
    max_total_bytes: int = Field(32 << 30, ge=1, description="all members, extracted")
    max_member_bytes: int = Field(16 << 30, ge=1, description="one member, extracted")
    max_ratio: float = Field(200.0, gt=1, description="extracted / compressed size of a member")
    ratio_min_bytes: int = Field(1 << 20, ge=0, description="members smaller skip the ratio")


class WarehouseLimits(EnvGroup):
    """How long a warehouse read or write waits for another process; `RAGEVAL_WAREHOUSE_*`."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_WAREHOUSE_")

    read_wait_s: float = Field(60.0, gt=0, description="a read waits this long for a writer")
    write_wait_s: float = Field(600.0, gt=0, description="a write waits this long for another")


class ObjectStoreLimits(EnvGroup):
    """How long an object-store call (`RAGEVAL_STORAGE=s3://...`) may take; `RAGEVAL_S3_*`.
    botocore retries the transient failures (connection refused or reset, timeouts, throttling
    such as SlowDown and 503) in its "standard" mode, and s3fs's own retry loop is turned off,
    so one call makes at most `attempts` tries: an unreachable endpoint fails within
    attempts x (connect_timeout_s + read_timeout_s) + ~7 s of backoff, not minutes."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_S3_")

    connect_timeout_s: float = Field(5.0, gt=0, description="TCP/TLS connect, per attempt")
    read_timeout_s: float = Field(30.0, gt=0, description="waiting for data, per attempt")
    attempts: int = Field(4, ge=1, description="tries of one call in all, the first included")

    def s3fs_options(self) -> dict:
        """The `s3fs.S3FileSystem` arguments for these bounds (its own retry loop, which has no
        argument, is turned off where the filesystem is made: `folders.storage_location`)."""
        return dict(
            config_kwargs=dict(
                connect_timeout=self.connect_timeout_s,
                read_timeout=self.read_timeout_s,
                retries=dict(total_max_attempts=self.attempts, mode="standard"),
            )
        )


class NetLimits(EnvGroup):
    """Bounds of one kind of network call; each field is overridden by `{prefix}_{FIELD}` for
    the prefix it is read with (below)."""

    deadline_s: float = Field(30.0, gt=0, description="total wall time of one attempt")
    connect_timeout_s: float = Field(10.0, gt=0, description="TCP/TLS connect, per attempt")
    max_response_bytes: int = Field(16 << 20, ge=1, description="decoded body size cap")
    max_redirects: int = Field(5, ge=0, description="redirects followed")
    attempts: int = Field(3, ge=1, description="attempts in all, the first included")
    backoff_s: float = Field(0.5, ge=0, description="first wait; doubles per retry")
    max_retry_after_s: float = Field(60.0, ge=0, description="longest Retry-After honoured")
    allow_cross_origin_redirects: bool = Field(
        False, description="follow a redirect to another origin that re-sends the request body"
    )

    renamed: ClassVar[Mapping[str, str]] = {"RAGEVAL_LLM_": "RAG_EVAL_"}  # the LLM clients' limits


# The prefixes `NetLimits` is read with, and each one's defaults.
BEIR_DOWNLOAD = "RAGEVAL_BEIR"
# The largest BEIR archives (msmarco, fever) are ~1.1 GB: an hour at 0.3 MB/s.
BEIR_DOWNLOAD_DEFAULTS = dict(
    deadline_s=3600.0, connect_timeout_s=30.0, max_response_bytes=4 << 30, attempts=4, backoff_s=1.0
)
HTTP_SEARCH = "RAGEVAL_HTTP"  # deadline, attempts and backoff default to the systems.yaml entry's
# 100 results with content and metadata fit many times over.
HTTP_SEARCH_DEFAULTS = dict(max_response_bytes=8 << 20)
LLM = "RAGEVAL_LLM"
# Generation is slow: a long answer from a local model on a CPU can take minutes.
LLM_DEFAULTS = dict(deadline_s=300.0, attempts=4, max_retry_after_s=120.0)
