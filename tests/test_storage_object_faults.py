"""Object-storage failures end in one line naming the bucket or endpoint and what to do, through
the real `rageval` CLI (its `main`), against moto's S3 server with credentials checked (issue
36): wrong keys, keys without permission, a missing bucket, a bucket deleted while in use, an
unreachable endpoint and throttling (a loopback server answering SlowDown), the last two
within the bounded tries of RAGEVAL_S3_*."""

from __future__ import annotations

import json
import os
import socket

import boto3
import pytest
import s3fs

from rageval_pipeline.cli import main
from rageval_pipeline.core.io import paths
from rageval_pipeline.core.storage.choose import open_warehouse
from rageval_pipeline.core.storage.faults import object_store_error
from rageval_pipeline.core.storage.location import NO_BUCKET
from tests.conftest import REPO, make_pipeline_home
from tests.loopback_http import reply, scripted  # noqa: F401 - the fixture
from tests.moto_s3 import moto_server
from tests.test_cli_job import dagster_execute
from tests.test_storage import _results, _run_row

ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
SETUP_ACTIONS = 6  # moto answers this many calls unauthenticated: the setup below, exactly


@pytest.fixture(scope="module")
def aws():
    """moto with IAM checks on; two users: `allowed` (everything) and `denied` (no policy)."""
    with moto_server({"INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_ACTIONS)}) as env:
        client = dict(
            endpoint_url=env["AWS_ENDPOINT_URL"],
            region_name="us-east-1",
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        boto3.client("s3", **client).create_bucket(Bucket="bucket")
        iam = boto3.client("iam", **client)
        keys = {}
        for user in ("allowed", "denied"):
            iam.create_user(UserName=user)
            keys[user] = iam.create_access_key(UserName=user)["AccessKey"]
        iam.put_user_policy(UserName="allowed", PolicyName="all", PolicyDocument=json.dumps(ALL))
        yield env, keys


def _as(monkeypatch, env: dict, key: dict | None, storage: str) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if key is not None:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    monkeypatch.setenv("RAGEVAL_STORAGE", storage)
    s3fs.S3FileSystem.clear_instance_cache()  # a cached client keeps its first credentials


def _history(capsys) -> tuple[int, str]:
    capsys.readouterr()
    status = main(["history", "--dataset", "d"])
    return status, capsys.readouterr().err


def test_wrong_keys_no_permission_and_a_missing_bucket_are_one_line_each(aws, monkeypatch, capsys):
    env, keys = aws
    wrong = {"AccessKeyId": "AKIAWRONGWRONGWRONG0", "SecretAccessKey": "not-the-secret"}
    _as(monkeypatch, env, wrong, "s3://bucket/eval")
    assert _history(capsys) == (
        2,
        "error: s3://bucket: the object store refused the credentials (InvalidAccessKeyId): "
        "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY\n",
    )
    _as(monkeypatch, env, keys["denied"], "s3://bucket/eval")
    assert _history(capsys) == (
        2,
        "error: s3://bucket: permission denied (AccessDenied): let these credentials list, "
        "read and write the bucket, or point RAGEVAL_STORAGE at one they may use\n",
    )
    # Not "no warehouse yet": the bucket itself is missing.
    _as(monkeypatch, env, keys["allowed"], "s3://no-such-bucket/eval")
    assert _history(capsys) == (2, f"error: s3://no-such-bucket: {NO_BUCKET}\n")
    _as(monkeypatch, env, keys["allowed"], "s3://bucket/eval")
    status, err = _history(capsys)
    assert status == 2
    assert err == "error: s3://bucket/eval/lake: no warehouse yet: run an evaluation first\n"
    assert keys["allowed"]["SecretAccessKey"] not in err


def test_a_bucket_deleted_while_in_use_is_named_as_missing(aws, monkeypatch, capsys):
    env, keys = aws
    _as(monkeypatch, env, keys["allowed"], "s3://doomed/eval")
    storage = paths.storage_dir()
    storage.fs.mkdir("doomed")
    lake = open_warehouse(storage)
    lake.record_run(_run_row("r1"), _results("r1", 0.5))
    storage.fs.rm("doomed", recursive=True)  # the objects, then the bucket
    with pytest.raises(Exception) as err:  # whatever s3fs raises for the lake writer
        lake.record_run(_run_row("r2"), _results("r2", 0.5))
    assert str(object_store_error(err.value, storage)) == f"s3://doomed: {NO_BUCKET}"
    assert _history(capsys) == (2, f"error: s3://doomed: {NO_BUCKET}\n")


def test_an_unreachable_endpoint_fails_fast_after_its_tries(monkeypatch, capsys):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_DEFAULT_REGION": "us-east-1"}
    monkeypatch.setenv("RAGEVAL_S3_ATTEMPTS", "2")
    monkeypatch.setenv("RAGEVAL_S3_CONNECT_TIMEOUT_S", "1")
    _as(monkeypatch, env, {"AccessKeyId": "k", "SecretAccessKey": "s"}, "s3://bucket/eval")
    assert _history(capsys) == (
        2,
        f"error: http://127.0.0.1:{port}: no answer from the object store "
        f"(EndpointConnectionError) in 2 tries: check AWS_ENDPOINT_URL and the network "
        f"(RAGEVAL_S3_CONNECT_TIMEOUT_S, RAGEVAL_S3_READ_TIMEOUT_S and RAGEVAL_S3_ATTEMPTS bound "
        f"the wait)\n",
    )


SLOW_DOWN = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
    b"<Message>Please reduce your request rate.</Message></Error>"
)


def test_throttling_is_retried_then_one_line(scripted, monkeypatch, capsys):  # noqa: F811
    scripted.route("/bucket", reply(503, SLOW_DOWN, {"Content-Type": "application/xml"}))
    monkeypatch.setenv("RAGEVAL_S3_ATTEMPTS", "3")
    env = {"AWS_ENDPOINT_URL": scripted.url, "AWS_DEFAULT_REGION": "us-east-1"}
    _as(monkeypatch, env, {"AccessKeyId": "k", "SecretAccessKey": "s"}, "s3://bucket/eval")
    assert _history(capsys) == (
        2,
        "error: s3://bucket: the object store kept asking to slow down (SlowDown) through 3 "
        "tries: run fewer steps at once or retry later (RAGEVAL_S3_ATTEMPTS)\n",
    )
    # The listing of the lake's commits was tried exactly RAGEVAL_S3_ATTEMPTS times.
    assert len(scripted.hits("/bucket")) == 3


@pytest.mark.slow
def test_a_job_step_ends_in_the_same_one_line(tmp_path):
    """`dagster job execute` with the storage on an endpoint that is down: the first step
    touching the bucket fails with the line, not botocore's trace."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, **make_pipeline_home(tmp_path), "PYTHONPATH": str(REPO)}
    env |= {
        "RAGEVAL_STORAGE": "s3://bucket/eval",
        "RAGEVAL_SCRATCH": str(tmp_path / "scratch"),
        "RAGEVAL_S3_ATTEMPTS": "1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    done = dagster_execute("evaluate_bm25", "beir-mini", env, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1
    assert (
        f"http://127.0.0.1:{port}: no answer from the object store (EndpointConnectionError) "
        f"in 1 try: check AWS_ENDPOINT_URL and the network" in output
    ), output[-3000:]
    assert "botocore" not in output
