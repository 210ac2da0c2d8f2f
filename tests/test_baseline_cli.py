"""Baselines that say what they are, and `rageval baseline update` refusing a worse one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.gate import GatePolicy, RunSummary, baseline_path, load_baseline
from rageval_pipeline.core.gate.baselines import baseline_from_summary, promote, worse_measures
from rageval_pipeline.core.gate.changes import config_changes, flatten
from tests.test_cli_job import dagster_execute

BIN = Path(sys.executable).parent


def summary(ndcg: float, config: dict, **extra) -> RunSummary:
    per_query = {f"q{i}": {"nDCG@10": ndcg} for i in range(8)}
    return RunSummary(
        dataset="d",
        split="test",
        system="s",
        fingerprint=json.dumps(config, sort_keys=True)[:16].replace(" ", "_"),
        run_id=f"run-{ndcg}",
        created_at="2026-01-04T12:00:00+00:00",
        measures={"nDCG@10": ndcg},
        per_query=per_query,
        n_queries=8,
        k=10,
        config=config,
        **extra,
    )


def test_flatten_and_config_changes_use_dotted_keys():
    old = {"retriever": "bm25", "chunking": {"strategy": "fixed", "size": 512}, "k1": 1.5}
    new = {"retriever": "bm25", "chunking": {"strategy": "fixed", "size": 256}, "b": 0.5}
    assert flatten(old) == {
        "chunking.size": 512,
        "chunking.strategy": "fixed",
        "k1": 1.5,
        "retriever": "bm25",
    }
    assert config_changes(old, new) == {
        "b": (None, 0.5),
        "chunking.size": (512, 256),
        "k1": (1.5, None),
    }


def test_promote_refuses_worse_accepts_better_and_forced(tmp_path):
    policy = GatePolicy.model_validate({"version": 1})
    good = summary(0.8, {"chunking": {"size": 512}}, top={"q0": [{"id": "a", "grade": 2}]})
    [(path, lines, worse, *_)] = promote([good], tmp_path, policy)
    assert (lines, worse) == (["new baseline for d/s"], [])
    stored = load_baseline(path)
    assert stored.config == {"chunking": {"size": 512}} and stored.top["q0"][0].grade == 2
    assert stored.k == 10 and stored.code_version.startswith(good.fingerprint)

    worse = summary(0.5, {"chunking": {"size": 256}})
    with pytest.raises(InputError, match="refusing a worse baseline"):
        promote([worse], tmp_path, policy)
    assert load_baseline(path) == stored  # nothing written
    with pytest.raises(InputError, match="--force needs --note"):
        promote([worse], tmp_path, policy, force=True)
    [(_, lines, lower, *_)] = promote([worse], tmp_path, policy, force=True, note="smaller chunks")
    assert "chunking.size: 512 -> 256" in lines and "nDCG@10: 0.8000 -> 0.5000 (-0.3000)" in lines
    assert lower == ["nDCG@10: 0.8 -> 0.5"]
    assert load_baseline(path).note == "smaller chunks"

    better = summary(0.9, {"chunking": {"size": 128}})
    [(_, lines, lower, *_)] = promote([better], tmp_path, policy)
    assert "nDCG@10: 0.5000 -> 0.9000 (+0.4000)" in lines and lower == []


def test_worse_measures_follow_each_measures_direction_and_the_compare_list():
    """Clustering@10 is better lower; a measure outside `compare` is not the gate's concern."""
    policy = GatePolicy.model_validate(
        {"version": 1, "datasets": {"default": {"compare": ["nDCG@10", "Clustering@10"]}}}
    )
    old = baseline_from_summary(
        summary(0.8, {}).model_copy(
            update={"measures": {"nDCG@10": 0.8, "Clustering@10": 0.2, "RR": 0.9}}
        )
    )
    new = summary(0.8, {}).model_copy(
        update={"measures": {"nDCG@10": 0.8000001, "Clustering@10": 0.3, "RR": 0.1}}
    )
    assert worse_measures(new, old, policy) == ["Clustering@10: 0.2 -> 0.3"]
    fewer = new.model_copy(update={"measures": {"nDCG@10": 0.7999996, "Clustering@10": 0.1}})
    assert worse_measures(fewer, old, policy) == []  # equal as the file stores it, and better


def rageval(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "rageval"), *args], env=env, capture_output=True, text=True, timeout=300
    )


def poor_run_file(data: Path) -> None:
    """A run file ranking every judged-relevant beir-mini document below every other one."""
    suite = data / "suites" / "beir-mini"
    qrels = [
        line.split("\t") for line in (suite / "qrels" / "test.tsv").read_text().splitlines()[1:]
    ]
    relevant = {(q, d) for q, d, grade in qrels if int(grade) > 0}
    docs = [json.loads(line)["_id"] for line in (suite / "corpus.jsonl").read_text().splitlines()]
    lines = []
    for qid in sorted({q for q, _, _ in qrels}):
        ranked = sorted(docs, key=lambda d: ((qid, d) in relevant, d))
        lines += [f"{qid} Q0 {d} {i + 1} {len(docs) - i} poor\n" for i, d in enumerate(ranked)]
    (data / "poor.trec").write_text("".join(lines))


@pytest.mark.slow
def test_baseline_update_refuses_a_worse_baseline_and_accepts_it_forced(evaluated_home):
    """From beir-mini evaluated by bm25 (the session's, conftest.py), through the real CLI."""
    pipeline_home = evaluated_home
    data = pipeline_home / "data"
    env = {**os.environ, "DAGSTER_HOME": str(pipeline_home / "dagster_home")}
    (pipeline_home / "dagster_home").mkdir()
    update = rageval("baseline", "update", "--dataset", "beir-mini", env=env)
    assert update.returncode == 0, update.stderr
    path = baseline_path(data / "baselines", "beir-mini", "bm25")
    baseline = load_baseline(path)
    assert baseline.config["retriever"] == "bm25" and baseline.config["chunking"]["strategy"]
    assert baseline.k == 100 and baseline.package_version and baseline.code_version
    assert set(baseline.top) == set(baseline.per_query)
    assert any(d.grade for ids in baseline.top.values() for d in ids)  # grades are stored

    assert baseline.policy is not None and baseline.policy.inconclusive == "block"
    assert set(baseline.query_digests) == set(baseline.per_query)  # recorded by the metrics step

    # The same system name now runs a deliberately poor run file: a worse evaluation, in the
    # same change as a policy that would let it through (`inconclusive: warn`, `compare: []`).
    poor_run_file(data)
    (data / "systems.yaml").write_text(
        json.dumps({"systems": {"bm25": {"retriever": "run_file", "path": "poor.trec"}}})
    )
    policy = yaml.safe_load((data / "gate.yaml").read_text())
    loose = {"compare": [], "statistics": {"inconclusive": "warn"}}
    policy["datasets"]["default"] = {**policy["datasets"]["default"], **loose}
    (data / "gate.yaml").write_text(yaml.safe_dump(policy))
    second = dagster_execute("evaluate_dataset", "beir-mini", env, pipeline_home)
    assert second.returncode != 0, second.stdout[-3000:]
    [gate_json] = pipeline_home.glob("**/beir-mini/latest/gate.json")
    verdict = json.loads(gate_json.read_text())
    [loosened] = [c for c in verdict["checks"] if c["kind"] == "policy"]
    assert loosened["blocking"] and not loosened["passed"]
    assert "statistics.inconclusive: block -> block_likely" in loosened["message"]
    assert "compare: [" in loosened["message"] and "] -> []" in loosened["message"]
    assert "decided under policy" in gate_json.with_name("gate.md").read_text()
    before = path.read_text()
    refused = rageval("baseline", "update", "--dataset", "beir-mini", env=env)
    assert refused.returncode == 2 and "refusing a worse baseline" in refused.stderr, (
        second.stdout[-4000:] + refused.stdout + refused.stderr
    )
    assert "Traceback" not in refused.stderr and path.read_text() == before
    no_note = rageval("baseline", "update", "--dataset", "beir-mini", "--force", env=env)
    assert no_note.returncode == 2 and path.read_text() == before

    forced = rageval(
        "baseline",
        "update",
        "--dataset",
        "beir-mini",
        "--force",
        "--note",
        "poor on purpose",
        env=env,
    )
    assert forced.returncode == 0, forced.stderr
    assert "retriever: bm25 -> run_file" in forced.stdout
    assert "nDCG@10: " in forced.stdout and "(-0." in forced.stdout
    assert load_baseline(path).note == "poor on purpose"
    assert load_baseline(path).config["retriever"] == "run_file"
    # Stored with its reason and lineage, the anchor kept, and listed in the experiments log.
    stored = load_baseline(path)
    assert stored.accepted_worse == "poor on purpose"
    assert stored.replaced.fingerprint == baseline.fingerprint
    assert stored.anchor.source_run_id == baseline.source_run_id
    assert (
        "replaces the baseline of" in forced.stdout and "anchor: the baseline of" in forced.stdout
    )
    log = rageval("experiments", "--dataset", "beir-mini", env=env)
    assert "baseline accepted worse: poor on purpose" in log.stdout, log.stdout + log.stderr


def test_update_baseline_job_refuses_then_accepts_forced(tmp_path):
    """The Dagster job runs the same rule as the CLI, on the warehouse's latest evaluation."""
    import dagster as dg

    from rageval_pipeline.core.storage.warehouse import Warehouse
    from rageval_pipeline.defs.baseline_job import update_baseline
    from rageval_pipeline.defs.policy import GatePolicyResource
    from rageval_pipeline.defs.resources import Settings, WarehouseResource
    from tests.test_storage import _results, _run_row

    (tmp_path / "gate.yaml").write_text("version: 1\n")
    Warehouse(tmp_path / "rageval.duckdb").record_run(_run_row("r1"), _results("r1", 0.5))
    old = summary(0.9, {}).model_copy(update={"dataset": "d", "system": "s", "fingerprint": "f"})
    promote([old], tmp_path / "baselines", GatePolicy.model_validate({"version": 1}))
    settings = Settings(
        storage_dir=str(tmp_path), data_dir=str(tmp_path), baselines_dir=str(tmp_path / "baselines")
    )
    resources = dict(
        settings=settings,
        warehouse=WarehouseResource(storage_dir=str(tmp_path)),
        policy=GatePolicyResource(settings=settings),
    )

    def run(**config) -> dg.ExecuteInProcessResult:
        return update_baseline.execute_in_process(
            run_config={"ops": {"promote_baseline": {"config": {"dataset": "d", **config}}}},
            resources=resources,
            raise_on_error=False,
        )

    assert not run().success  # 0.5 < 0.9: refused
    assert load_baseline(baseline_path(tmp_path / "baselines", "d", "s")).measures["nDCG@10"] == 0.9
    assert run(force=True, note="accepted on purpose").success
    written = load_baseline(baseline_path(tmp_path / "baselines", "d", "s"))
    assert written.measures["nDCG@10"] == 0.5 and written.note == "accepted on purpose"


def test_baseline_update_warns_about_a_lower_compared_measure_within_tolerance(tmp_path):
    """0.80 -> 0.78 is within the 5% tolerance: written, with a warning naming the measure."""
    from rageval_pipeline.core.storage.warehouse import Warehouse
    from tests.test_storage import _results, _run_row

    (tmp_path / "gate.yaml").write_text("version: 1\n")
    Warehouse(tmp_path / "rageval.duckdb").record_run(_run_row("r1"), _results("r1", 0.78))
    promote([summary(0.8, {})], tmp_path / "baselines", GatePolicy.model_validate({"version": 1}))
    path = baseline_path(tmp_path / "baselines", "d", "s")
    argv = ["baseline", "update", "--dataset", "d", "--storage", str(tmp_path)]
    argv += ["--baselines", str(tmp_path / "baselines"), "--policy", str(tmp_path / "gate.yaml")]
    done = rageval(*argv, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f"warning: {path}: the new baseline is worse on nDCG@10: 0.8 -> 0.78; later runs are "
        "compared with the worse value\n"
    )
    assert f"wrote {path}" in done.stdout and load_baseline(path).measures["nDCG@10"] == 0.78
    again = rageval(*argv, env=dict(os.environ))  # the same evaluation: nothing is worse
    assert (again.returncode, again.stderr) == (0, "")


# A team's search in process (`retriever: python`): documents ranked by the query words they
# share. CUT is the bad change: each document read as its first 10 words only.
TEAM_SEARCH = '''"""The team's search: documents ranked by the query words they share."""
import json
import re
from pathlib import Path

CUT = {cut}
_WORDS = re.compile(r"[a-z0-9]+")
_DOCS = []
for line in Path({corpus!r}).read_text().splitlines():
    doc = json.loads(line)
    text = doc["text"] if CUT else doc["title"] + " " + doc["text"]
    words = _WORDS.findall(text.lower())
    _DOCS.append((doc["_id"], set(words[:10] if CUT else words)))


def search(query, top_k):
    asked = set(_WORDS.findall(query.lower()))
    scored = [(doc, len(asked & words)) for doc, words in _DOCS]
    return sorted(scored, key=lambda hit: (-hit[1], hit[0]))[:top_k]
'''


@pytest.mark.slow
def test_a_grown_suite_still_compares_a_python_system_and_its_worse_baseline_is_refused(
    evaluated_home,
):
    """A Python entry-point system on beir-mini; then 13 queries added in the same change as the
    retriever cut to the first 10 words of each document: blocked (exit 1), compared on the 24
    unchanged queries; `rageval baseline update` then refuses the worse baseline in one line."""
    home = evaluated_home
    data = home / "data"
    suite = data / "suites" / "beir-mini"
    env = {**os.environ, "DAGSTER_HOME": str(home / "dagster_home")}
    (home / "dagster_home").mkdir()
    corpus = str(suite / "corpus.jsonl")
    (data / "team_search.py").write_text(TEAM_SEARCH.format(cut=False, corpus=corpus))
    team = {"retriever": "python", "entry_point": "team_search:search"}
    (data / "systems.yaml").write_text(json.dumps({"systems": {"team": team}}))
    first = dagster_execute("evaluate_dataset", "beir-mini", env, home)
    assert first.returncode == 0, first.stdout[-3000:]
    update = rageval("baseline", "update", "--dataset", "beir-mini", "--system", "team", env=env)
    assert update.returncode == 0, update.stderr
    path = baseline_path(data / "baselines", "beir-mini", "team")
    before = path.read_text()

    # 13 queries added (judged like existing ones) in the same change as the cut retriever.
    qrels = (suite / "qrels" / "test.tsv").read_text().splitlines()
    judged = sorted({row.split("\t")[0] for row in qrels[1:]})
    queries = [json.loads(line) for line in (suite / "queries.jsonl").read_text().splitlines()]
    text = {q["_id"]: q["text"] for q in queries}
    added_rows, added_queries = [], []
    for i, source in enumerate(judged[:13]):
        new = f"added{i:02d}"
        added_queries.append(json.dumps({"_id": new, "text": text[source] + " please"}))
        added_rows += [f"{new}\t{r.split(chr(9), 1)[1]}" for r in qrels[1:] if r.startswith(source)]
    with (suite / "queries.jsonl").open("a") as f:
        f.write("\n".join(added_queries) + "\n")
    (suite / "qrels" / "test.tsv").write_text("\n".join([*qrels, *added_rows]) + "\n")
    (data / "team_search.py").write_text(TEAM_SEARCH.format(cut=True, corpus=corpus))
    second = dagster_execute("evaluate_dataset", "beir-mini", env, home)
    assert second.returncode == 1, second.stdout[-3000:]
    [gate_json] = home.glob("**/beir-mini/latest/gate.json")
    verdict = json.loads(gate_json.read_text())
    [change] = [c for c in verdict["changes"] if c["system"] == "team"]
    assert (change["compared_with"], change["unchanged"]) == ("unchanged", len(judged))
    [suite_check] = [c for c in verdict["checks"] if c["kind"] == "suite"]
    assert "13 added (added00" in suite_check["message"] and not suite_check["blocking"]
    failed = [c for c in verdict["checks"] if c["kind"] == "baseline" and not c["passed"]]
    assert failed and all(c["paired"]["n"] == len(judged) for c in failed if c["paired"])

    refused = rageval("baseline", "update", "--dataset", "beir-mini", "--system", "team", env=env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert "refusing a worse baseline" in line and "--accept-worse" in line
    assert path.read_text() == before
