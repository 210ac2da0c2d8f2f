"""The label job's steps on techdocs, in process: every pooled system's retrieval runs once per
run (the `pooled_rankings` asset the label steps share), and the gate policy is read once."""

from __future__ import annotations

import dagster as dg
import pytest

from rageval_pipeline.core.curation import pool
from rageval_pipeline.defs import policy as policy_resource
from rageval_pipeline.defs.definitions import build_definitions
from tests.scripted_judge import serve
from tests.test_labels_job import labelled_home

pytestmark = pytest.mark.slow
CONFIG = {"resources": {"labels": {"config": {"n": 8, "human_sample": 3, "depth": 3}}}}


def test_the_label_steps_retrieve_once_and_read_the_policy_once(pipeline_home, monkeypatch):
    data = pipeline_home / "data"
    labelled_home(data)
    fake = serve(monkeypatch)
    retrieved: list[list[str]] = []
    run_systems = pool.run_systems

    def counted(suite, chosen, *args, **kwargs):  # the real retrieval, counted
        retrieved.append(sorted(chosen))
        return run_systems(suite, chosen, *args, **kwargs)

    monkeypatch.setattr(pool, "run_systems", counted)
    reads: list[str] = []
    read_policy = policy_resource.policy_or_defaults
    monkeypatch.setattr(
        policy_resource, "policy_or_defaults", lambda p: reads.append(str(p)) or read_policy(p)
    )
    try:
        defs = build_definitions()
        assets = [
            a
            for a in defs.assets
            if a.group_names_by_key and "llm_labels" in set(a.group_names_by_key.values())
        ]
        resources = defs.resources
        first = dg.materialize(
            [a for a in assets if a.key.path == ["synthetic_queries"]],
            partition_key="techdocs",
            resources=resources,
            run_config=CONFIG,
        )
        assert first.success
        retrieved.clear()
        rest = dg.materialize(
            assets,
            selection=[a.key for a in assets if a.key.path != ["synthetic_queries"]],
            partition_key="techdocs",
            resources=resources,
            run_config=CONFIG,
            raise_on_error=False,
        )
    finally:
        fake.stop()
    materialized = {e.asset_key.path[-1] for e in rest.get_asset_materialization_events()}
    assert {"pooled_rankings", "llm_labels", "judge_calibration"} <= materialized
    # One retrieval of every pooled system for the whole run, not one per label step.
    assert retrieved == [["bm25", "bm25_flat"]]
    assert reads == [str(data / "gate.yaml")]
