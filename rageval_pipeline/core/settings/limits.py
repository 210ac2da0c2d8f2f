"""The limits on everything that comes from outside (docs/limits.md): families of bounds, each
overridden by `{PREFIX}_{FIELD}`. A family used under several prefixes (`NetLimits`: the BEIR
download, the HTTP search adapter, the LLM clients) takes its per-use defaults from here, so
docs/configuration.md shows the values in force."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from rageval_pipeline.core.settings import file_defaults
from rageval_pipeline.core.settings.base import EnvGroup

# Upper bounds, so that no value overflows where it is used (a backoff doubled per attempt, a
# wait given to `time.sleep`, a size allocated): one hour, one day, a tebibyte, a count.
HOUR_S = 3600.0
DAY_S = 86400.0
TIB = 1 << 40
COUNT = 100_000_000
ATTEMPTS = 100  # a backoff doubled 100 times from an hour is still a finite float


class FileLimits(EnvGroup):
    """Bounds on a file a user writes and on quoting its values; `RAGEVAL_MAX_*`."""

    model_config = SettingsConfigDict(env_prefix=file_defaults.ENV_PREFIX)

    file_bytes: int = Field(
        file_defaults.FILE_BYTES, ge=1, le=TIB, description="bytes in one file a user writes"
    )
    depth: int = Field(64, ge=1, le=10_000, description="levels of nested objects and arrays")
    yaml_alias_nodes: int = Field(
        10_000, ge=1, le=COUNT, description="nodes YAML aliases expand to"
    )
    quote_chars: int = Field(
        200, ge=1, le=COUNT, description="characters of a value quoted in an error"
    )
    data_bytes: int = Field(
        file_defaults.DATA_BYTES,
        ge=1,
        le=TIB,
        description="bytes of a data file (run, qrels) on disk",
    )
    decompressed_bytes: int = Field(
        file_defaults.DECOMPRESSED_BYTES,
        ge=1,
        le=TIB,
        description="bytes a gzipped data file (run, qrels) may decompress to",
    )
    # BEIR's largest corpus (MS MARCO, 8.8 M passages) is 3.0 GB of JSON Lines.
    corpus_bytes: int = Field(
        8 << 30, ge=1, le=TIB, description="bytes of a BEIR corpus.jsonl (gzipped: inflated)"
    )
    folder_files: int = Field(
        10_000, ge=1, le=COUNT, description="files `suite init` reads from one folder"
    )
    # Converting, chunking and validating a suite holds ~6 bytes a byte of text (64 MiB of
    # Markdown: 19 s, 405 MB), so a folder is held to what a large documentation site is.
    folder_bytes: int = Field(
        128 << 20, ge=1, le=TIB, description="bytes `suite init` reads from one folder in all"
    )
    # Beautiful Soup holds ~130 bytes per byte of markup and parses ~0.5-1 MB/s (4 MiB of
    # paragraphs: 9-20 s, 530 MB), so a page is held to what a documentation page plausibly is.
    html_bytes: int = Field(4 << 20, ge=1, le=TIB, description="bytes of one HTML document")
    read_s: float = Field(
        1800.0, gt=0, le=DAY_S, description="seconds `suite init` may spend reading documents"
    )
    pdf_pages: int = Field(2_000, ge=1, le=COUNT, description="pages of one PDF document")


class ArchiveLimits(EnvGroup):
    """Bounds on what extracting one archive may create (zip bombs); `RAGEVAL_ARCHIVE_*`."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_ARCHIVE_")

    max_members: int = Field(10_000, ge=1, le=COUNT, description="files and folders in the archive")
    max_total_bytes: int = Field(32 << 30, ge=1, le=TIB, description="all members, extracted")
    max_member_bytes: int = Field(16 << 30, ge=1, le=TIB, description="one member, extracted")
    max_ratio: float = Field(
        200.0, gt=1, le=COUNT, description="extracted / compressed size of a member"
    )
    ratio_min_bytes: int = Field(
        1 << 20, ge=0, le=TIB, description="members smaller skip the ratio"
    )


class WarehouseLimits(EnvGroup):
    """How long a warehouse read or write waits for another process; `RAGEVAL_WAREHOUSE_*`."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_WAREHOUSE_")

    read_wait_s: float = Field(
        60.0, gt=0, le=DAY_S, description="a read waits this long for a writer"
    )
    write_wait_s: float = Field(
        600.0, gt=0, le=DAY_S, description="a write waits this long for another"
    )


class ObjectStoreLimits(EnvGroup):
    """How long an object-store call (`RAGEVAL_STORAGE=s3://...`) may take; `RAGEVAL_S3_*`.
    botocore retries the transient failures (connection refused or reset, timeouts, throttling
    such as SlowDown and 503) in its "standard" mode, and s3fs's own retry loop is turned off,
    so one call makes at most `attempts` tries: an unreachable endpoint fails within
    attempts x (connect_timeout_s + read_timeout_s) + ~7 s of backoff, not minutes."""

    model_config = SettingsConfigDict(env_prefix="RAGEVAL_S3_")

    connect_timeout_s: float = Field(
        5.0, gt=0, le=DAY_S, description="TCP/TLS connect, per attempt"
    )
    read_timeout_s: float = Field(30.0, gt=0, le=DAY_S, description="waiting for data, per attempt")
    attempts: int = Field(
        4, ge=1, le=ATTEMPTS, description="tries of one call in all, the first included"
    )

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

    deadline_s: float = Field(30.0, gt=0, le=DAY_S, description="total wall time of one attempt")
    connect_timeout_s: float = Field(
        10.0, gt=0, le=DAY_S, description="TCP/TLS connect, per attempt"
    )
    max_response_bytes: int = Field(16 << 20, ge=1, le=TIB, description="decoded body size cap")
    max_redirects: int = Field(5, ge=0, le=ATTEMPTS, description="redirects followed")
    attempts: int = Field(3, ge=1, le=ATTEMPTS, description="attempts in all, the first included")
    backoff_s: float = Field(0.5, ge=0, le=HOUR_S, description="first wait; doubles per retry")
    max_retry_after_s: float = Field(
        60.0, ge=0, le=DAY_S, description="longest Retry-After honoured"
    )
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
