"""The Dagster UI: a real dagster-webserver process, asked over GraphQL and driven in headless
Chromium over the DevTools protocol (Debian's `chromium`; that part skips with a reason when it
is absent). Screenshots land in the test's tmp folder (and in $RAGEVAL_SCREENSHOTS if set)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cdp import chromium_page
from tests.conftest import make_pipeline_home
from tests.dagster_ui import free_port, graphql, graphql_when_loaded, running_webserver
from tests.jobs import dagster_execute

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A home and its environment whose instance has evaluated beir-mini once (metrics, gate,
    its check); one for the module: the tests only read it, or add runs of other datasets."""
    home = tmp_path_factory.mktemp("evaluated")
    (home / "dagster_home").mkdir()
    env = {**os.environ, **make_pipeline_home(home), "DAGSTER_HOME": str(home / "dagster_home")}
    job = dagster_execute("evaluate_dataset", "beir-mini", env, home)
    assert job.returncode == 0, job.stderr[-3000:]
    return home, env


@pytest.fixture(scope="module")
def evaluated_webserver(evaluated) -> Iterator[str]:
    """The UI over that instance."""
    home, env = evaluated
    with running_webserver(env, home, home / "webserver.log") as url:
        graphql_when_loaded(url, "{ assetNodes { id } }")
        yield url


@pytest.fixture(scope="module")
def failed_run(evaluated) -> tuple[str, str]:
    """A run of scifact in that instance that fails on an expected error (its mirror does not
    answer; a few seconds): its run id and the one line it failed with."""
    home, env = evaluated
    mirror = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    job = dagster_execute(
        "evaluate_bm25",
        "scifact",
        env | {"RAGEVAL_BEIR_MIRROR": mirror, "RAGEVAL_BEIR_ATTEMPTS": "1"},
        home,
        op="ingest",  # the ingest step alone: no gate check of scifact to fail after it
    )
    assert job.returncode == 1
    [run_id] = re.findall(r"Run ([0-9a-f-]+) resulted in failure", job.stderr)
    return run_id, f"{mirror}/scifact.zip: failed after 1 attempt(s): connection failed"


def test_ui_serves_the_asset_graph_jobs_and_partitions(evaluated_webserver):
    data = graphql_when_loaded(
        evaluated_webserver,
        "{ assetNodes { assetKey { path } partitionKeys } }",
    )
    nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
    assert {"beir_archive", "corpus", "queries", "qrels", "bm25/run", "bm25/metrics", "gate"} <= (
        set(nodes)
    )
    assert {"nfcorpus", "beir-mini"} <= set(nodes["corpus"]["partitionKeys"])
    # The gate is judged per dataset, like the assets it reads.
    assert nodes["gate"]["partitionKeys"] == nodes["corpus"]["partitionKeys"]
    jobs = graphql(
        evaluated_webserver,
        "{ repositoriesOrError { ... on RepositoryConnection { nodes { jobs { name } } } } }",
    )
    names = {j["name"] for r in jobs["repositoriesOrError"]["nodes"] for j in r["jobs"]}
    assert {"evaluate_dataset", "ingest_dataset", "evaluate_bm25"} <= names


FAILURES = """query ($id: ID!) {
  logsForRun(runId: $id) { ... on EventConnection { events {
    __typename
    ... on ExecutionStepFailureEvent { stepKey error { message stack } }
    ... on RunFailureEvent { error { message stack } }
  } } }
}"""


def test_ui_stores_an_expected_failure_as_its_line(evaluated_webserver, failed_run):
    """What the run page draws a failed step from: the one line, with no stack."""
    run_id, line = failed_run
    events = graphql(evaluated_webserver, FAILURES, {"id": run_id})["logsForRun"]["events"]
    failures = [e for e in events if e["__typename"].endswith("FailureEvent")]
    assert [e["__typename"] for e in failures] == ["ExecutionStepFailureEvent", "RunFailureEvent"]
    assert failures[0]["stepKey"] == "ingest"
    for failure in failures:
        assert failure["error"]["stack"] == []
        assert failure["error"]["message"].startswith(
            f"dagster._core.definitions.events.Failure: {line}"
        )


EXPAND_A_GROUP = """(() => {
  const group = document.querySelector('[class*=collapsedGroupNodeBox]');
  if (group) group.click();
  return !group;
})()"""
STAGES = ("beir_archive", "corpus", "queries", "qrels", "chunks", "index", "run", "metrics", "gate")


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_ui_in_headless_chromium(evaluated_webserver, failed_run, tmp_path):
    url, shots = evaluated_webserver, tmp_path / "screenshots"
    shots.mkdir()
    with chromium_page(tmp_path / "profile") as page:
        page.goto(f"{url}/")
        page.wait_for("Join the Dagster community", "Skip")
        page.screenshot(shots / "1-first-visit-dialog.png")
        page.click_text("Skip")
        page.wait_for("Overview", absent=("Join the Dagster community",))

        # The asset graph: expand the collapsed groups, then reload so that the graph fits the
        # window (nodes outside the viewport are not rendered) and find every stage. The UI
        # saves a group's expansion asynchronously, so a reload right after the last click can
        # find it collapsed again: expand and reload again then (seen once in ten CI runs).
        for attempt in range(3):
            page.goto(f"{url}/asset-groups")
            page.wait_for("ingest", "system_bm25", "gate")
            page.wait_until(EXPAND_A_GROUP)
            page.goto(f"{url}/asset-groups")
            try:
                page.wait_for(*STAGES, timeout=20)
                break
            except AssertionError:
                if attempt == 2:
                    raise
        page.screenshot(shots / "2-asset-graph.png")

        # A metrics asset plots every measure (float metadata) by partition.
        page.goto(f"{url}/assets/bm25/metrics")
        page.wait_for("Metadata", "Plots")
        page.click_text("Plots")
        page.wait_for("nDCG@10", "RR", "R@10", "Partition")
        assert page.wait_until("document.querySelectorAll('canvas').length") >= 10
        page.screenshot(shots / "3-metrics-plots.png")

        # The gate's blocking check and its latest result, for the dataset it judged.
        page.goto(f"{url}/assets/gate?view=checks")
        page.wait_for("verdict_passes", "Latest execution", "Passed", "PASS:", "beir-mini")
        page.screenshot(shots / "4-gate-check.png")

        # The nightly schedule is on (RUNNING by default).
        page.goto(f"{url}/locations/rageval_pipeline/schedules/nightly")
        page.wait_for("nightly", "Running", "0 2 * * *")
        page.wait_until("document.querySelector('input[type=checkbox]')?.checked === true")
        page.screenshot(shots / "5-nightly-schedule.png")

        # A step that failed on an expected error shows its one line, and no stack under it
        # (defs/failures.py): the step's failure, and the run's that repeats it.
        run_id, line = failed_run
        page.goto(f"{url}/runs/{run_id}")
        text = page.wait_for("STEP_FAILURE", "RUN_FAILURE", line)
        assert text.count(line) == 2 and "Stack Trace" not in text
        page.screenshot(shots / "6-failed-step.png")
    for shot in shots.iterdir():
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    if keep := os.environ.get("RAGEVAL_SCREENSHOTS"):
        shutil.copytree(shots, keep, dirs_exist_ok=True)
