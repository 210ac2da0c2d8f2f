"""Evidence spans in golden suites: chunk extents, drift (re-anchor a moved span, refuse a
changed one) through `rageval validate`, and `rageval spans convert` on the shipped suites."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval_pipeline.cli import main
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.suites.chunking import ChunkingConfig, split_text
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.core.suites.loaders import load_part, span_moves, suite_spans, suite_tables
from rageval_pipeline.core.suites.spans import chunk_extents

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "spans"
# Three sections under markdown_headers; the suite judges the second and third as spans.
GUIDE = (
    "# Guide\n\nIntro line.\n\n"
    "## Tokens\r\nTokens expire after one hour.\r\n\n"
    "## Limits\nEach key may send 60 requests a minute.\n"
)
CONFIGS = [
    ChunkingConfig(strategy="document"),
    ChunkingConfig(strategy="paragraph"),
    ChunkingConfig(strategy="markdown_headers"),
    ChunkingConfig(strategy="fixed", size=3, overlap=1),
    ChunkingConfig(strategy="fixed", size=2, overlap=0),
]
PIECES = [*"ab #`\n\r\t\x0b\x0c\x1c\x85\u2028", "# ", "```", "\r\n", "\n\n", "## h\n"]


def _normalised(piece: str, config: ChunkingConfig) -> str:
    """An extent's text as the strategy writes its chunk (tokens or lines rejoined)."""
    if config.strategy == "fixed":
        return " ".join(piece.split())
    if config.strategy == "markdown_headers":
        return "\n".join(piece.splitlines())
    return piece


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_chunk_extents_are_the_excerpts_split_text_makes_its_chunks_of(text):
    for config in CONFIGS:
        extents = chunk_extents(text, config)
        texts = [_normalised(text[start:end], config) for start, end in extents]
        assert texts == split_text(text, config), config


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _span(text: str, excerpt: str, grade: int, **extra) -> dict:
    start = text.index(excerpt)
    end = start + len(excerpt)
    return {
        "doc": "guide",
        "start": start,
        "end": end,
        "grade": grade,
        **extra,
        "sha256": _sha(excerpt),
    }


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    """A suite folder whose document is a real file, judged by two spans."""
    folder = tmp_path / "spansuite"
    (folder / "documents").mkdir(parents=True)
    (folder / "documents" / "guide.md").write_bytes(GUIDE.encode("utf-8"))
    tokens = "## Tokens\r\nTokens expire after one hour."
    limits = "## Limits\nEach key may send 60 requests a minute."
    suite = {
        "version": "1.0",
        "name": "spansuite",
        "description": "spans",
        "created_at": "2026-11-26",
        "chunking": {"strategy": "markdown_headers"},
        "documents": [
            {
                "id": "guide",
                "type": "knowledge_artifact",
                "format": "markdown",
                "title": "Guide",
                "content_path": "documents/guide.md",
            }
        ],
        "queries": [
            {
                "id": "Q1",
                "query": "When do tokens expire?",
                "intent": "factual",
                "spans": [
                    _span(GUIDE, tokens, 3, primary=True),
                    _span(GUIDE, limits, 1),
                ],
            }
        ],
    }
    (folder / "suite.json").write_text(json.dumps(suite, indent=2) + "\n", encoding="utf-8")
    return folder


def _edit(folder: Path, old: str, new: str) -> None:
    path = folder / "documents" / "guide.md"
    text = path.read_bytes().decode("utf-8")
    path.write_bytes(text.replace(old, new, 1).encode("utf-8"))


def test_spans_are_the_reference_chunks_they_cover(suite_dir):
    suite = load_suite(suite_dir)
    tables = suite_tables(suite)
    assert tables.qrels[["doc_id", "relevance", "level"]].values.tolist() == [
        ["guide:chunk:1", 3, "chunk"],
        ["guide:chunk:2", 1, "chunk"],
    ]
    assert json.loads(tables.queries["metadata"][0])["primary"] == "guide:chunk:1"
    spans = load_part(suite_dir, "spans", dataset="spansuite")
    assert spans["start"].tolist() == [GUIDE.index("## Tokens"), GUIDE.index("## Limits")]
    assert [_sha(GUIDE[s:e]) for s, e in zip(spans["start"], spans["end"], strict=True)] == spans[
        "sha256"
    ].tolist()


def test_a_moved_span_is_re_anchored_and_reported(suite_dir, capsys):
    _edit(suite_dir, "Intro line.", "A longer introduction, added since the judging.")
    assert main(["validate", str(suite_dir)]) == 0
    out, err = capsys.readouterr()
    assert out == f"ok: {suite_dir} (1 documents, 1 queries, 2 judgments)\n"
    assert err == (
        f"note: {suite_dir}: queries[0].spans[0]: query Q1, document 'guide', span 22-62 "
        "moved to 58-98 (`rageval spans convert` writes it)\n"
        f"note: {suite_dir}: queries[0].spans[1]: query Q1, document 'guide', span 65-114 "
        "moved to 101-150 (`rageval spans convert` writes it)\n"
    )
    spans = load_part(suite_dir, "spans", dataset="spansuite")  # what ingestion stores
    assert spans[["start", "end"]].values.tolist() == [[58, 98], [101, 150]]
    assert span_moves(suite_dir)[0] == (
        "queries[0].spans[0]: query Q1, document 'guide', span 22-62 moved to 58-98"
    )
    assert suite_tables(load_suite(suite_dir)).qrels["doc_id"].tolist() == [
        "guide:chunk:1",
        "guide:chunk:2",
    ]
    # Writing the new offsets ends the notes.
    assert main(["spans", "convert", str(suite_dir)]) == 0
    assert capsys.readouterr().out.endswith(", 2 moved spans re-anchored\n")
    assert main(["validate", str(suite_dir)]) == 0
    assert capsys.readouterr().err == ""


def test_an_edit_elsewhere_in_the_document_is_accepted(suite_dir, capsys):
    _edit(suite_dir, "a minute.\n", "a minute.\n\nA closing line added later.\n")
    assert main(["validate", str(suite_dir)]) == 0
    assert capsys.readouterr().err == ""
    # The line joined the judged span's own section: the span still grades that chunk.
    qrels = suite_tables(load_suite(suite_dir)).qrels
    assert qrels["doc_id"].tolist() == ["guide:chunk:1", "guide:chunk:2"]


def test_a_changed_span_is_refused_in_one_line(suite_dir, capsys):
    _edit(suite_dir, "one hour", "two hours")
    assert main(["validate", str(suite_dir)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"error: {suite_dir / 'suite.json'}:24: queries[0].spans[0]: query Q1, document "
        "'guide', span 22-62: the judged text changed (its SHA-256 matches nowhere in the "
        "document)\n"
    )
    with pytest.raises(InputError, match="span 22-62: the judged text changed"):
        load_part(suite_dir, "qrels", dataset="spansuite")  # ingestion stops too


def test_a_span_whose_text_is_now_twice_in_the_document_is_refused(suite_dir, capsys):
    _edit(suite_dir, "Intro line.", "Tokens expire after one hour.")
    _edit(suite_dir, "## Tokens", "## Tokens\r\nTokens expire after one hour.\n\n## Tokens")
    assert main(["validate", str(suite_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "queries[0].spans[0]: query Q1, document 'guide', span 22-62: the judged text is " in err
    assert "now at 2 places (40-80, 82-122); re-judge it" in err


def test_a_span_inside_a_chunk_grades_that_chunk(suite_dir):
    raw = json.loads((suite_dir / "suite.json").read_text())
    raw["queries"][0]["spans"][1] = _span(GUIDE, "Each key may send 60 requests", 1)
    (suite_dir / "suite.json").write_text(json.dumps(raw), encoding="utf-8")
    qrels = suite_tables(load_suite(suite_dir)).qrels
    assert qrels["doc_id"].tolist() == ["guide:chunk:1", "guide:chunk:2"]


def _chunk_id_suite(folder: Path) -> None:
    """techdocs with its round-1 judgments (issue 11) as they were written: chunk ids."""
    path = folder / "suite.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    old = json.loads((FIXTURES / "techdocs-chunk-judgments.json").read_text())
    raw["queries"] = [q for q in raw["queries"] if q["id"] in old]  # not those written later
    for query in raw["queries"]:
        items = list(query.items())
        keys = [key for key, _ in items]
        at = keys.index("spans") if "spans" in keys else len(items)
        query.clear()
        query.update(items[:at] + list(old[items[0][1]].items()) + items[at + 1 :])
    path.write_text(json.dumps(raw, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def test_converting_chunk_id_judgments_keeps_the_tables(tmp_path, capsys):
    """Round trip: techdocs' round-1 chunk-id judgments, converted by the CLI, are spans that
    give exactly the same qrels and queries under the reference chunking, each span its
    reference chunk's extent."""
    folder = Path(shutil.copytree(ROOT / "data" / "suites" / "techdocs", tmp_path / "techdocs"))
    _chunk_id_suite(folder)
    chunk_ids = load_suite(folder)
    before = suite_tables(chunk_ids)
    assert main(["spans", "convert", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{folder / 'suite.json'}: ")
    converted = json.loads((folder / "suite.json").read_text(encoding="utf-8"))
    assert all("judgments" not in q for q in converted["queries"])
    after = suite_tables(load_suite(folder))
    for table in ("corpus", "queries", "qrels"):
        assert getattr(after, table).equals(getattr(before, table)), table
    # A chunk-id judgment's span is its reference chunk's: what the conversion writes.
    assert suite_spans(load_suite(folder)).equals(suite_spans(chunk_ids))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda q: q["spans"].append(dict(q["spans"][0], grade=1, primary=False)),
            "queries[0].spans[2]: repeats the excerpt of spans[0]: give it one grade",
        ),
        (
            lambda q: q["spans"][1].update(primary=True),
            "queries[0].spans: 2 spans are marked primary: mark exactly one",
        ),
        (
            lambda q: q["spans"][0].update(end=q["spans"][0]["start"]),
            "queries[0].spans[0].end: must be greater than start (22)",
        ),
        (
            lambda q: q.update(judgments={"guide": 1}),
            "queries[0].spans: give judgments or spans, not both",
        ),
        (
            lambda q: q["spans"][0].update(doc="manual"),
            "queries[0].spans[0]: query Q1, document 'manual', span 22-62: unknown target",
        ),
    ],
)
def test_span_rules_are_one_line(suite_dir, capsys, change, message):
    path = suite_dir / "suite.json"
    raw = json.loads(path.read_text())
    change(raw["queries"][0])
    path.write_text(json.dumps(raw, indent=2), encoding="utf-8")
    assert main(["validate", str(suite_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
