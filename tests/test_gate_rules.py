"""The policy's rule kinds (core/gate/rules.py): judged by the one gate in `rules` (the release)
and `validation` (seed 003's report), read from gate.yaml by the one loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.gate import RunSummary, Verdict, decide, decide_validation, load_policy
from rageval_pipeline.core.report import to_json


def summary(per_query: dict[str, float], p95: float = 30.0, **measures: float) -> RunSummary:
    return RunSummary(
        dataset="techdocs",
        split="test",
        system="bm25",
        fingerprint="f",
        run_id="r1",
        created_at="2026-02-01T10:00:00+00:00",
        measures={"P@5": sum(per_query.values()) / len(per_query), **measures},
        per_query={q: {"P@5": v} for q, v in per_query.items()},
        latency={"all": {"p50": 10.0, "p95": p95}},
        n_queries=len(per_query),
    )


def policy(tmp_path: Path, rules: str) -> Path:
    path = tmp_path / "gate.yaml"
    path.write_text(f"version: 1\ndatasets:\n  default:\n    rules:\n{rules}", encoding="utf-8")
    return path


def ruled(verdict: Verdict):
    """The check of the policy's one rule (after the run's missing_baseline)."""
    return verdict.checks[1]


HALF = {"q1": 1.0, "q2": 1.0, "q3": 0.4, "q4": 0.4}


def test_a_rule_in_rules_blocks_the_release_like_a_threshold(tmp_path):
    strict = policy(tmp_path, "      - {kind: query_share, measure: P@5, min: 0.8, share: 0.75}\n")
    verdict = decide([summary(HALF)], {}, load_policy(strict))
    check = ruled(verdict)
    assert (check.value, check.reference, check.passed, check.blocking) == (0.5, 0.75, False, True)
    assert check.message.startswith("techdocs/bm25 2/4 queries (50%) have P@5 >= 0.8, < 75%")
    assert not verdict.passed and verdict.categories == ["ranking_shift"]
    # A rule's check kind reads back from the report's JSON like the built-in kinds.
    assert Verdict.model_validate_json(to_json(verdict)) == verdict

    advisory = policy(
        tmp_path,
        "      - {kind: query_share, measure: P@5, min: 0.8, share: 0.75, blocking: false}\n",
    )
    verdict = decide([summary(HALF)], {}, load_policy(advisory))
    assert verdict.passed and len(verdict.warnings) == 2  # the share and the missing baseline


def test_query_share_of_a_lower_is_better_measure_counts_queries_at_most_min(tmp_path):
    rules = "      - {kind: query_share, measure: Clustering@10, min: 0.3, share: 0.5}\n"
    run = summary(HALF).model_copy(
        update={"per_query": {"q1": {"Clustering@10": 0.2}, "q2": {"Clustering@10": 0.9}}}
    )
    check = ruled(decide([run], {}, load_policy(policy(tmp_path, rules))))
    assert check.kind == "query_share" and check.value == 0.5 and check.passed
    assert "have Clustering@10 <= 0.3" in check.message


@pytest.mark.parametrize(("p95", "passed"), [(1999.9, True), (2000.0, False), (None, False)])
def test_latency_below_is_strict_and_fails_unmeasured(tmp_path, p95, passed):
    run = summary(HALF, p95=p95 if p95 is not None else 1.0)
    if p95 is None:
        run = run.model_copy(update={"latency": {"all": {"p50": 1.0}}})
    rules = "      - {kind: latency_below, stat: p95, ms: 2000}\n"
    check = ruled(decide([run], {}, load_policy(policy(tmp_path, rules))))
    assert (check.kind, check.measure, check.passed, check.blocking) == (
        "latency",
        "p95",
        passed,
        True,
    )


def test_integrity_is_judged_only_when_measured(tmp_path):
    text = policy(tmp_path, "      []\n").read_text() + (
        "    validation:\n      - {kind: integrity, rate: hash_validation, min: 0.9}\n"
    )
    (tmp_path / "gate.yaml").write_text(text)
    loaded = load_policy(tmp_path / "gate.yaml")
    [(_, unmeasured)] = decide_validation(summary(HALF), loaded)
    assert unmeasured.passed and not unmeasured.blocking and unmeasured.value is None
    rates = {"metadata_completeness": 1.0, "hash_validation": 0.85}
    [(_, damaged)] = decide_validation(summary(HALF), loaded, integrity=rates)
    assert (damaged.value, damaged.passed, damaged.blocking) == (0.85, False, True)
    # Validation rules never enter the release verdict.
    assert not any(c.kind == "integrity" for c in decide([summary(HALF)], {}, loaded).checks)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        (
            "{kind: nope, measure: P@5}",
            "gate.yaml:5: datasets[\"default\"].rules[0]: Input tag 'nope' found using 'kind'",
        ),
        (
            "{kind: query_share, measure: P@5, min: 0.8, share: 1.5}",
            'gate.yaml:5: datasets["default"].rules[0].share: must be less than or',
        ),
        (
            "{kind: threshold, measure: nDGC@10, min: 0.3}",
            'gate.yaml:5: datasets["default"].rules[0].measure: unknown measure',
        ),
    ],
)
def test_a_bad_rule_names_file_line_and_field(tmp_path, rule, expected):
    with pytest.raises(InputError) as caught:
        load_policy(policy(tmp_path, f"      - {rule}\n"))
    assert str(caught.value).startswith(str(tmp_path / expected)), str(caught.value)
