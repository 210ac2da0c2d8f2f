import json
import os
import re
import shutil
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pandas as pd
import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.retrieval import fusion
from rageval_pipeline.core.retrieval.base import Hit, execute
from rageval_pipeline.core.suites.chunking import ChunkingConfig, chunk_corpus
from rageval_pipeline.core.systems import BM25System, RunInputs, load_systems

REPO = Path(__file__).parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "retrieval"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "systems.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def fingerprints(tmp_path: Path, text: str) -> dict[str, str]:
    return {name: s.fingerprint() for name, s in load_systems(write(tmp_path, text)).items()}


def test_shipped_systems_file():
    systems = load_systems(REPO / "data" / "systems.yaml")
    assert list(systems) == ["bm25", "dense", "hybrid"]
    assert [s.name for s in systems.values()] == ["bm25", "dense", "hybrid"]
    bm25, dense, hybrid = systems.values()
    assert (bm25.k1, bm25.b, bm25.chunking) == (1.5, 0.75, ChunkingConfig(strategy="reference"))
    assert (dense.model, dense.batch_size, dense.max_seq_length) == ("all-MiniLM-L6-v2", 32, 256)
    assert (hybrid.members, hybrid.k) == (["bm25", "dense"], 60)
    assert [s.indexed for s in systems.values()] == [True, True, False]
    assert [s.member_names for s in systems.values()] == [[], [], ["bm25", "dense"]]
    assert all(s.reusable for s in systems.values())
    assert all(re.fullmatch(r"[0-9a-f]{16}", s.fingerprint()) for s in systems.values())


def test_fingerprint_is_pinned():
    # Changing this value invalidates every stored run: do it only on purpose.
    assert BM25System(retriever="bm25").fingerprint() == "a3ad410a75f7acc1"


def test_fingerprint_ignores_the_name_and_what_does_not_change_results(tmp_path):
    fp = fingerprints(
        tmp_path,
        """
        systems:
          a: {retriever: dense}
          b: {retriever: dense, batch_size: 8, model: all-MiniLM-L6-v2}
          h1: {retriever: http, url: "http://x/s"}
          h2: {retriever: http, url: "http://x/s", timeout_s: 1, concurrency: 9, retries: 1,
               headers_from_env: {Authorization: TOKEN}}
        """,
    )
    assert fp["a"] == fp["b"] and fp["h1"] == fp["h2"]


@pytest.mark.parametrize(
    "changed",
    [
        "{retriever: bm25, k1: 1.2}",
        "{retriever: bm25, b: 0.5}",
        "{retriever: bm25, chunking: {strategy: paragraph}}",
        "{retriever: bm25, chunking: {strategy: fixed, size: 100, overlap: 10}}",
        "{retriever: dense}",
    ],
)
def test_fingerprint_changes_with_what_changes_results(tmp_path, changed):
    fp = fingerprints(tmp_path, f"systems:\n  base: {{retriever: bm25}}\n  other: {changed}\n")
    assert fp["base"] != fp["other"]


# Fusions of fusions; {k1} is BM25's, which both fused systems inherit.
NESTED_FUSION = """
    systems:
      bm25: {{retriever: bm25, k1: {k1}}}
      dense: {{retriever: dense}}
      hybrid: {{retriever: rrf, members: [bm25, dense]}}
      outer: {{retriever: weighted, members: {{hybrid: 1, dense: 2}}}}
    """


def test_fusion_fingerprint_follows_its_members(tmp_path):
    text = NESTED_FUSION
    before = fingerprints(tmp_path, text.format(k1=1.5))
    after = fingerprints(tmp_path, text.format(k1=1.2))
    assert before["dense"] == after["dense"]
    assert before["hybrid"] != after["hybrid"] and before["outer"] != after["outer"]
    k_changed = fingerprints(tmp_path, text.format(k1=1.5).replace("dense]}", "dense], k: 10}"))
    assert k_changed["hybrid"] != before["hybrid"]


def test_fusion_records_its_members_configs_so_their_changes_show(tmp_path):
    from rageval_pipeline.core.gate.baselines import config_changes

    text = NESTED_FUSION
    reference = ChunkingConfig(strategy="document")
    before, after = (
        {n: s.recorded_config(reference) for n, s in load_systems(write(tmp_path, body)).items()}
        for body in (text.format(k1=1.5), text.format(k1=1.2))
    )
    assert before["hybrid"]["members"]["dense"] == before["dense"]
    assert before["outer"]["members"]["dense"] == before["dense"] | {"weight": 2.0}
    assert config_changes(before["hybrid"], after["hybrid"]) == {"members.bm25.k1": (1.5, 1.2)}
    assert config_changes(before["outer"], after["outer"]) == {
        "members.hybrid.members.bm25.k1": (1.5, 1.2)
    }


def test_run_file_fingerprint_follows_content_not_location(tmp_path):
    text = "systems:\n  ours: {retriever: run_file, path: runs/ours.trec}\n"
    for folder in ("one", "two"):
        (tmp_path / folder / "runs").mkdir(parents=True)
        shutil.copy(FIXTURES / "run.trec", tmp_path / folder / "runs" / "ours.trec")
    one, two = (fingerprints(tmp_path / f, text)["ours"] for f in ("one", "two"))
    assert one == two
    (tmp_path / "two" / "runs" / "ours.trec").write_text("q1 Q0 d9 1 0.1 x\n")
    assert fingerprints(tmp_path / "two", text)["ours"] != one


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "hybrid: {retriever: rrf, members: [bm25, nope]}",
            """systems["hybrid"].members[1]: unknown system 'nope'""",
        ),
        (
            "x: {retriever: faiss}",
            """systems["x"]: Input tag 'faiss' found using 'retriever' does not match any of the """
            """expected tags: 'bm25', 'dense', 'rrf', 'weighted', 'run_file', 'http', 'python', """
            """'rerank' """
            """(got {"retriever": "faiss"})""",
        ),
        (
            "x: {k1: 1}",
            """systems["x"]: Unable to extract tag using discriminator 'retriever' """
            """(got {"k1": 1})""",
        ),
        (
            "x: {retriever: bm25, k1: fast}",
            """systems["x"].k1: must be a valid number, unable to parse string as a number """
            """(got "fast")""",
        ),
        ("x: {retriever: bm25, colour: red}", """systems["x"].colour: unknown field"""),
        (
            "x: {retriever: bm25, chunking: {strategy: fixed, size: 4, overlap: 4}}",
            """systems["x"].chunking: overlap (4) must be smaller than size (4) """
            """(got {"strategy": "fixed", "size": 4, "overlap": 4})""",
        ),
        (
            "x: {retriever: rrf, members: [bm25]}",
            """systems["x"].members: must have at least 2 items after validation, not 1 """
            """(got ["bm25"])""",
        ),
        (
            "x: {retriever: weighted, members: {bm25: 0, y: 1}}",
            """systems["x"].members["bm25"]: must be greater than 0 (got 0)""",
        ),
        (
            "x: {retriever: weighted, members: {bm25: 1, nope: 1}}",
            """systems["x"].members["nope"]: unknown system 'nope'""",
        ),
        (
            "x: {retriever: http, url: 'ftp://x'}",
            """systems["x"].url: must match pattern '^https?://\\S+$' (got "ftp://x")""",
        ),
        (
            "x: {retriever: python, entry_point: 'mod.func'}",
            """systems["x"].entry_point: must match pattern '^[A-Za-z_][\\w.]*:[A-Za-z_]\\w*$' """
            """(got "mod.func")""",
        ),
        (
            "'bad name': {retriever: bm25}",
            """systems["bad name"]: a system name is letters, digits and '_' (e.g. bm25_fixed) """
            """(got "bad name")""",
        ),
        (
            "a: {retriever: rrf, members: [bm25, b]}\n  b: {retriever: rrf, members: [a, bm25]}",
            """systems["a"].members: fusion cycle: a -> b -> a""",
        ),
    ],
)
def test_config_errors_name_the_file_line_and_field(tmp_path, body, expected):
    path = write(tmp_path, f"systems:\n  bm25: {{retriever: bm25}}\n  {body}\n")
    with pytest.raises(InputError) as err:
        load_systems(path)
    assert str(err.value) == f"{path}:3: {expected}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "systems:\n  a: {retriever: bm25\n  b: 1\n",
            ":3: invalid YAML (column 4): expected ',' or '}', but got ':'",
        ),
        ("- bm25\n", ':1: must be an object (got ["bm25"])'),
        ("systems: {}\nsystem: {}\n", ":2: system: unknown field"),
        (None, ": no such file"),
    ],
)
def test_unreadable_files(tmp_path, text, expected):
    path = tmp_path / "systems.yaml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_systems(path)
    assert str(err.value) == f"{path}{expected}"


def chunks() -> pd.DataFrame:
    corpus = pd.read_json(FIXTURES / "corpus.jsonl", lines=True, dtype=str)
    return chunk_corpus(corpus.assign(url="", metadata="{}"), ChunkingConfig(), "t")


QUERIES = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["moon tides ocean", "bake bread"]})


def inputs(tmp_path: Path, **kwargs) -> RunInputs:
    return RunInputs(queries=QUERIES, top_k=3, index_dir=tmp_path, base_dir=tmp_path, **kwargs)


def test_index_systems_build_open_and_fuse(tmp_path):
    systems = load_systems(REPO / "data" / "systems.yaml")
    runs = {}
    for name in ("bm25", "dense"):
        meta = systems[name].build_index(chunks(), tmp_path / name, embeddings_dir=tmp_path / "e")
        assert meta["n_chunks"] == 6 and meta["seconds"] >= 0 and meta["docs_per_s"] >= 0
        runs[name] = systems[name].produce_run(inputs(tmp_path / name))
        searched = execute(systems[name].open_index(tmp_path / name).search, QUERIES, 3)
        pd.testing.assert_frame_equal(
            runs[name].drop(columns="latency_ms"), searched.drop(columns="latency_ms")
        )
        assert runs[name].groupby("query_id")["doc_id"].first().to_dict() == {
            "q1": "tide:chunk:0",
            "q2": "bread:chunk:0",
        }
    assert (meta["embedded"], meta["cached"]) == (5, 0)  # twin documents embed one text
    again = systems["dense"].build_index(chunks(), tmp_path / "d2", embeddings_dir=tmp_path / "e")
    assert (again["embedded"], again["cached"]) == (0, 6)

    fused = systems["hybrid"].produce_run(inputs(tmp_path, member_runs=runs))
    pd.testing.assert_frame_equal(fused, fusion.rrf([runs["bm25"], runs["dense"]], k=60))
    with pytest.raises(ValueError, match=r"no run for member\(s\) \['dense'\]"):
        systems["hybrid"].produce_run(inputs(tmp_path, member_runs={"bm25": runs["bm25"]}))


def test_weighted_system_fuses_with_its_weights(tmp_path):
    path = write(
        tmp_path,
        """
        systems:
          a: {retriever: bm25}
          b: {retriever: bm25, k1: 1.2}
          w: {retriever: weighted, level: document, members: {a: 1, b: 3}}
        """,
    )
    runs = {
        "a": pd.DataFrame(
            dict(query_id="q", doc_id=["x", "y"], source_id=None, score=[2.0, 1.0], latency_ms=1.0)
        ),
        "b": pd.DataFrame(
            dict(query_id="q", doc_id=["y", "x"], source_id=None, score=[2.0, 1.0], latency_ms=1.0)
        ),
    }
    fused = load_systems(path)["w"].produce_run(inputs(tmp_path, member_runs=runs))
    assert fused["doc_id"].tolist() == ["y", "x"] and fused["score"].tolist() == [3.0, 1.0]


def test_chunk_level_needs_every_chunking_behind_the_run_to_be_the_reference(tmp_path):
    path = write(
        tmp_path,
        """
        systems:
          ref: {retriever: bm25, chunking: {strategy: reference}}
          fixed: {retriever: bm25, chunking: {strategy: fixed, size: 50, overlap: 10}}
          both_ref: {retriever: rrf, members: [ref, ref2]}
          ref2: {retriever: dense, chunking: {strategy: reference}}
          mixed: {retriever: rrf, level: document, members: [ref, fixed]}
          file: {retriever: http, url: "http://127.0.0.1:9/s"}
        """,
    )
    systems = load_systems(path)
    reference = ChunkingConfig(strategy="fixed", size=50, overlap=10)
    level = {name: s.chunk_level(reference) for name, s in systems.items()}
    assert level == dict(ref=True, fixed=True, both_ref=True, ref2=True, mixed=True, file=False)
    other = ChunkingConfig(strategy="document")
    level = {name: s.chunk_level(other) for name, s in systems.items()}
    assert level == dict(ref=True, fixed=False, both_ref=True, ref2=True, mixed=False, file=False)
    assert not any(s.chunk_level(None) for s in systems.values())
    assert not systems["file"].reusable and not systems["file"].indexed


def test_run_file_system_reads_relative_to_its_base_dir(tmp_path):
    shutil.copy(FIXTURES / "run.trec", tmp_path / "ours.trec")
    path = write(tmp_path, "systems:\n  ours: {retriever: run_file, path: ours.trec}\n")
    system = load_systems(path)["ours"]
    assert not system.indexed and system.reusable
    judged = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "text": ""})
    run = system.produce_run(RunInputs(judged, 10, tmp_path / "none", tmp_path))
    assert run["doc_id"].tolist() == ["d2", "d0", "d1:chunk:2", "d3"]
    # Only the judged queries' rows are kept.
    run = system.produce_run(RunInputs(judged.iloc[:0], 10, tmp_path / "none", tmp_path))
    assert run.empty


def test_python_system_imports_from_base_dir(tmp_path):
    path = write(
        tmp_path, "systems:\n  ours: {retriever: python, entry_point: 'my_search:dicts'}\n"
    )
    retriever = load_systems(path)["ours"].open(FIXTURES)
    assert retriever.search("q", 3) == [Hit("doc-a", 0.1, "a")]


def test_http_headers_come_from_the_environment_only(tmp_path, monkeypatch):
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers.get("Authorization"))
            body = json.dumps({"results": [{"id": "d", "score": 1}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        path = write(
            tmp_path,
            f"""
            systems:
              ours:
                retriever: http
                url: http://127.0.0.1:{server.server_address[1]}/search
                headers_from_env: {{Authorization: RAGEVAL_TEST_TOKEN}}
            """,
        )
        system = load_systems(path)["ours"]
        monkeypatch.delenv("RAGEVAL_TEST_TOKEN", raising=False)
        with pytest.raises(InputError, match="RAGEVAL_TEST_TOKEN is not set") as err:
            system.open(tmp_path)
        assert err.value.field == "headers_from_env.Authorization"
        monkeypatch.setenv("RAGEVAL_TEST_TOKEN", "Bearer t0ken")
        retriever = system.open(tmp_path)
        assert retriever.search("q", 1) == [Hit("d", 1.0, None)]
        assert seen == ["Bearer t0ken"]
        assert "t0ken" not in system.model_dump_json()
    finally:
        server.shutdown()
        server.server_close()


# ----------------------------------------------------------------------------------- confinement


def run_file_system(tmp_path: Path, run_path: str) -> Path:
    folder = tmp_path / "config"
    folder.mkdir(exist_ok=True)
    (folder / "runs").mkdir(exist_ok=True)
    shutil.copy(FIXTURES / "run.trec", folder / "runs" / "ours.trec")
    (tmp_path / "theirs.trec").write_text("q1 Q0 d1 1 1.0 x\n")
    return write(folder, f"systems:\n  replay:\n    retriever: run_file\n    path: '{run_path}'\n")


@pytest.mark.parametrize(
    ("run_path", "make", "rule"),
    [
        ("../theirs.trec", None, "leaves the file's folder through '..'"),
        ("runs/../../theirs.trec", None, "leaves the file's folder through '..'"),
        ("/proc/self/environ", None, "must be a path relative to the file's folder, not absolute"),
        ("/etc/passwd", None, "must be a path relative to the file's folder, not absolute"),
        ("runs/leak.trec", "../../theirs.trec", "is a symlink to a file outside the file's folder"),
        ("runs/env.trec", "/proc/self/environ", "is a symlink to a file outside the file's folder"),
        ("runs/pipe.trec", "fifo", "is a FIFO, not a regular file"),
        ("runs", None, "is a folder, not a regular file"),
    ],
)
def test_run_file_path_stays_inside_the_systems_folder(tmp_path, run_path, make, rule):
    path = run_file_system(tmp_path, run_path)
    if make == "fifo":
        os.mkfifo(path.parent / run_path)
    elif make is not None:
        (path.parent / run_path).symlink_to(make)
    if rule.startswith("is a symlink"):  # the message names where the link leads
        rule += f", {(path.parent / run_path).resolve()}"
    with pytest.raises(InputError) as err:
        load_systems(path)
    assert str(err.value) == f'{path}:4: systems["replay"].path: {rule} (got "{run_path}")'


def test_run_file_inside_the_folder_loads_and_is_checked_again_when_read(tmp_path):
    path = run_file_system(tmp_path, "runs/ours.trec")
    system = load_systems(path)["replay"]
    assert system.resolved_path() == (path.parent / "runs" / "ours.trec").resolve()
    fingerprint = system.fingerprint()
    (path.parent / "runs" / "ours.trec").unlink()
    (path.parent / "runs" / "ours.trec").symlink_to(tmp_path / "theirs.trec")
    with pytest.raises(InputError) as err:
        system.fingerprint()
    assert str(err.value) == (
        f"{path.parent}: path: is a symlink to a file outside the file's folder, "
        f'{tmp_path / "theirs.trec"} (got "runs/ours.trec")'
    )
    assert len(fingerprint) == 16
