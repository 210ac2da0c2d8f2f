"""A scripted LLM for the synthetic-query and LLM-label tests: replies decided by the prompt's
content alone, so every run is identical and a cache hit is checkable.

- a query-writing prompt gets a query made of the passage's first distinctive words;
- a relevance prompt gets `{"grade": N}` from the share of the query's words found in the
  passage (>= 0.6: 3, >= 0.4: 2, >= 0.2: 1, else 0); a query holding "webhook" gets prose
  around the grade instead, which the strict reader must count as unparseable.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z][a-z0-9_-]{3,}")
STOP = {"this", "that", "with", "from", "when", "your", "each", "what", "which", "will", "have"}


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOP]


def _between(prompt: str, start: str, end: str) -> str:
    return prompt.split(start, 1)[1].split(end, 1)[0]


def reply(prompt: str) -> str | dict:
    if "Write one search query" in prompt:
        passage = _between(prompt, "Passage: ", "\n\nWrite one search query")
        distinct = list(dict.fromkeys(words(passage)))[:6]
        return "how " + " ".join(distinct)
    if "##final score" in prompt:
        query = _between(prompt, "Query: ", "\nPassage: ")
        passage = set(words(_between(prompt, "\nPassage: ", "\n\nSplit this problem")))
        asked = words(query)
        share = sum(w in passage for w in asked) / max(len(asked), 1)
        grade = 3 if share >= 0.6 else 2 if share >= 0.4 else 1 if share >= 0.2 else 0
        if "webhook" in query.lower():
            return f"I would say {grade}, maybe"
        return {"grade": grade}
    return "unexpected prompt"
