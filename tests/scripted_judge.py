"""A scripted LLM for the synthetic-query and LLM-label tests: replies decided by the prompt's
content alone, so every run is identical and a cache hit is checkable.

- a query-writing prompt gets a query made of the passage's first distinctive words;
- a relevance prompt gets `{"grade": N}` from the share of the query's words found in the
  passage (>= 0.6: 3, >= 0.4: 2, >= 0.2: 1, else 0); a query holding "webhook" gets prose
  around the grade instead, which the strict reader must count as unparseable.

`grade_like_a_human` fills a judging sheet the way a person would, by another rule.
"""

from __future__ import annotations

import json
import re

from rageval_pipeline.core.settings.providers import SWITCHES
from tests.llm_servers import FakeLLM

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


def grade_like_a_human(sheet) -> None:
    """Fill the sheet's grades the way a (scripted) person would: from the share of the
    query's words in the passage, with other cut-offs than the LLM's."""
    rows = [json.loads(line) for line in sheet.open()]
    for row in rows:
        asked, passage = words(row["query"]), set(words(row["target_text"]))
        share = sum(w in passage for w in asked) / max(len(asked), 1)
        row["grade"] = 3 if share >= 0.7 else 2 if share >= 0.5 else 1 if share >= 0.25 else 0
    sheet.write_text("".join(json.dumps(r) + "\n" for r in rows))


def serve(monkeypatch) -> FakeLLM:
    """The scripted judge behind a local OpenAI-compatible server, and the environment that
    points the project's models at it alone (every other provider switch unset). The caller
    stops it."""
    fake = FakeLLM("openai", reply=reply).start()
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGEVAL_PROVIDER", "openai")
    monkeypatch.setenv("RAGEVAL_OPENAI_BASE_URL", fake.url + "/v1")
    monkeypatch.setenv("RAGEVAL_OPENAI_MODEL", "fake-1")
    return fake
