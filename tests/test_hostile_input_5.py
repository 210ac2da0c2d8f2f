"""Hostile input, round 5: the input classes, through the real CLI and the core readers.

Classes: nothing is read from outside a folder a user gives (`suite init`'s walker, links,
special files, which are refused before any open wherever a user file is read); every reader
is bounded in bytes, items and time (gzip, run and qrels files, sheets, HTML, PDF, folders,
settings); one reading of a judging sheet; lines that name the user's file, escaped, and one
line instead of a traceback. Limits are set small through their variables, never by writing
gigabytes (the measured costs at the default limits are in docs/limits.md).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import signal
import tracemalloc
import zlib
from pathlib import Path

import pytest

from rageval_pipeline.cli import main
from rageval_pipeline.core.curation import judging, readings, sheets
from rageval_pipeline.core.errors import InputError, printable
from rageval_pipeline.core.generation import labelling, labels
from rageval_pipeline.core.io import walk
from rageval_pipeline.core.io.bounds import input_bytes
from rageval_pipeline.core.io.config import load_model
from rageval_pipeline.core.io.formats import read_qrels, read_run
from rageval_pipeline.core.settings import limits, locations, providers
from rageval_pipeline.core.settings.base import EnvGroup
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.core.suites.sources import html_to_markdown, pdf_to_markdown

POOL = Path(__file__).parent / "fixtures" / "pool" / "poolsuite"
SHEET_HEADER = "query_id,query,target_id,target_text,systems,best_rank,grade\n"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "guide").mkdir(parents=True)
    (folder / "guide" / "install.md").write_text("# Install\n\nRun the installer.\n")
    (folder / "faq.txt").write_text("Tokens expire after one hour.\n")
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "keys.md").write_text("# Keys\n\nAPI_KEY=do-not-copy\n")
    return secret


def _init(docs: Path, data: Path, *extra: str, name: str = "mine") -> int:
    return main(["suite", "init", str(docs), "--name", name, "--data", str(data), *extra])


def _written(data: Path) -> list[Path]:
    return sorted(data.rglob("*")) if data.exists() else []


def _alarm(seconds: int):
    """Fail instead of hanging when an open blocks (a FIFO opened for reading waits)."""

    def ring(*_):
        raise AssertionError(f"still blocked after {seconds} s")

    signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)


# --- Confinement -------------------------------------------------------------------------


@pytest.mark.parametrize("link", ["file", "folder", "environ", "dangling"])
def test_suite_init_refuses_a_link_out_of_the_folder_and_writes_nothing(
    docs, outside, tmp_path, capsys, link
):
    target = {
        "file": outside / "keys.md",
        "folder": outside,
        "environ": Path("/proc/self/environ"),
        "dangling": outside / "gone.md",
    }[link]
    (docs / "guide" / "keys.md").symlink_to(target)
    data = tmp_path / "data"
    assert _init(docs, data) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: {docs}/guide/keys.md: is a symlink to {target}, outside {docs}: refused "
        "(nothing is read from outside the folder; --follow-links reads it)\n"
    )
    assert _written(data) == []


def test_follow_links_reads_a_link_out_of_the_folder_and_says_so(docs, outside, tmp_path, capsys):
    (docs / "keys.md").symlink_to(outside / "keys.md")
    (docs / "inner").symlink_to(docs / "guide")  # inside: its files are read once, where they are
    (docs / "broken.md").symlink_to(docs / "nowhere.md")
    assert _init(docs, tmp_path / "data", "--follow-links") == 0
    err = capsys.readouterr().err.splitlines()
    followed = f"followed keys.md -> {outside}/keys.md out of the folder (--follow-links)"
    assert f"note: {docs}: {followed}" in err
    assert f"note: {docs}: left out inner: a link to a folder read already" in err
    assert f"note: {docs}: left out broken.md -> {docs}/nowhere.md: a broken link" in err
    suite = load_suite(tmp_path / "data" / "suites" / "mine")
    assert sorted(d.id for d in suite.documents) == ["faq", "guide/install", "keys"]


def test_a_fifo_is_refused_before_it_is_opened_by_every_reader(docs, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    os.mkfifo(docs / "notes.md")
    _alarm(20)
    try:
        assert _init(docs, tmp_path / "data") == 2
        assert capsys.readouterr().err == (
            f"error: {docs}/notes.md: is a FIFO, not a regular file: refused\n"
        )
        assert _written(tmp_path / "data") == []
        for name in ("sheet.csv", "sheet.jsonl", "run.trec", "gate.yaml"):
            (tmp_path / name).unlink(missing_ok=True)
            os.mkfifo(tmp_path / name)
        readers = [
            lambda: read_run(fifo),
            lambda: read_qrels(fifo),
            lambda: list(sheets.read_rows(tmp_path / "sheet.csv")),
            lambda: list(sheets.read_rows(tmp_path / "sheet.jsonl")),
            lambda: labels.read_sheet(tmp_path / "sheet.jsonl"),
            lambda: labelling.sheet_grades([tmp_path / "sheet.csv"]),
            lambda: load_model(tmp_path / "gate.yaml", limits.FileLimits),
        ]
        for read in readers:
            with pytest.raises(InputError, match="is a FIFO, not a regular file"):
                read()
    finally:
        signal.alarm(0)


def test_a_suite_or_dataset_folder_cannot_lead_out_of_itself(tmp_path, outside, capsys):
    from rageval_pipeline.core.suites.loaders import load_part

    suite = tmp_path / "suite"
    suite.mkdir()
    (outside / "suite.json").write_text("{}")
    (suite / "suite.json").symlink_to(outside / "suite.json")
    assert main(["validate", str(suite)]) == 2
    assert capsys.readouterr().err.endswith(
        f"error: {suite}: is a symlink to a file outside the file's folder, "
        f'{outside}/suite.json (got "suite.json")\n'
    )
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").symlink_to(outside / "keys.md")
    with pytest.raises(InputError) as caught:
        load_part(beir, "corpus", dataset="beir")
    assert str(caught.value) == (
        f"{beir}/corpus.jsonl: is a symlink to a file outside the file's folder, "
        f'{outside}/keys.md (got "corpus.jsonl")'
    )


# --- Bounds --------------------------------------------------------------------------------


def test_a_gzip_bomb_stops_at_the_cap_while_decompressing(tmp_path, monkeypatch):
    bomb = tmp_path / "run.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as out:
        for _ in range(64):
            out.write(b"\0" * (1 << 20))  # 64 MiB of zeros in ~64 kB
    monkeypatch.setenv("RAGEVAL_MAX_DECOMPRESSED_BYTES", str(2 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as caught:
            read_run(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(caught.value) == (
        f"{bomb}: decompresses to more than 2097152 bytes (RAGEVAL_MAX_DECOMPRESSED_BYTES)"
    )
    assert peak < 8 << 20  # about the cap, not the 64 MiB it inflates to


def test_run_and_qrels_over_the_data_limit_are_refused_before_they_are_read(tmp_path, monkeypatch):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d1 1 1.0 t\n" * 100_000)  # 1.7 MB
    monkeypatch.setenv("RAGEVAL_MAX_DATA_BYTES", str(1 << 20))
    tracemalloc.start()
    try:
        for read in (read_run, read_qrels):
            with pytest.raises(InputError, match="over the limit of 1048576"):
                read(run)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 << 10  # refused from its size: nothing read
    compressed = tmp_path / "run.trec.gz"
    compressed.write_bytes(gzip.compress(run.read_bytes()))
    monkeypatch.setenv("RAGEVAL_MAX_DATA_BYTES", str(4 << 20))
    monkeypatch.setenv("RAGEVAL_MAX_DECOMPRESSED_BYTES", str(1 << 20))
    with pytest.raises(InputError, match=r"RAGEVAL_MAX_DECOMPRESSED_BYTES\)$"):
        input_bytes(compressed)
    monkeypatch.setenv("RAGEVAL_MAX_DECOMPRESSED_BYTES", str(2 << 20))
    assert input_bytes(compressed)[1] == run.read_bytes()


def test_a_sheet_over_the_file_limit_is_refused(tmp_path, monkeypatch, capsys):
    suite = Path(shutil.copytree(POOL, tmp_path / "poolsuite"))
    sheet = tmp_path / "sheet.csv"
    sheet.write_text(SHEET_HEADER + "Q1,q,tokens:chunk:0,text,x,1,1\n" * 1000)
    monkeypatch.setenv("RAGEVAL_MAX_FILE_BYTES", "20000")
    assert main(["pool", "merge", str(suite), str(sheet)]) == 2
    size = sheet.stat().st_size
    assert capsys.readouterr().err == (
        f"error: {sheet}: is {size} bytes, over the limit of 20000 (RAGEVAL_MAX_FILE_BYTES)\n"
    )


def test_html_conversion_walks_each_element_once():
    depth = 60_000
    page = "<html><body>" + "<div>" * depth + "<p>deep</p>" + "</div>" * depth + "</body></html>"
    assert html_to_markdown(page) == ("", "deep\n")
    nested = "<body><ul><li>one<p>inner</p></li><li>two</li></ul><h1>T</h1><pre>x</pre></body>"
    assert html_to_markdown(nested) == ("T", "- one inner\n\n- two\n\n# T\n\n```\nx\n```\n")


def _pdf(path: Path, pages: int) -> Path:
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(72, 72)
    with path.open("wb") as out:
        writer.write(out)
    return path


def _xref_bomb(path: Path, inflated: int) -> Path:
    """A PDF whose cross-reference stream inflates to `inflated` bytes."""
    head = b"%PDF-1.5\n1 0 obj <</Type/Catalog/Pages 2 0 R>> endobj\n"
    head += b"2 0 obj <</Type/Pages/Kids[]/Count 0>> endobj\n"
    data = zlib.compress(b"\0" * inflated, 9)
    xref = b"3 0 obj <</Type/XRef/Size 4/W[1 2 1]/Root 1 0 R/Filter/FlateDecode"
    xref += b"/Length %d>>\nstream\n" % len(data) + data + b"\nendstream\nendobj\n"
    path.write_bytes(head + xref + b"startxref\n%d\n%%%%EOF\n" % len(head))
    return path


def test_pdf_pages_are_capped_and_pypdf_limits_are_one_line(tmp_path, monkeypatch):
    many = _pdf(tmp_path / "many.pdf", 5)
    monkeypatch.setenv("RAGEVAL_MAX_PDF_PAGES", "4")
    with pytest.raises(InputError) as caught:
        pdf_to_markdown(many, many.read_bytes())
    assert str(caught.value) == (
        f"{many}: has 5 pages, over the limit of 4 (RAGEVAL_MAX_PDF_PAGES)"
    )
    # A stream that inflates past pypdf's own cap (75 MB) stops there, in one line.
    bomb = _xref_bomb(tmp_path / "bomb.pdf", 80_000_000)
    with pytest.raises(InputError) as caught:
        pdf_to_markdown(bomb, bomb.read_bytes())
    assert str(caught.value).startswith(f"{bomb}: not a readable PDF (")
    assert "Limit reached while decompressing" in str(caught.value)
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(many.read_bytes()[:300])
    with pytest.raises(InputError, match=r"broken.pdf: not a readable PDF \("):
        pdf_to_markdown(broken, broken.read_bytes())


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("RAGEVAL_MAX_FOLDER_FILES", "2", "holds more than 2 files (RAGEVAL_MAX_FOLDER_FILES)"),
        (
            "RAGEVAL_MAX_FOLDER_BYTES",
            "40",
            "holds more than 40 bytes of documents (RAGEVAL_MAX_FOLDER_BYTES)",
        ),
    ],
)
def test_suite_init_caps_files_and_bytes_per_folder(
    docs, tmp_path, monkeypatch, capsys, variable, value, problem
):
    (docs / "more.md").write_text("# More\n\ntext\n")
    monkeypatch.setenv(variable, value)
    assert _init(docs, tmp_path / "data") == 2
    assert capsys.readouterr().err == f"error: {docs}: {problem}\n"
    assert _written(tmp_path / "data") == []


def test_an_html_page_over_its_limit_is_refused_before_it_is_parsed(docs, tmp_path, capsys):
    page = docs / "page.html"
    page.write_text("<html><body>" + "<div>" * 2000 + "</body></html>")
    os.environ["RAGEVAL_MAX_HTML_BYTES"] = "4096"
    try:
        assert _init(docs, tmp_path / "data") == 2
    finally:
        del os.environ["RAGEVAL_MAX_HTML_BYTES"]
    assert capsys.readouterr().err == (
        f"error: {page}: is 10026 bytes, over the limit of 4096 for HTML (RAGEVAL_MAX_HTML_BYTES)\n"
    )
    assert _written(tmp_path / "data") == []


def test_reading_a_folder_has_a_deadline(docs, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAGEVAL_MAX_READ_S", "1e-9")
    assert _init(docs, tmp_path / "data") == 2
    assert capsys.readouterr().err == (
        f"error: {docs}/faq.txt: not read: reading the folder took over 1e-09 s "
        "(RAGEVAL_MAX_READ_S)\n"
    )
    assert _written(tmp_path / "data") == []


def test_long_work_says_how_far_it_got(docs, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(walk, "PROGRESS_S", 0.0)
    assert _init(docs, tmp_path / "data") == 0
    err = capsys.readouterr().err.splitlines()
    assert f"suite init: {docs}: looked at 3 files and folders, 1 document(s) so far" in err
    assert f"suite init: {docs}: read 2 of 2 document(s)" in err


def _env_groups() -> list[tuple[type[EnvGroup], str]]:
    groups = [limits.FileLimits, limits.ArchiveLimits, limits.WarehouseLimits]
    groups += [limits.ObjectStoreLimits, providers.Labelling]
    named = [(g, g.model_config["env_prefix"]) for g in groups]
    named += [(limits.NetLimits, f"{p}_") for p in ("RAGEVAL_HTTP", "RAGEVAL_BEIR", "RAG_EVAL")]
    return named


@pytest.mark.parametrize("value", ["1e308", "nan", "inf", "-1e308"])
def test_every_numeric_limit_refuses_values_that_overflow(value):
    checked = 0
    for group, prefix in _env_groups():
        for name, field in group.model_fields.items():
            if field.annotation not in (int, float, "int", "float"):
                continue
            variable = f"{prefix}{name}".upper()
            with pytest.raises(InputError) as caught:
                group.from_env(prefix.rstrip("_"), env={variable: value})
            assert str(caught.value).startswith(f"environment: {variable}: ")
            checked += 1
    assert checked >= 25


def test_the_http_backoff_of_1e308_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("RAGEVAL_HTTP_BACKOFF_S", "1e308")
    with pytest.raises(InputError) as caught:
        limits.NetLimits.from_env(limits.HTTP_SEARCH)
    assert str(caught.value) == (
        "environment: RAGEVAL_HTTP_BACKOFF_S: Input should be less than or equal to 3600"
    )
    assert math.isfinite(limits.HOUR_S * 2**limits.ATTEMPTS)


# --- One reading of a judging sheet -------------------------------------------------------


@pytest.mark.parametrize("grade", [True, 2.0, "3", " 1", 4, -1, [1]])
def test_every_sheet_reader_refuses_the_same_grades(tmp_path, grade):
    sheet = tmp_path / "sheet.jsonl"
    row = {"query_id": "Q1", "query": "q", "target_id": "tokens:chunk:0", "target_text": "t"}
    sheet.write_text(json.dumps({**row, "grade": 1}) + "\n" + json.dumps({**row, "grade": grade}))
    expected = f"{sheet}:2: grade: must be 0, 1, 2 or 3 (got {json.dumps(grade)})"
    suite = load_suite(POOL)
    readers = [
        lambda: list(judging.graded_rows(suite, sheet)),  # pool merge, pool agree
        lambda: labelling.sheet_grades([sheet]),  # label --human
        lambda: labels.read_sheet(sheet),  # suggest
    ]
    for read in readers:
        with pytest.raises(InputError) as caught:
            read()
        assert str(caught.value) == expected
    passed = tmp_path / "pass.jsonl"  # an agreement pass's readings
    passed.write_text(json.dumps({"query_id": "Q1", "target": "t", "grade": grade}) + "\n")
    with pytest.raises(InputError) as caught:
        readings.read_pass(passed)
    assert str(caught.value) == f"{passed}:1: grade: must be 0, 1, 2 or 3 (got {json.dumps(grade)})"
    csv_sheet = tmp_path / "sheet.csv"
    csv_sheet.write_text(SHEET_HEADER + "Q1,q,tokens:chunk:0,t,x,1, 1\n")
    for read in (
        lambda: list(judging.graded_rows(suite, csv_sheet)),
        lambda: labelling.sheet_grades([csv_sheet]),
    ):
        with pytest.raises(
            InputError, match=r'sheet.csv:2: grade: must be 0, 1, 2 or 3 \(got " 1"\)'
        ):
            read()


def test_a_csv_row_with_cells_past_the_header_is_refused(tmp_path, capsys):
    suite = Path(shutil.copytree(POOL, tmp_path / "poolsuite"))
    sheet = tmp_path / "sheet.csv"
    sheet.write_text(SHEET_HEADER + "Q1,q,tokens:chunk:0,text,x,1,1,\"=cmd|' /C calc'!A0\"\n")
    original = (suite / "suite.json").read_bytes()
    assert main(["pool", "merge", str(suite), str(sheet)]) == 2
    assert capsys.readouterr().err == (f"error: {sheet}:2: 1 cell(s) past the header's 7 columns\n")
    assert (suite / "suite.json").read_bytes() == original


def test_label_reads_its_human_sheets_before_any_judge_call(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAG_EVAL_PROVIDER", "ollama")
    monkeypatch.setenv("RAG_EVAL_OLLAMA_MODEL", "judge")
    monkeypatch.setenv("RAG_EVAL_OLLAMA_URL", "http://127.0.0.1:9")  # never called
    out = tmp_path / "labels"
    missing = tmp_path / "graded.jsonl"
    argv = ["label", str(POOL), "--human", str(missing), "--output", str(out)]
    assert main([*argv, "--storage", str(tmp_path / "storage")]) == 2
    assert capsys.readouterr().err == f"error: {missing}: no such file\n"
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (
            ["pool", "export", "suite", "-k", "0", "-o", "s.csv"],
            "argument -k/--depth: 0 is below the minimum 1",
        ),
        (
            ["pool", "export", "suite", "-k", "-3", "-o", "s.csv"],
            "argument -k/--depth: -3 is below the minimum 1",
        ),
        (
            ["label", "suite", "--price-in", "nan"],
            "argument --price-in: 'nan' is not a number from 0 to 1000000",
        ),
        (
            ["label", "suite", "--price-out", "-5"],
            "argument --price-out: '-5' is not a number from 0 to 1000000",
        ),
    ],
)
def test_pool_depth_and_prices_are_checked(capsys, argv, problem):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(problem)


# --- Lines that name the user's file, safely ----------------------------------------------


def test_names_are_escaped_and_never_forge_a_line(docs, tmp_path, capsys):
    (docs / "evil\nerror: forged.bin").write_text("x")
    (docs / "getting started.md").write_text("one\n")
    (docs / "getting\tstarted.md").write_text("two\n")
    assert _init(docs, tmp_path / "data") == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: {docs}/getting started.md: has the id 'getting-started' of "
        "getting\\tstarted.md: rename one\n"
    )
    (docs / "getting\tstarted.md").unlink()
    assert _init(docs, tmp_path / "data") == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == [
        f"note: {docs}: left out evil\\nerror: forged.bin: not Markdown, text, HTML or PDF"
    ]
    assert printable("a\x1b[2J\u202eb\\") == "a\\x1b[2J\\u202eb\\\\"
    (docs / os.fsdecode(b"caf\xe9.md")).write_text("latin-1 name\n")  # not UTF-8
    assert _init(docs, tmp_path / "data", name="other") == 2
    assert capsys.readouterr().err == (
        f"error: {docs}/caf\\udce9.md: has a name that is not UTF-8 text: rename it\n"
    )


def test_a_validation_error_names_the_source_file_not_the_staging_copy(docs, tmp_path, capsys):
    (docs / "notes:chunk:3.md").write_text("# Notes\n\ntext\n")
    assert _init(docs, tmp_path / "data") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {docs}/notes:chunk:3.md: ")
    assert "a document id must not end in ':chunk:<n>'" in err
    assert ".mine-" not in err
    assert _written(tmp_path / "data") == [tmp_path / "data" / "suites"]


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("scifact", "'scifact' is a BEIR dataset's name: choose another"),
        ("a" * 300, "is 300 characters long, over 64"),
        ("../up", "'../up': use letters, digits, '.', '_' and '-'"),
    ],
)
def test_suite_init_refuses_names_that_cannot_be_a_partition(docs, tmp_path, capsys, name, problem):
    assert _init(docs, tmp_path / "data", name=name) == 2
    assert capsys.readouterr().err == f"error: --name: {problem}\n"
    assert _written(tmp_path / "data") == []


def test_tracebacks_that_became_lines(tmp_path, monkeypatch, capsys):
    dangling = tmp_path / "suite"
    dangling.symlink_to(tmp_path / "nowhere")
    assert main(["pool", "export", str(dangling), "-o", str(tmp_path / "s.csv")]) == 2
    assert capsys.readouterr().err == (
        f"error: {dangling}: is a symlink to {tmp_path}/nowhere, which does not exist\n"
    )
    a_file = tmp_path / "file"
    a_file.write_text("x")
    monkeypatch.setenv("RAGEVAL_BASELINES", str(a_file))
    with pytest.raises(InputError) as caught:
        locations.Locations.from_env()
    assert str(caught.value) == "environment: RAGEVAL_BASELINES: names a file, not a folder"
    monkeypatch.delenv("RAGEVAL_BASELINES")
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d1 1 1.0 t\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n")
    argv = ["gate", str(tmp_path / "qrels.txt"), str(run)]
    assert main([*argv, str(run), "-o", str(a_file)]) == 2
    assert capsys.readouterr().err == f"error: --output: {a_file} is a file, not a folder\n"


def test_gate_takes_the_suite_its_policy_compares_evidence_on(tmp_path, capsys):
    from tests.test_budget_measures import chunk_corpus
    from tests.test_budget_measures import run as ranked_run
    from tests.test_derived_qrels import TECHDOCS, techdocs

    docs, _, qrels, reference = techdocs()
    chunk_corpus(docs, reference, "t")
    graded = qrels[qrels["level"] == "chunk"].sort_values(["query_id", "doc_id"])
    best = graded.groupby("query_id")["doc_id"].agg(lambda ids: list(ids)[:10])
    ranked = ranked_run(best.to_dict())
    run = tmp_path / "run.trec"
    run.write_text(
        "".join(
            f"{q} Q0 {d} 0 {s} r\n" for q, d, s in ranked[["query_id", "doc_id", "score"]].values
        )
    )
    judged = tmp_path / "techdocs.qrels"
    judged.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels[["query_id", "doc_id", "relevance"]].values)
    )
    policy = tmp_path / "gate.yaml"
    policy.write_text("version: 1\ndatasets:\n  default:\n    compare: [EvidenceRecall@512t]\n")
    argv = ["gate", str(judged), str(run), str(run)]
    argv += ["--policy", str(policy), "--format", "json"]
    assert main(argv) == 2
    assert "name their suite with --suite" in capsys.readouterr().err
    assert main([*argv, "--suite", str(TECHDOCS)]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["passed"] is True
