"""Reading a model's output: a TRUE/FALSE verdict or a 0-3 grade, or `unparseable`.

Where the provider supports it the answer is structured (`VERDICT`, `GRADE`: a JSON schema
sent as OpenAI `response_format`, Ollama `format`, or an Anthropic tool the model must call),
so the reply is a JSON object. Whatever the provider, only a clean reply parses:

- a JSON object holding exactly the one field (`{"verdict": "TRUE"}`, `{"grade": 2}`), or
- exactly the token, once whitespace, markdown emphasis and closing punctuation are trimmed
  (`TRUE`, `**False.**`, `3`, `##final score: 2`), or
- for a grade, the reply the relevance prompt asks for: its step scores `M: 2` and `T: 3` (and
  `O: 2`), one per line or separated by `,`/`;`, and exactly one `##final score: 2`.

Everything else (a sentence around the token, a negation, both verdicts, a duplicated JSON key,
a grade among other numbers) is `unparseable`: counted, reported and never TRUE.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Verdict = Literal["TRUE", "FALSE", "unparseable"]

# Trimmed from both ends of a plain reply: whitespace, markdown emphasis/code marks and
# punctuation that closes a statement. Not "?" ("TRUE?" is a question) nor quotes.
_TRIM = " \t\r\n*_`~.!,;:"
_GRADE = re.compile(r"(?:#*\s*final\s+score\s*:\s*)?([0-3])", re.IGNORECASE)
_FINAL = re.compile(r"#*\s*final\s+score\s*:\s*([0-3])", re.IGNORECASE)
_STEP = re.compile(r"#*\s*\(?[MTO]\)?\s*[:=]\s*[0-3]", re.IGNORECASE)  # prompts.RELEVANCE's steps
_PARTS = re.compile(r"[\n;,]")


class Structured(BaseModel):
    """The one-field JSON object a request asks for when the provider can enforce it."""

    model_config = ConfigDict(frozen=True)

    name: str  # the JSON schema's name; the Anthropic tool's name
    field: str
    values: tuple[str, ...] | tuple[int, ...]
    instruction: str  # appended to the prompt where the model is only asked for JSON

    def schema(self) -> dict[str, Any]:
        kind = "string" if isinstance(self.values[0], str) else "integer"
        return {
            "type": "object",
            "properties": {self.field: {"type": kind, "enum": list(self.values)}},
            "required": [self.field],
            "additionalProperties": False,
        }


VERDICT = Structured(
    name="record_verdict",
    field="verdict",
    values=("TRUE", "FALSE"),
    instruction='Reply with a JSON object only: {"verdict": "TRUE"} or {"verdict": "FALSE"}.',
)
GRADE = Structured(
    name="record_grade",
    field="grade",
    values=(0, 1, 2, 3),
    instruction='Reply with a JSON object only: {"grade": N}, N being the final score (0-3).',
)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):  # json.loads would keep the last: {"v": "FALSE", "v": "TRUE"}
        raise ValueError("duplicate key")
    return dict(pairs)


def _json_field(text: str, field: str) -> tuple[bool, Any]:
    """(is a JSON object, the value of `field` when the object holds exactly that field)."""
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError:
        return False, None
    if not isinstance(data, dict):  # `true`, `3` and `"TRUE"` are JSON too: read as tokens
        return False, None
    return True, data[field] if list(data) == [field] else None


def parse_verdict(text: str) -> Verdict:
    """TRUE or FALSE for a clean reply (module docstring), else `unparseable`."""
    is_json, value = _json_field(text, VERDICT.field)
    if not is_json:
        value = text.strip(_TRIM)
    if isinstance(value, str) and value.upper() in VERDICT.values:
        return "TRUE" if value.upper() == "TRUE" else "FALSE"
    return "unparseable"


def parse_grade(text: str) -> int | None:
    """The 0-3 grade of a clean reply (module docstring), else None (unparseable)."""
    is_json, value = _json_field(text, GRADE.field)
    if is_json:  # bool is an int in Python: {"grade": true} is not a grade
        return value if type(value) is int and value in GRADE.values else None
    match = _GRADE.fullmatch(text.strip(_TRIM))
    if match:
        return int(match.group(1))
    parts = [p.strip(_TRIM) for p in _PARTS.split(text) if p.strip(_TRIM)]
    finals = [m for p in parts if (m := _FINAL.fullmatch(p))]
    steps = [p for p in parts if _STEP.fullmatch(p)]
    if len(finals) == 1 and len(steps) == len(parts) - 1:
        return int(finals[0].group(1))
    return None
