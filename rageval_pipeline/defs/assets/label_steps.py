"""The label job's steps (`defs/assets/llm_labels.py` wires them as assets): the companion query
set, the pooled rankings, the LLM labels, the judge's calibration and the PPI verdict, each a
plain function of its inputs, testable without Dagster, with `LabelSettings`, the job's
run-wide knobs."""

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pandas as pd

from rageval_pipeline.core.gate import label_verdict
from rageval_pipeline.core.gate.policy import GatePolicy
from rageval_pipeline.core.generation import (
    calibration,
    config,
    judge_labels,
    labelling,
    prompts,
    synthetic,
)
from rageval_pipeline.core.generation.llm import LLM, prompt_hash
from rageval_pipeline.core.measures.defaults import PRIMARY_MEASURE
from rageval_pipeline.core.statistics.sampling import load_sample
from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.storage.reuse import content_key
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.core.suites.golden import Suite, load_suite
from rageval_pipeline.core.systems import SystemConfig, load_systems
from rageval_pipeline.defs.assets.chunked import from_storage
from rageval_pipeline.defs.assets.generation import usage
from rageval_pipeline.defs.assets.ingest import table_key
from rageval_pipeline.defs.failures import refusal
from rageval_pipeline.defs.resources import Settings, StoredTable, stored_path

GROUP = "llm_labels"
JOB = "label_dataset"
FORMAT_VERSION = "1"


class LabelSettings(dg.ConfigurableResource):
    """Run-wide knobs of the synthetic queries and LLM labels (models come from RAGEVAL_*)."""

    n: int = 400  # queries drawn
    seed: int = 0  # passage draw and bias-check sample (the human sample's seed is committed)
    human_sample: int = 60  # synthetic queries sampled for human judging
    depth: int = 10  # pool depth labelled
    systems: list[str] | None = None  # pool and round-trip systems; default every system
    check_sample: int = 50  # pairs per bias check
    reference: str | None = None  # the system the PPI gate compares the others with; default
    # the first pooled system
    dry_run: bool = False

    def llm(self, settings: Settings) -> LLM:
        return LLM(config.from_env("judge"), settings.storage / "llm_cache", dry_run=self.dry_run)

    def pooled_systems(self, settings: Settings) -> dict[str, SystemConfig]:
        """The systems that pool, and the members they stand on, in the catalog's order."""
        catalog = load_systems(settings.data / "systems.yaml")
        names = self.systems or list(catalog)
        unknown = sorted(set(names) - set(catalog))
        if unknown:
            raise refusal(f"resources.labels.config.systems names unknown system(s) {unknown}")
        wanted = set(names) | {m for n in names for m in catalog[n].member_names}
        return {n: s for n, s in catalog.items() if n in wanted}

    def pooling(self, settings: Settings, dataset: str, suite: Suite) -> labelling.Pooling:
        """The pooled systems, which index the fresh stored `<system>/chunks` of `dataset`
        where one chunks as a system does, when the stored corpus is the suite as it is now
        (these steps read the suite itself); else the suite chunked in this process."""
        path = settings.data / "systems.yaml"
        systems = self.pooled_systems(settings)
        corpus = StoredTable(stored_path(settings.storage, ["corpus"], dataset))
        current = corpus.stamp == table_key("corpus", dataset, settings.dataset_folder(dataset))
        return labelling.Pooling(
            systems=systems,
            embeddings_dir=settings.storage / "embeddings",
            base_dir=path.parent,
            stored_chunks=from_storage(settings, dataset, corpus, suite.chunking, *systems.values())
            if current
            else None,
        )


def _suite(settings: Settings, dataset: str) -> Suite:
    folder = settings.dataset_folder(dataset)
    if loaders.suite_file(folder) is None:
        raise refusal(f"{dataset}: synthetic queries and LLM labels need a golden suite")
    return load_suite(folder)


def _companion_folder(settings: Settings, dataset: str, suite: Suite) -> Path:
    """Where the companion set and its sample live: committed beside the suite, else storage."""
    committed = settings.dataset_folder(dataset)
    if synthetic.companion_path(committed, suite).exists():
        return committed
    return settings.storage / "synthetic" / dataset


def code_version(prompt: str) -> str:
    """The code version of a label asset: its prompt, the judge model and the format."""
    try:
        model = config.from_env("judge")
        used = [model.provider, model.model, model.params(), model.structured]
    except config.GenerationError:
        used = None  # the step reports the bad variable
    return content_key(FORMAT_VERSION, prompts.PROMPT_VERSION, prompt_hash(prompt), used)[:16]


def _companion(frame: pd.DataFrame) -> list[synthetic.SyntheticQuery]:
    rows = frame.assign(round_trip=frame["round_trip"].map(json.loads)).to_dict("records")
    return [synthetic.SyntheticQuery.model_validate(r) for r in rows]


def _human(settings: Settings, dataset: str, suite: Suite) -> dict:
    """The human grades of the suite and of its graded synthetic sample sheet, when there is one."""
    sheet = synthetic.sheet_path(_companion_folder(settings, dataset, suite), suite)
    return labelling.human_grades(suite, [sheet] if sheet.exists() else [])


# The steps, each a plain function of its inputs (testable without Dagster); `log` is the step's
# logger. Each returns its value and the metadata the asset records.


def make_synthetic_queries(
    settings: Settings, labels: LabelSettings, dataset: str, log
) -> tuple[pd.DataFrame, dict]:
    """The companion query set: committed beside the suite (no call), else written by the LLM."""
    suite = _suite(settings, dataset)
    path, meta = synthetic.companion_path(settings.dataset_folder(dataset), suite), {}
    if path.exists():
        log.info(f"companion query set read from {path}: no call made")
    else:
        llm = labels.llm(settings)
        outcome = labelling.synthesize(
            suite,
            llm,
            labels.pooling(settings, dataset, suite),
            settings.storage / "synthetic" / dataset,
            n=labels.n,
            seed=labels.seed,
            human_sample=labels.human_sample,
            depth=labels.depth,
        )
        meta = usage(llm)
        if outcome is None:
            return pd.DataFrame(columns=list(synthetic.SyntheticQuery.model_fields)), meta
        path, meta = outcome.companion, meta | outcome.report.model_dump()
    rows = [q.model_dump() for q in synthetic.read_companion(path)]
    frame = pd.DataFrame(rows, columns=list(synthetic.SyntheticQuery.model_fields))
    meta |= {"path": dg.MetadataValue.path(str(path)), "queries": len(frame)}
    return frame.assign(round_trip=frame["round_trip"].map(json.dumps)), meta


def pool_rankings(
    settings: Settings, labels: LabelSettings, dataset: str, synthetic_queries: pd.DataFrame
) -> tuple[pd.DataFrame, dict]:
    """Every pooled system's ranks of the suite's and the companion queries, retrieved once for
    the label steps to share."""
    suite = _suite(settings, dataset)
    pooling = labels.pooling(settings, dataset, suite)
    ranks = labelling.pooled_ranks(suite, _companion(synthetic_queries), pooling, labels.depth)
    return ranks, {"systems": list(pooling.systems), "queries": int(ranks["query_id"].nunique())}


def grade_pool(
    settings: Settings,
    labels: LabelSettings,
    dataset: str,
    synthetic_queries: pd.DataFrame,
    pooled_rankings: pd.DataFrame,
    log,
) -> tuple[pd.DataFrame, dict]:
    """UMBRELA labels of the pooled pairs; labels.jsonl and llm.qrels written."""
    suite, llm = _suite(settings, dataset), labels.llm(settings)
    companion = _companion(synthetic_queries)
    pairs = labelling.pooled_pairs(suite, companion, pooled_rankings, labels.depth)
    graded = judge_labels.grade(llm, pairs)
    meta = {"pairs": len(pairs), **usage(llm)}
    if not labels.dry_run:
        qrels = labelling.write_labels(settings.storage / "labels" / dataset, graded)
        unparseable = sum(lab.grade is None for lab in graded)
        (log.warning if unparseable else log.info)(
            f"{dataset}: {len(graded)} LLM label(s), {unparseable} unparseable "
            "(left out of the qrels)"
        )
        meta |= {"unparseable": unparseable, "qrels": dg.MetadataValue.path(str(qrels))}
    return judge_labels.labels_frame(graded), meta


def calibrate_judge(
    settings: Settings,
    labels: LabelSettings,
    policy: GatePolicy,
    dataset: str,
    inputs: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame],
    log,
) -> tuple[calibration.Calibration | None, dict]:
    """The judge against the human grades (None on a dry run); calibration.json written.
    `inputs`: the synthetic queries, the pooled rankings and the LLM labels."""
    synthetic_queries, ranks, llm_labels = inputs
    suite, llm = _suite(settings, dataset), labels.llm(settings)
    pairs = labelling.pooled_pairs(suite, _companion(synthetic_queries), ranks, labels.depth)
    graded = [
        judge_labels.Label.model_validate({k: (None if pd.isna(v) else v) for k, v in r.items()})
        for r in llm_labels.to_dict("records")
    ]
    second = config.second_judge()
    result = labelling.calibrate(
        llm,
        pairs,
        graded,
        ranks,
        _human(settings, dataset, suite),
        min_kappa=policy.rules_for(dataset).calibration.min_kappa,
        check_sample=labels.check_sample,
        seed=labels.seed,
        second=second and LLM(second, settings.storage / "llm_cache", dry_run=labels.dry_run),
        folder=None if labels.dry_run else settings.storage / "labels" / dataset,
    )
    meta = usage(llm)
    if result is None:
        return None, meta
    log.info(labelling.describe(result))
    if result.refusal:
        log.warning(result.refusal)
    path = settings.storage / "labels" / dataset / "calibration.json"
    return result, meta | {
        "kappa_quadratic": result.kappa_quadratic,
        "kendall_tau": result.kendall_tau,
        "usable_for_gating": result.usable,
        "pairs": result.pairs,
        "path": dg.MetadataValue.path(str(path)),
    }


def decide_ppi(
    settings: Settings,
    labels: LabelSettings,
    policy: GatePolicy,
    dataset: str,
    inputs: tuple[pd.DataFrame, pd.DataFrame, calibration.Calibration | None],
    log,
) -> str:
    """The PPI verdict of every pooled system against the reference (ppi_verdict.json); a
    blocked verdict is a refusal. `inputs`: the pooled rankings, the LLM labels and the
    judge's calibration."""
    ranks, llm_labels, judged = inputs
    if judged is None:
        raise refusal(f"{dataset}: no calibration of the judge (a dry run): no PPI verdict")
    suite = _suite(settings, dataset)
    folder = _companion_folder(settings, dataset, suite)
    runs = label_verdict.summaries(
        dataset,
        ranks,
        _human(settings, dataset, suite),
        judge_labels.parsed_grades(llm_labels),
        load_sample(folder / labelling.SAMPLE_FILE),
        where=str(synthetic.sheet_path(folder, suite)),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        measures=policy.rules_for(dataset).compare or (PRIMARY_MEASURE,),
    )
    reference = labels.reference or next(iter(labels.pooled_systems(settings)))
    verdict = label_verdict.verdict(runs, reference, policy, judged)
    write_text(
        settings.storage / "labels" / dataset / "ppi_verdict.json",
        verdict.model_dump_json(indent=1) + "\n",
    )
    for check in verdict.checks:
        log.info(check.message)
    line = f"PPI {dataset}: {verdict.summary}"
    if not verdict.passed:
        raise refusal(line)
    log.info(line)
    return verdict.summary
