"""The official BEIR nfcorpus archive end to end through `dagster job execute`.

Served from ../shared/data/beir over a loopback HTTP server as the BEIR mirror; skipped when
the archive is not there (it is never committed).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from rageval_pipeline.core.storage.warehouse import Warehouse
from tests.conftest import SHARED_BEIR
from tests.test_cli_job import BIN, dagster_execute

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (SHARED_BEIR / "nfcorpus.zip").exists(),
        reason="../shared/data/beir/nfcorpus.zip (official BEIR archive) is absent",
    ),
]


def test_nfcorpus_bm25_matches_published_numbers_and_caches_download(pipeline_home, loopback):
    (loopback.root / "nfcorpus.zip").symlink_to(SHARED_BEIR / "nfcorpus.zip")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(pipeline_home / "dagster_home"),
        "RAGEVAL_BEIR_MIRROR": loopback.url,
    }
    (pipeline_home / "dagster_home").mkdir()
    result = dagster_execute("evaluate_bm25", "nfcorpus", env, pipeline_home)
    assert result.returncode == 0, result.stderr[-3000:]
    assert loopback.requests == ["/nfcorpus.zip"]

    warehouse = Warehouse(pipeline_home / "storage" / "rageval.duckdb")
    means = warehouse.query(
        "SELECT measure, value FROM run_metrics WHERE dataset = 'nfcorpus' AND system = 'bm25'"
    )
    value = dict(zip(means["measure"], means["value"], strict=True))
    # Anserini flat BM25 0.3218, bm25s 0.321 (see ../shared/notes/ir-evaluation-facts.md).
    assert value["nDCG@10"] >= 0.320
    assert value["nDCG@10"] == pytest.approx(0.3210, abs=0.002)
    runs = warehouse.query("SELECT n_queries FROM runs WHERE dataset = 'nfcorpus'")
    assert runs["n_queries"].tolist() == [323]

    # A second materialization of the archive finds the verified cache: no request at all.
    again = subprocess.run(
        [
            str(BIN / "dagster"),
            "asset",
            "materialize",
            "-m",
            "rageval_pipeline",
            "--select",
            "beir_archive",
            "--partition",
            "nfcorpus",
        ],
        env=env,
        cwd=pipeline_home,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert loopback.requests == ["/nfcorpus.zip"]
