import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.suites.matching import (
    TargetError,
    matches,
    resolve,
    resolve_target,
    split_chunk_id,
)


@pytest.mark.parametrize(
    ("target", "candidate", "exact", "suffix"),
    [
        ("a.rs", "a.rs", True, True),
        ("a.rs", "src/a.rs", False, True),  # a whole trailing segment
        ("a.rs", "src/data.rs", False, False),  # never a substring: "data.rs" ends with "a.rs"
        ("ta.rs", "src/data.rs", False, False),
        ("src/a.rs", "a.rs", False, False),  # only the target may be the shorter side
        ("b/a.rs", "src/b/a.rs", False, True),
        ("b/a.rs", "src/xb/a.rs", False, False),
        ("", "src/", False, False),
        ("guide", "guide-v2", False, False),
    ],
)
def test_matches(target, candidate, exact, suffix):
    assert matches(target, candidate, "exact") is exact
    assert matches(target, candidate, "suffix") is suffix


SEGMENTS = st.lists(st.text(alphabet="ab.", min_size=1, max_size=3), min_size=1, max_size=4)


@settings(deadline=None)
@given(SEGMENTS, SEGMENTS)
def test_suffix_mode_matches_exactly_whole_trailing_segments(target_parts, candidate_parts):
    expected = candidate_parts[-len(target_parts) :] == target_parts
    assert matches("/".join(target_parts), "/".join(candidate_parts), "suffix") is expected


def test_resolve_by_suffix_and_exact_match_wins():
    docs = ["src/a.rs", "src/data.rs", "b.rs", "lib/b.rs"]
    assert resolve("a.rs", docs, "suffix") == "src/a.rs"
    assert resolve("b.rs", docs, "suffix") == "b.rs"


def test_resolve_unknown_and_ambiguous():
    docs = ["src/a.rs", "lib/a.rs", "src/data.rs"]
    with pytest.raises(TargetError) as error:
        resolve("a.rs", docs, "exact")
    assert str(error.value) == "unknown target 'a.rs': no document id equals it"
    with pytest.raises(TargetError) as error:
        resolve("ta.rs", docs, "suffix")
    assert str(error.value) == (
        "unknown target 'ta.rs': no document id equals it or ends with '/ta.rs'"
    )
    with pytest.raises(TargetError) as error:
        resolve("a.rs", docs, "suffix")
    assert (
        str(error.value) == "ambiguous target 'a.rs': matches 2 documents ('lib/a.rs', 'src/a.rs')"
    )


@pytest.mark.parametrize(
    ("target", "parts"),
    [
        ("guide:chunk:0", ("guide", 0)),
        ("a:chunk:1:chunk:12", ("a:chunk:1", 12)),
        ("guide", None),
        ("guide:chunk:", None),
        ("guide:chunk:x", None),
        (":chunk:3", None),
    ],
)
def test_split_chunk_id(target, parts):
    assert split_chunk_id(target) == parts


def test_resolve_target_levels_and_canonical_chunk_ids():
    counts = {"src/a.rs": 2, "guide": 1}
    assert resolve_target("guide", counts, "exact") == ("guide", "document")
    assert resolve_target("a.rs:chunk:1", counts, "suffix") == ("src/a.rs:chunk:1", "chunk")
    assert resolve_target("guide:chunk:00", counts, "exact") == ("guide:chunk:0", "chunk")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "src/a.rs:chunk:2",
            "unknown chunk 'src/a.rs:chunk:2': document 'src/a.rs' has 2 chunk(s), "
            "numbered 0 to 1, under the reference chunking",
        ),
        (
            "a.rs:chunk:0",
            "chunk 'a.rs:chunk:0': unknown target 'a.rs': no document id equals it",
        ),
    ],
)
def test_resolve_target_errors(target, message):
    with pytest.raises(TargetError) as error:
        resolve_target(target, {"src/a.rs": 2}, "exact")
    assert str(error.value) == message
