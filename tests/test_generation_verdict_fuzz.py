"""Fuzzing the verdict parser (issue 24): no reply that negates TRUE, or names both TRUE and
FALSE, is ever read as TRUE, whatever the words, punctuation, markdown or JSON around them.

Replies are built from the words judges use ("not", "n't", "never", "no", verdict tokens in
any case, filler, punctuation, emphasis), always holding a TRUE and a negation or a FALSE,
plus JSON objects built the same way (duplicate keys, extra fields). RAGEVAL_FUZZ_EXAMPLES sets
the number of examples (default 200), as for the other fuzz targets.
"""

from __future__ import annotations

import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.generation.verdicts import parse_verdict

FUZZ = settings(max_examples=int(os.environ.get("RAGEVAL_FUZZ_EXAMPLES") or 200), deadline=None)
TRUE = st.sampled_from(["TRUE", "true", "True", "tRuE", "**TRUE**", "`TRUE`", '"TRUE"'])
FALSE = st.sampled_from(["FALSE", "false", "False", "**FALSE**", "_false_"])
NEGATION = st.sampled_from(
    ["not", "NOT", "n't", "doesn't", "isn't", "can't", "never", "Never", "no", "No", "nor"]
)
FILLER = st.sampled_from(
    ["", "I", "it", "is", "that", "say", "look", "to", "me", "the", "answer", "verdict:",
     "Answer:", "so", "quite", "exactly", "\n", "**", "_", "`", ".", ",", "!", "?", ":", ";",
     "-", "(", ")", "{", "}", '"', "'"]
)  # fmt: skip
SEPARATOR = st.sampled_from(["", " ", "  ", "\n", "\t", ". ", ", ", "! ", ": "])


def sentence(*required: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """The required tokens among 0-6 fillers, shuffled, joined by random separators."""

    @st.composite
    def build(draw) -> str:
        words = [draw(r) for r in required] + draw(st.lists(FILLER, max_size=6))
        words = draw(st.permutations(words))
        return "".join(w + draw(SEPARATOR) for w in words)

    return build()


NEGATED = sentence(TRUE, NEGATION)
BOTH = sentence(TRUE, FALSE)


@st.composite
def json_reply(draw) -> str:
    """An object holding a TRUE verdict and a negation or a FALSE elsewhere in it."""
    other = draw(st.one_of(NEGATED, BOTH, NEGATION, FALSE))
    key = draw(st.sampled_from(["verdict", "reason", "note", "Verdict"]))
    pairs = [("verdict", draw(TRUE).strip('*`"')), (key, other)]
    pairs = draw(st.permutations(pairs))
    return "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"


def negates_or_mixes(text: str) -> bool:
    """The property's premise: TRUE with a negation word or FALSE (as substrings, so words
    run together by an empty separator count too)."""
    lower = text.lower()
    negated = any(word in lower for word in ("not", "n't", "never", "no", "nor"))
    return "true" in lower and (negated or "false" in lower)


@FUZZ
@given(st.one_of(NEGATED, BOTH, json_reply()))
def test_a_negated_or_mixed_true_is_never_true(text):
    assert negates_or_mixes(text)  # the generator keeps to the premise
    assert parse_verdict(text) != "TRUE"


@FUZZ
@given(st.text())
def test_arbitrary_text_that_negates_or_mixes_is_never_true(text):
    if negates_or_mixes(text):
        assert parse_verdict(text) != "TRUE"
    assert parse_verdict(text) in ("TRUE", "FALSE", "unparseable")
