"""The derived-grade rule for nuggets (core.suites.derived): a chunk earns a nugget's grade by
holding at least half of its decisive part, is judged 0 where it holds only read text, and is
unjudged elsewhere. The properties are checked on drawn nuggets and chunkings; the boundary of
"at least half" on hand-counted cases that a stricter or looser rule fails."""

from __future__ import annotations

from itertools import pairwise

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.suites.derived import Tokens, derive_qrels

# One document of numbered three-character tokens: token i is characters 4i..4i+3.
TOKENS = 60
TEXT = " ".join(f"t{i:02d}" for i in range(TOKENS))
TEXT_TOKENS = Tokens.of(pd.DataFrame({"doc_id": ["d"], "text": [TEXT]}))

# (first, stop, grade, decisive first, decisive stop): tokens [first, stop), decisive part
# [decisive first, decisive stop) inside it.
Nugget = tuple[int, int, int, int, int]


def chars(first: int, stop: int) -> tuple[int, int]:
    """The characters of tokens [first, stop)."""
    return 4 * first, 4 * stop - 1


def derive(spans: list[Nugget], chunks: list[tuple[int, int]]) -> dict[int, int]:
    """Chunk number -> derived grade (judged chunks only)."""
    rows = []
    for first, stop, grade, key_first, key_stop in spans:
        (a, b), (c, d) = chars(first, stop), chars(key_first, key_stop)
        rows.append(
            dict(split="test", query_id="q", doc_id="d", start=a, end=b, relevance=grade)
            | dict(decisive_start=c, decisive_end=d)
        )
    units = [
        dict(id=str(n), doc_id="d", start=a, end=b)
        for n, chunk in enumerate(chunks)
        for a, b in [chars(*chunk)]
    ]
    derived = derive_qrels(pd.DataFrame(rows), pd.DataFrame(units), TEXT_TOKENS)
    return {int(c): int(g) for c, g in zip(derived["doc_id"], derived["relevance"], strict=True)}


def whole(first: int, stop: int, grade: int) -> Nugget:
    """A nugget decisive in whole (no `decisive` quote)."""
    return first, stop, grade, first, stop


@st.composite
def nuggets(draw) -> list[Nugget]:
    """A judged region over part of the document (grade 0) with nuggets of any grade inside it,
    each with a decisive part somewhere in it."""
    region_first = draw(st.integers(0, 20))
    region_stop = draw(st.integers(region_first + 10, TOKENS))
    spans = [whole(region_first, region_stop, 0)]
    for _ in range(draw(st.integers(1, 4))):
        first = draw(st.integers(region_first, region_stop - 1))
        stop = draw(st.integers(first + 1, min(region_stop, first + 20)))
        key_first = draw(st.integers(first, stop - 1))
        key_stop = draw(st.integers(key_first + 1, stop))
        spans.append((first, stop, draw(st.integers(1, 3)), key_first, key_stop))
    return spans


@st.composite
def cuts(draw) -> list[int]:
    """Chunk boundaries: contiguous chunks covering the document."""
    inner = sorted(set(draw(st.lists(st.integers(1, TOKENS - 1), max_size=8))))
    return [0, *inner, TOKENS]


def chunks_of(bounds: list[int]) -> list[tuple[int, int]]:
    return list(pairwise(bounds))


@st.composite
def windows(draw) -> list[tuple[int, int]]:
    """Fixed windows that may overlap, as the `fixed` chunking makes them."""
    size = draw(st.integers(1, 20))
    step = size - draw(st.integers(0, size - 1))
    return [(a, min(a + size, TOKENS)) for a in range(0, TOKENS - size + step, step)]


@settings(max_examples=150, deadline=None)
@given(nuggets(), st.one_of(cuts().map(chunks_of), windows()))
def test_a_chunk_holding_a_whole_nugget_earns_at_least_its_grade(spans, chunks):
    derived = derive(spans, chunks)
    for n, (c, d) in enumerate(chunks):
        held = [g for a, b, g, _, _ in spans if g and c <= a and b <= d]
        if held:
            assert derived[n] >= max(held), (n, chunks[n], spans)


@settings(max_examples=150, deadline=None)
@given(nuggets(), st.one_of(cuts().map(chunks_of), windows()))
def test_a_chunk_holding_no_decisive_token_earns_0_and_is_judged_only_where_read(spans, chunks):
    derived = derive(spans, chunks)
    for n, (c, d) in enumerate(chunks):
        if not any(ka < d and c < kb for _, _, g, ka, kb in spans if g):
            assert derived.get(n, 0) == 0, (n, chunks[n], spans)
        read = any(a < d and c < b for a, b, *_ in spans)
        assert (n in derived) == read, (n, chunks[n], spans)


@settings(max_examples=200, deadline=None)
@given(nuggets(), cuts(), st.data())
def test_moving_a_boundary_by_one_token_changes_grades_only_across_a_decisive_part(
    spans, bounds, data
):
    """Moving the boundary between two chunks by one token moves that token from one to the
    other: a grade changes only when the token is decisive for a nugget."""
    if len(bounds) < 3:
        return
    at = data.draw(st.integers(1, len(bounds) - 2))
    step = data.draw(st.sampled_from([-1, 1]))
    moved = bounds[at] + step
    if not bounds[at - 1] < moved < bounds[at + 1]:
        return
    token = min(bounds[at], moved)  # the token that changes sides
    before = derive(spans, chunks_of(bounds))
    after = derive(spans, chunks_of([*bounds[:at], moved, *bounds[at + 1 :]]))
    decisive = any(ka <= token < kb for _, _, g, ka, kb in spans if g)
    for n in (at - 1, at):  # the two chunks either side of the boundary
        if before.get(n, 0) != after.get(n, 0):
            assert decisive, (token, spans, bounds, at, step)


def test_at_least_half_of_the_decisive_part_earns_the_grade_and_less_does_not():
    """Hand-counted: a decisive part of 2 tokens cut 1 | 1 goes to both sides (a strict "more
    than half" gives it to neither); one of 4 cut 1 | 3 goes to the side of 3 only (a rule of
    "any decisive token" gives it to both); 2 | 2 to both."""
    cut_in_two = [whole(10, 12, 3)]
    assert derive(cut_in_two, [(0, 11), (11, 30)]) == {0: 3, 1: 3}
    assert derive([whole(10, 14, 2)], [(0, 11), (11, 30)]) == {0: 0, 1: 2}
    assert derive([whole(10, 14, 2)], [(0, 12), (12, 30)]) == {0: 2, 1: 2}
    assert derive([whole(10, 14, 2)], [(0, 13), (13, 30)]) == {0: 2, 1: 0}


def test_a_fragment_earns_nothing_unless_it_holds_the_decisive_words():
    """A 4-token chunk that is all nugget earns 0 when the nugget has 20 tokens (the old rule
    credited a chunk the span filled half of), and the nugget's grade when its decisive words
    are those 4 tokens; the rest of a cut nugget then earns 0 however much of it it holds."""
    long = whole(10, 30, 3)
    assert derive([long], [(0, 26), (26, 30)]) == {0: 3, 1: 0}
    assert derive([long], [(10, 14), (14, 40)]) == {0: 0, 1: 3}
    keyed = (10, 30, 3, 26, 30)  # decisive: the last 4 tokens
    assert derive([keyed], [(0, 26), (26, 30)]) == {0: 0, 1: 3}


def test_read_text_without_a_nugget_is_judged_0_and_unread_text_is_unjudged():
    region, nugget = whole(0, 20, 0), whole(5, 8, 2)
    assert derive([region, nugget], [(0, 5), (5, 10), (10, 20), (20, 40)]) == {0: 0, 1: 2, 2: 0}


def test_the_highest_grade_a_chunk_earns_is_its_grade():
    spans = [whole(0, 4, 1), (4, 20, 3, 15, 17), whole(20, 22, 2)]
    assert derive(spans, [(0, 16), (16, 22), (0, 30)]) == {0: 3, 1: 3, 2: 3}
    assert derive(spans, [(0, 15), (17, 22)]) == {0: 1, 1: 2}
