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
    assert out.err.splitlines() == [
        # 18 shared words of 31: the same facts restated.
        f'error: {DUPES}: queries[0].judgments["limits"]: grade 2, but its near-duplicate '
        "'api' (word Jaccard 0.58) has grade 3; grade both from their content",
        f'error: {DUPES}: queries[0].judgments["copy"]: grade 3, but its near-duplicate '
        "'limits' (word Jaccard 0.58) has grade 2; grade both from their content",
        f'error: {DUPES}: queries[1].judgments["copy"]: grade 1, but its near-duplicate '
        "'api' (same normalised text) has grade 2; grade both from their content",
    ]
