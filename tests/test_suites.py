import copy
import datetime
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import tables
from rageval_pipeline.core.suites.chunking import chunk_corpus
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.core.suites.loaders import suite_tables
from rageval_pipeline.core.suites.schema import suite_json_schema

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "suites"
TINY = FIXTURES / "tiny"
MALFORMED = FIXTURES / "malformed"

# A one-document, one-query suite; the rule tests below break one thing at a time.
BASE = {
    "version": "1.0",
    "name": "base",
    "description": "minimal",
    "created_at": "2026-11-22",
    "documents": [
        {
            "id": "guide",
            "type": "knowledge_artifact",
            "format": "plain",
            "title": "Guide",
            "content": "Tokens expire after one hour.",
        }
    ],
    "queries": [
        {
            "id": "Q1",
            "query": "When do tokens expire?",
            "intent": "factual",
            "judgments": {"guide": 3},
            "primary": "guide",
        }
    ],
}


def problem(path: Path) -> str:
    with pytest.raises(InputError) as error:
        load_suite(path)
    return str(error.value)


def write(tmp_path: Path, suite: dict, name: str = "case.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(suite), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing_query.json", "queries[0].query: field required"),
        ("missing_intent.json", "queries[1].intent: field required"),
        (
            "grade_not_integer.json",
            'queries[0].judgments["guide"]: grade must be 0, 1, 2 or 3 (got "high")',
        ),
        (
            "difficulty_not_a_level.json",
            "queries[0].difficulty: must be 'easy', 'medium' or 'hard' (got 7)",
        ),
        (
            "unknown_document_target.json",
            "queries[0].judgments[\"guid\"]: unknown target 'guid': no document id equals it",
        ),
        (
            "unknown_chunk_target.json",
            "queries[0].judgments[\"guide:chunk:2\"]: unknown chunk 'guide:chunk:2': document "
            "'guide' has 2 chunk(s), numbered 0 to 1, under the reference chunking",
        ),
        (
            "duplicate_document_id.json",
            "documents[1].id: duplicate id 'guide' (first at documents[0])",
        ),
        ("duplicate_query_id.json", "queries[1].id: duplicate id 'Q1' (first at queries[0])"),
        (
            "grade_out_of_range.json",
            'queries[0].judgments["guide"]: grade must be 0, 1, 2 or 3 (got 4)',
        ),
        (
            "unknown_version.json",
            'version: unknown suite format version "2.0" (known: "1.0", "1.1")',
        ),
        ("no_documents.json", "documents: must not be empty"),
        (
            "primary_not_top_graded.json",
            "queries[0].primary: 'guide' has grade 2, but the highest grade in judgments is 3",
        ),
        (
            "missing_primary.json",
            "queries[0].primary: field required when a target has grade >= 1",
        ),
        (
            "content_and_content_path.json",
            "documents[0]: give exactly one of content and content_path (both given)",
        ),
        (
            "no_content.json",
            "documents[0]: give exactly one of content and content_path (neither given)",
        ),
        (
            "content_path_missing.json",
            'documents[0].content_path: no such file (got "documents/guide.md")',
        ),
        (
            "mixed_levels.json",
            "queries[0].judgments: mixes document and chunk targets; use one level",
        ),
        (
            "reference_chunking.json",
            "chunking: a suite's chunking is the reference itself: name a concrete strategy "
            '(got {"strategy": "reference"})',
        ),
        ("invalid_json.json", "invalid JSON (column 3): Expecting ',' delimiter"),
        (
            "duplicate_judgment.yaml",
            'queries[0].judgments: duplicate key "guide" (first on line 17)',
        ),
    ],
)
def test_malformed_fixture_fails_with_exact_message(case, expected):
    path = MALFORMED / case
    assert problem(path) == f"{path}:{FIXTURE_LINES[case]}: {expected}"


# The line of the offending key (or of the object that lacks one) in each malformed fixture.
FIXTURE_LINES = {
    "missing_query.json": 16,
    "missing_intent.json": 32,
    "grade_not_integer.json": 21,
    "difficulty_not_a_level.json": 24,
    "unknown_document_target.json": 22,
    "unknown_chunk_target.json": 25,
    "duplicate_document_id.json": 15,
    "duplicate_query_id.json": 33,
    "grade_out_of_range.json": 21,
    "unknown_version.json": 2,
    "no_documents.json": 6,
    "primary_not_top_graded.json": 31,
    "missing_primary.json": 16,
    "content_and_content_path.json": 7,
    "no_content.json": 7,
    "content_path_missing.json": 12,
    "mixed_levels.json": 27,
    "reference_chunking.json": 7,
    "invalid_json.json": 4,
    "duplicate_judgment.yaml": 18,
}


def edit(change):
    suite = copy.deepcopy(BASE)
    change(suite)
    return suite


def doc(suite):
    return suite["documents"][0]


def query(suite):
    return suite["queries"][0]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda s: s.update(version=1.0),
            'version: unknown suite format version 1.0 (known: "1.0", "1.1")',
        ),
        (lambda s: s.pop("version"), "version: field required"),
        (lambda s: s.update(extra=1), "extra: unknown field"),
        (lambda s: query(s).update(judgement={}), "queries[0].judgement: unknown field"),
        (
            lambda s: query(s).update(id="Q 1"),
            "queries[0].id: must match pattern '^\\S+$' (got \"Q 1\")",
        ),
        (
            lambda s: doc(s).update(id="guide:chunk:0"),
            "documents[0].id: a document id must not end in ':chunk:<n>' (that names a chunk) "
            '(got "guide:chunk:0")',
        ),
        (
            lambda s: doc(s).update(metadata={"type": "x"}),
            'documents[0].metadata["type"]: reserved key: it is a document field, set it there',
        ),
        (
            lambda s: doc(s).update(content={"a": 1}),
            "documents[0].content: an object or array needs format json",
        ),
        (
            lambda s: doc(s).update(format="json"),
            "documents[0].content: format json but not valid JSON: "
            "Expecting value: line 1 column 1 (char 0)",
        ),
        (lambda s: doc(s).update(content=" \n"), "documents[0].content: document text is empty"),
        (
            lambda s: query(s).update(query=" "),
            "queries[0].query: must not be empty unless query_type is edge",
        ),
        (
            lambda s: query(s).update(judgments={"guide": 0}, primary=None),
            "queries[0].judgments: needs a target with grade >= 1 unless query_type is edge",
        ),
        (
            lambda s: query(s).update(query_type="edge", judgments={"guide": 0}),
            "queries[0].primary: must be absent when no target has grade >= 1",
        ),
        (
            lambda s: query(s).update(primary="faq"),
            "queries[0].primary: 'faq' is not a target in judgments",
        ),
        (
            lambda s: query(s).update(top_1_chunk="guide"),
            "queries[0].top_1_chunk: must be a chunk id '<document>:chunk:<n>'",
        ),
        (
            lambda s: query(s).update(top_1_chunk="guide:chunk:1"),
            "queries[0].top_1_chunk: unknown chunk 'guide:chunk:1': document 'guide' has 1 "
            "chunk(s), numbered 0 to 0, under the reference chunking",
        ),
        (
            lambda s: s.update(created_at="22/11/2026"),
            "created_at: must be a valid date or datetime, invalid character in year "
            '(got "22/11/2026")',
        ),
        (
            lambda s: s.update(chunking={"strategy": "fixed", "size": 4, "overlap": 4}),
            "chunking: overlap (4) must be smaller than size (4) "
            '(got {"strategy": "fixed", "size": 4, "overlap": 4})',
        ),
        # Several problems: the first in file order wins, whatever the models' field order.
        (
            lambda s: (
                doc(s).update(type="manual"),
                query(s).pop("intent"),
                s.update(documents=s.pop("documents")),  # now after "queries" in the file
            ),
            "queries[0].intent: field required",
        ),
        (
            lambda s: s.update(queries=[{"judgments": {"guide": 5}, "id": 1}]),
            'queries[0].judgments["guide"]: grade must be 0, 1, 2 or 3 (got 5)',
        ),
    ],
)
def test_rule_fails_with_exact_message(tmp_path, change, expected):
    path = write(tmp_path, edit(change))  # one line of JSON
    assert problem(path) == f"{path}:1: {expected}"


def test_suffix_matching_and_targets_naming_one_document_twice(tmp_path):
    def code(doc_id):
        return {
            "id": doc_id,
            "type": "knowledge_artifact",
            "format": "plain",
            "title": doc_id,
            "content": f"fn {doc_id}() {{}}",
        }

    suite = edit(
        lambda s: s.update(match="suffix", documents=[code("src/a.rs"), code("src/data.rs")])
    )
    query(suite).update(judgments={"a.rs": 3, "data.rs": 1}, primary="a.rs")
    tables_ = suite_tables(load_suite(write(tmp_path, suite)))
    assert tables_.qrels["doc_id"].tolist() == ["src/a.rs", "src/data.rs"]
    assert json.loads(tables_.queries["metadata"][0])["primary"] == "src/a.rs"

    query(suite).update(judgments={"a.rs": 3, "src/a.rs": 1})
    path = write(tmp_path, suite)
    assert problem(path) == (
        f"{path}:1: queries[0].judgments[\"src/a.rs\"]: names 'src/a.rs', already judged as 'a.rs'"
    )

    query(suite).update(judgments={"a.rs": 3})
    suite["match"] = "exact"
    path = write(tmp_path, suite)
    assert problem(path) == (
        f"{path}:1: queries[0].judgments[\"a.rs\"]: unknown target 'a.rs': no document id equals it"
    )


def test_json_duplicate_key(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text('{"version": "1.0",\n "version": "1.0"}', encoding="utf-8")
    assert problem(path) == f'{path}:2: duplicate key "version" (first on line 1)'


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("", None, ": no suite file in this folder (looked for suite.json, suite.yaml, suite.yml)"),
        ("missing.json", None, ": no such file"),
        ("suite.txt", "{}", ': unknown file type ".txt": expected one of .json, .yaml, .yml'),
        ("list.json", "[]", ":1: the top level must be an object"),
        ("both", None, ": holds both suite.json and suite.yaml; keep one"),
    ],
)
def test_bad_paths(tmp_path, name, text, expected):
    path = tmp_path / name
    if text is not None:
        path.write_text(text, encoding="utf-8")
    if name == "both":
        path.mkdir()
        (path / "suite.json").write_text("{}", encoding="utf-8")
        (path / "suite.yaml").write_text("{}", encoding="utf-8")
    assert problem(path) == f"{path}{expected}"


def test_suite_name_must_be_its_folder(tmp_path):
    folder = tmp_path / "other"
    shutil.copytree(TINY, folder)
    assert problem(folder) == (
        f"{folder / 'suite.json'}:4: name: "
        "must equal the suite's folder name 'other' (got \"tiny\")"
    )


def test_tiny_suite_tables():
    suite = load_suite(TINY)
    corpus, queries, qrels = suite_tables(suite)

    assert list(corpus.columns) == tables.CORPUS.names
    assert corpus["doc_id"].tolist() == ["auth-guide", "faq", "limits"]
    assert corpus["url"].tolist() == ["https://docs.example.com/auth", "", ""]
    assert corpus["text"][0] == (TINY / "documents" / "auth-guide.md").read_text()
    assert corpus["text"][2] == '{\n  "burst": 10,\n  "per_minute": 60\n}'
    assert json.loads(corpus["metadata"][0]) == {
        "category": "security",
        "type": "knowledge_artifact",
        "format": "markdown",
        "tags": ["oauth", "security"],
    }

    assert list(queries.columns) == tables.QUERIES.names
    assert queries["query_id"].tolist() == ["Q001", "Q002", "Q003"]
    assert queries["query_type"].tolist() == ["specific", "specific", "edge"]
    assert queries["difficulty"].tolist()[0] == "easy"
    assert pd.isna(queries["difficulty"][1])
    assert json.loads(queries["metadata"][0]) == {
        "description": "Step-by-step OAuth setup",
        "primary": "auth-guide:chunk:1",
        "top_1_chunk": "auth-guide:chunk:1",
    }

    assert list(qrels.columns) == tables.QRELS.names
    assert qrels.to_dict("records") == [
        dict(
            split="test", query_id="Q001", doc_id="auth-guide:chunk:1", relevance=3, level="chunk"
        ),
        dict(
            split="test", query_id="Q001", doc_id="auth-guide:chunk:0", relevance=1, level="chunk"
        ),
        dict(split="test", query_id="Q001", doc_id="faq:chunk:0", relevance=0, level="chunk"),
        dict(split="test", query_id="Q002", doc_id="limits", relevance=2, level="document"),
        dict(split="test", query_id="Q002", doc_id="faq", relevance=0, level="document"),
    ]
    # Chunk targets name the chunks the pipeline itself makes under the reference chunking.
    chunks = chunk_corpus(corpus, suite.chunking, ingested_at="2026-11-22T00:00:00Z")
    assert set(qrels.loc[qrels["level"] == "chunk", "doc_id"]) <= set(chunks["chunk_id"])


def test_same_suite_gives_identical_tables():
    first, second = suite_tables(load_suite(TINY)), suite_tables(load_suite(TINY / "suite.json"))
    for a, b in zip(first, second, strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_yaml_suite_equals_json_suite(tmp_path):
    folder = tmp_path / "tiny"
    shutil.copytree(TINY, folder)
    data = json.loads((folder / "suite.json").read_text())
    data["created_at"] = datetime.date(2026, 11, 22)  # YAML's unquoted date
    (folder / "suite.json").unlink()
    (folder / "suite.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    for a, b in zip(suite_tables(load_suite(folder)), suite_tables(load_suite(TINY)), strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_committed_json_schema_is_generated_from_the_models():
    # When the models change, regenerate the committed schema with
    #   python -m rageval_pipeline.core.suites.schema --schema > data/suites/suite.schema.json
    committed = json.loads((ROOT / "data" / "suites" / "suite.schema.json").read_text())
    assert committed == suite_json_schema()


# ----------------------------------------------------------------------------------- confinement


def suite_naming(tmp_path: Path, content_path: str) -> Path:
    """A suite folder (with a legitimate documents/guide.md) whose document reads content_path."""
    folder = tmp_path / "base"
    (folder / "documents").mkdir(parents=True, exist_ok=True)
    (folder / "documents" / "guide.md").write_text("Tokens expire after one hour.")
    (tmp_path / "secret.md").write_text("outside the suite")
    suite = edit(lambda s: doc(s).pop("content"))
    doc(suite)["content_path"] = content_path
    return write(folder, suite, "suite.json")


def confinement_problem(tmp_path: Path, content_path: str) -> str:
    path = suite_naming(tmp_path, content_path)
    return problem(path).removeprefix(f"{path}:1: documents[0].content_path: ")


@pytest.mark.parametrize(
    "content_path",
    [
        "../secret.md",
        "documents/../../secret.md",
        "../../../../../../../../proc/self/environ",
        "./../base/../secret.md",
    ],
)
def test_content_path_cannot_climb_out_of_the_suite_folder(tmp_path, content_path):
    assert confinement_problem(tmp_path, content_path) == (
        f"leaves the file's folder through '..' (got {json.dumps(content_path)})"
    )


@pytest.mark.parametrize("content_path", ["/etc/passwd", "/proc/self/environ", "\\\\host\\share"])
def test_content_path_cannot_be_absolute(tmp_path, content_path):
    assert confinement_problem(tmp_path, content_path) == (
        "must be a path relative to the file's folder, not absolute "
        f"(got {json.dumps(content_path)})"
    )


def test_an_absolute_path_inside_the_folder_is_refused_too(tmp_path):
    inside = str(tmp_path / "base" / "documents" / "guide.md")
    assert confinement_problem(tmp_path, inside) == (
        f"must be a path relative to the file's folder, not absolute (got {json.dumps(inside)})"
    )


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("documents/leak.md", "../../secret.md"),  # relative symlink out
        ("documents/environ.md", "/proc/self/environ"),
        ("documents/passwd.md", "/etc/passwd"),
        ("outside/secret.md", None),  # a symlinked folder pointing out
    ],
)
def test_content_path_cannot_follow_a_symlink_out(tmp_path, link, target):
    path = suite_naming(tmp_path, link)
    source = path.parent / link
    if target is None:
        source.parent.symlink_to(tmp_path, target_is_directory=True)
    else:
        source.symlink_to(target)
    assert problem(path) == (
        f"{path}:1: documents[0].content_path: is a symlink to a file outside the file's folder, "
        f"{source.resolve()} (got {json.dumps(link)})"
    )


def test_a_symlink_inside_the_folder_is_followed(tmp_path):
    path = suite_naming(tmp_path, "documents/alias.md")
    (path.parent / "documents" / "alias.md").symlink_to("guide.md")
    assert load_suite(path).documents[0].text == "Tokens expire after one hour."


@pytest.mark.parametrize(
    ("name", "make", "kind"),
    [
        ("documents/pipe.md", os.mkfifo, "a FIFO"),
        ("documents/sub", os.mkdir, "a folder"),
        ("documents", None, "a folder"),
    ],
)
def test_content_path_must_be_a_regular_file(tmp_path, name, make, kind):
    path = suite_naming(tmp_path, name)
    if make is not None:
        make(path.parent / name)
    assert problem(path) == (
        f"{path}:1: documents[0].content_path: is {kind}, not a regular file "
        f"(got {json.dumps(name)})"
    )


def test_a_suite_is_parsed_once_while_its_files_keep_their_size_and_time(tmp_path):
    folder = tmp_path / "base"
    folder.mkdir()
    (folder / "guide.md").write_text("Tokens expire after one hour.", encoding="utf-8")
    guide = {k: v for k, v in BASE["documents"][0].items() if k != "content"}
    path = write(folder, BASE | {"documents": [guide | {"content_path": "guide.md"}]}, "suite.json")
    assert load_suite(folder) is not load_suite(folder)  # just written: parsed every time

    def settle():  # written two seconds ago, as a committed suite's files are
        for file in folder.iterdir():
            os.utime(file, (file.stat().st_atime, file.stat().st_mtime - 2))

    settle()
    first = load_suite(folder)
    assert load_suite(path) is first and first.documents[0].text.startswith("Tokens")
    (folder / "guide.md").write_text("Tokens expire after two hours.", encoding="utf-8")
    settle()
    assert load_suite(folder).documents[0].text == "Tokens expire after two hours."
    path.write_text(path.read_text(encoding="utf-8").replace('"Q1"', '"Q2"'), encoding="utf-8")
    settle()  # the same size: the modification time tells
    assert load_suite(folder).queries[0].id == "Q2"
    path.write_text("{", encoding="utf-8")
    assert "suite.json" in problem(folder)  # a broken edit is an error, never the old suite
