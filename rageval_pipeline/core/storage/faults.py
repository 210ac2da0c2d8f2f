"""Object-storage failures as one line each (`object_store_error`), for the entry points: the
`rageval` CLI and every Dagster step (defs/failures.py) turn what s3fs and botocore raise,
anywhere below them (the lake, the IO manager, an index upload), into a StorageError naming
the bucket or endpoint, the variable to change and what to do, never their 60-150-line trace.

s3fs turns a refused request into a Python error (`PermissionError`, `FileNotFoundError`,
`OSError`) chained to botocore's `ClientError`, whose code says what happened; network
failures arrive as botocore's own exceptions. The transient ones (connection refused or
reset, timeouts, throttling) were already retried by then, within the bounds of
`core.settings.limits.ObjectStoreLimits` (docs/limits.md), so each is final here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from rageval_pipeline.core.settings.limits import ObjectStoreLimits
from rageval_pipeline.core.storage.location import NO_BUCKET, StorageError, is_remote

if TYPE_CHECKING:
    from pathlib import Path

    from upath import UPath

CREDENTIALS = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"}
DENIED = {"AccessDenied", "AllAccessDisabled", "AccountProblem", "403"}
THROTTLED = {
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "ServiceUnavailable",
    "503",
}
UNREACHABLE = ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError")
UNREACHABLE += ("ConnectionClosedError", "ProxyConnectionError")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def _code(exc: BaseException) -> str | None:
    """The S3 error code of a botocore ClientError, None for anything else."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error") or {}
        code = error.get("Code") or response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return None if code is None else str(code)
    return None


def bucket_of(storage: UPath) -> str:
    """`s3://bucket` of a storage URL."""
    return f"{storage.protocol}://{storage.path.split('/')[0]}"


def object_store_error(exc: BaseException, storage: Path | UPath | None) -> StorageError | None:
    """The one line for an object-store failure anywhere in `exc`'s chain, with `storage` (the
    storage folder) named; None when `exc` is not one, or the storage is a local folder."""
    if storage is None or not is_remote(storage):
        return None
    bucket = bucket_of(storage)
    attempts = ObjectStoreLimits.from_env().attempts
    tries = "1 try" if attempts == 1 else f"{attempts} tries"
    for seen in _chain(exc):
        name = type(seen).__name__
        code = _code(seen)
        if name in ("NoCredentialsError", "PartialCredentialsError"):
            return StorageError(
                bucket,
                "no credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
                "AWS_PROFILE, or give the machine a role)",
            )
        if code in CREDENTIALS:
            return StorageError(
                bucket,
                f"the object store refused the credentials ({code}): check AWS_ACCESS_KEY_ID "
                f"and AWS_SECRET_ACCESS_KEY",
            )
        if code in DENIED:
            return StorageError(
                bucket,
                f"permission denied ({code}): let these credentials list, read and write the "
                f"bucket, or point RAGEVAL_STORAGE at one they may use",
            )
        if code == "NoSuchBucket":
            return StorageError(bucket, NO_BUCKET)
        if code in THROTTLED:
            return StorageError(
                bucket,
                f"the object store kept asking to slow down ({code}) through {tries}: "
                f"run fewer steps at once or retry later (RAGEVAL_S3_ATTEMPTS)",
            )
        if name in UNREACHABLE:
            url = urlsplit(str(getattr(seen, "kwargs", {}).get("endpoint_url", "")))
            where = f"{url.scheme}://{url.netloc}" if url.netloc else bucket
            return StorageError(
                where,
                f"no answer from the object store ({name}) in {tries}: check "
                f"AWS_ENDPOINT_URL and the network (RAGEVAL_S3_CONNECT_TIMEOUT_S, "
                f"RAGEVAL_S3_READ_TIMEOUT_S and RAGEVAL_S3_ATTEMPTS bound the wait)",
            )
    if isinstance(exc, FileNotFoundError) and not bucket_exists(storage):
        return StorageError(bucket, NO_BUCKET)  # deleted while the run was using it
    return None


def bucket_exists(storage: UPath) -> bool:
    """Whether the bucket of `storage` is there (True when that cannot be told)."""
    try:
        return bool(storage.fs.exists(storage.path.split("/")[0]))
    except Exception:  # asked only to word another failure: never a failure of its own
        return True
