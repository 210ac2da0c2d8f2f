"""Near-duplicate targets of one query must carry one grade (`rageval validate`)."""

from pathlib import Path

from rageval_pipeline.cli import main
from rageval_pipeline.core.suites.consistency import near_duplicate

DUPES = Path(__file__).parent / "fixtures" / "pool" / "dupes"


def test_the_rule_same_text_shingles_or_shared_words():
    assert near_duplicate("## Port\nListens on 8080.", "port: listens on 8080") == (
        "same normalised text"
    )
    base = "the server listens on port 8080 for http and on 9464 for metrics by default"
    assert near_duplicate(base, base + " always") == "3-shingle Jaccard 0.93"
    assert near_duplicate("a b c d e f", "f e d c b a") == "word Jaccard 1.00"
    assert near_duplicate("a b c d", "a b x y z") is None  # word Jaccard 2/7


def test_validate_flags_near_duplicates_with_different_grades(capsys):
    assert main(["validate", str(DUPES)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    advice = "grade both from their content, or list the pair under `distinct` with the reason"
    assert out.err.splitlines() == [
        # 18 shared words of 31: the same facts restated.
        f'error: {DUPES}: queries[0].judgments["limits"]: query Q1: limits has grade 2, but '
        f"its near-duplicate api (word Jaccard 0.58) has grade 3; {advice} they differ",
        f'error: {DUPES}: queries[0].judgments["copy"]: query Q1: copy has grade 3, but its '
        f"near-duplicate limits (word Jaccard 0.58) has grade 2; {advice} they differ",
        f'error: {DUPES}: queries[1].judgments["copy"]: query Q2: copy has grade 1, but its '
        f"near-duplicate api (same normalised text) has grade 2; {advice} they differ",
    ]


def test_a_pair_marked_distinct_may_differ(tmp_path, capsys):
    """Templated pages share their words and say different things: `distinct` names the pair
    and why, and validate accepts their different grades (an unknown target is refused)."""
    import json

    suite = json.loads((DUPES / "suite.json").read_text())
    suite["name"] = "distinct"
    suite["distinct"] = [
        {"targets": ["api", "limits"], "reason": "limits documents the bucket, api the reply"},
        {"targets": ["copy", "limits"], "reason": "copy is the plain-text export"},
        {"targets": ["copy", "api"], "reason": "copy is the plain-text export"},
    ]
    folder = tmp_path / "distinct"
    folder.mkdir()
    (folder / "suite.json").write_text(json.dumps(suite))
    assert main(["validate", str(folder)]) == 0
    suite["distinct"][0]["targets"][1] = "nowhere"
    (folder / "suite.json").write_text(json.dumps(suite))
    capsys.readouterr()
    assert main(["validate", str(folder)]) == 2
    assert "distinct[0].targets[1]" in capsys.readouterr().err
