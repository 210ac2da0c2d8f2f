"""Reading a model's output: a TRUE/FALSE verdict or a 0-3 grade, or `unparseable`.

Tolerant of case, whitespace, punctuation, markdown and surrounding words ("**True.**",
"Answer: FALSE"), strict about ambiguity: output naming both verdicts, neither, or several
different grades is `unparseable`, which is counted and reported and never counts as TRUE.
"""

from __future__ import annotations

import re
from typing import Literal

Verdict = Literal["TRUE", "FALSE", "unparseable"]

_WORDS = re.compile(r"[a-z]+")
# A negated verdict ("not true", "isn't false") is a sentence, not a verdict: unparseable.
_NEGATIONS = {"not", "no", "isn", "aren", "never", "neither", "nor"}
_FINAL = re.compile(r"final\s*score\s*[:=\-]?\s*\**\s*([0-3])\b", re.IGNORECASE)
_DIGIT = re.compile(r"(?<![\d.])([0-9])(?!\d|\.\d)")  # a lone digit, not part of 1.5 or 10


def parse_verdict(text: str) -> Verdict:
    """TRUE or FALSE when exactly one of them appears as a word, unnegated; else
    `unparseable`."""
    words = set(_WORDS.findall(text.lower()))
    found = words & {"true", "false"}
    if len(found) != 1 or words & _NEGATIONS:
        return "unparseable"
    return "TRUE" if found == {"true"} else "FALSE"


def parse_grade(text: str) -> int | None:
    """The 0-3 grade: UMBRELA's `##final score: N` when present, else the one lone digit
    in the output; None (unparseable) when there are several different candidates or any
    is out of range."""
    finals = {int(m) for m in _FINAL.findall(text)}
    if finals:
        return finals.pop() if len(finals) == 1 else None
    digits = {int(m) for m in _DIGIT.findall(text)}
    if len(digits) != 1:
        return None
    grade = digits.pop()
    return grade if grade <= 3 else None
