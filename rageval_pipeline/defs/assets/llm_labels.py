"""Synthetic queries, LLM labels and the judge's calibration as assets.

`synthetic_queries` -> `llm_labels` -> `judge_calibration`, per golden-suite partition,
downstream of the suite's `queries`, in the group `llm_labels` run by the job `label_dataset`.
Built only when a provider is configured (RAGEVAL_*), like the generation group. The files
are those of `rageval synth` and `rageval label` (core/generation/labelling.py), under
`$RAGEVAL_STORAGE/synthetic/<dataset>/` and `labels/<dataset>/`; a companion set committed
beside the suite (`data/suites/<s>/<s>.synthetic.jsonl`, with its `sample.json`) is read
instead of writing one. Every reply is cached, so a re-run makes no call. docs/synthetic.md.
"""

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pandas as pd

from rageval_pipeline.core.gate import label_verdict
from rageval_pipeline.core.gate.policy import load_policy
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
from rageval_pipeline.core.systems import load_systems
from rageval_pipeline.defs.assets.chunked import from_storage
from rageval_pipeline.defs.assets.generation import one_line
from rageval_pipeline.defs.assets.ingest import table_key
from rageval_pipeline.defs.executors import executor_from_env
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

    def pooling(self, settings: Settings, dataset: str, suite: Suite) -> labelling.Pooling:
        """The pooled systems, which index the fresh stored `<system>/chunks` of `dataset`
        where one chunks as a system does, when the stored corpus is the suite as it is now
        (these steps read the suite itself); else the suite chunked in this process."""
        path = settings.data / "systems.yaml"
        catalog = load_systems(path)
        names = self.systems or list(catalog)
        unknown = sorted(set(names) - set(catalog))
        if unknown:
            raise refusal(f"resources.labels.config.systems names unknown system(s) {unknown}")
        wanted = set(names) | {m for n in names for m in catalog[n].member_names}
        systems = {n: s for n, s in catalog.items() if n in wanted}
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


def _usage(llm: LLM) -> dict:
    return {f"llm_{k}": v for k, v in llm.usage.model_dump().items()} | {"model": llm.label}


def _version(prompt: str) -> str:
    try:
        model = config.from_env("judge")
        used = [model.provider, model.model, model.params(), model.structured]
    except config.GenerationError:
        used = None  # the step reports the bad variable
    return content_key(FORMAT_VERSION, prompts.PROMPT_VERSION, prompt_hash(prompt), used)[:16]


def _companion(frame: pd.DataFrame) -> list[synthetic.SyntheticQuery]:
    rows = frame.assign(round_trip=frame["round_trip"].map(json.loads)).to_dict("records")
    return [synthetic.SyntheticQuery.model_validate(r) for r in rows]


def build_label_assets(datasets: dg.PartitionsDefinition) -> list[dg.AssetsDefinition]:
    common = dict(partitions_def=datasets, group_name=GROUP)

    @dg.asset(
        deps=["queries"],
        kinds={"json"},
        description="LLM-written queries from sampled passages, round-trip filtered and "
        "de-duplicated: the suite's companion query set, with its seeded human sample.",
        code_version=_version(prompts.SYNTHETIC_QUERY),
        **common,
    )
    @one_line()
    def synthetic_queries(
        context: dg.AssetExecutionContext, settings: Settings, labels: LabelSettings
    ) -> pd.DataFrame:
        dataset = settings.dataset(context).name
        suite = _suite(settings, dataset)
        committed = synthetic.companion_path(settings.dataset_folder(dataset), suite)
        meta: dict = {}
        if committed.exists():
            path = committed
            context.log.info(f"companion query set read from {committed}: no call made")
        else:
            llm = labels.llm(settings)
            folder = settings.storage / "synthetic" / dataset
            pooling = labels.pooling(settings, dataset, suite)
            outcome = labelling.synthesize(
                suite,
                llm,
                pooling,
                folder,
                n=labels.n,
                seed=labels.seed,
                human_sample=labels.human_sample,
                depth=labels.depth,
            )
            meta = _usage(llm)
            if outcome is None:
                context.add_output_metadata(meta)
                return pd.DataFrame(columns=list(synthetic.SyntheticQuery.model_fields))
            path = outcome.companion
            meta |= outcome.report.model_dump()
        rows = [q.model_dump() for q in synthetic.read_companion(path)]
        frame = pd.DataFrame(rows, columns=list(synthetic.SyntheticQuery.model_fields))
        context.add_output_metadata(
            {"path": dg.MetadataValue.path(str(path)), "queries": len(frame), **meta}
        )
        return frame.assign(round_trip=frame["round_trip"].map(json.dumps))

    @dg.asset(
        ins={"synthetic_queries": dg.AssetIn("synthetic_queries")},
        kinds={"parquet"},
        description="UMBRELA 0-3 labels of the pooled top k of every query, the suite's and "
        "the synthetic ones; llm.qrels (TREC) for --llm-qrels, unparseable replies left out.",
        code_version=_version(prompts.RELEVANCE),
        **common,
    )
    @one_line()
    def llm_labels(
        context: dg.AssetExecutionContext,
        settings: Settings,
        labels: LabelSettings,
        synthetic_queries: pd.DataFrame,
    ) -> pd.DataFrame:
        dataset = settings.dataset(context).name
        suite = _suite(settings, dataset)
        llm = labels.llm(settings)
        pairs, _ = labelling.pooled(
            suite,
            _companion(synthetic_queries),
            labels.pooling(settings, dataset, suite),
            labels.depth,
        )
        graded = judge_labels.grade(llm, pairs)
        meta = {"pairs": len(pairs), **_usage(llm)}
        if not labels.dry_run:
            qrels = labelling.write_labels(settings.storage / "labels" / dataset, graded)
            unparseable = sum(lab.grade is None for lab in graded)
            (context.log.warning if unparseable else context.log.info)(
                f"{dataset}: {len(graded)} LLM label(s), {unparseable} unparseable "
                "(left out of the qrels)"
            )
            meta |= {"unparseable": unparseable, "qrels": dg.MetadataValue.path(str(qrels))}
        context.add_output_metadata(meta)
        return judge_labels.labels_frame(graded)

    @dg.asset(
        ins={
            "llm_labels": dg.AssetIn("llm_labels"),
            "synthetic_queries": dg.AssetIn("synthetic_queries"),
        },
        kinds={"json"},
        description="The judge against human grades: weighted kappa, confusion per grade, "
        "Kendall's tau of system rankings, bias checks; refused for gating below the "
        "policy's calibration.min_kappa.",
        code_version=_version(prompts.RELEVANCE),
        **common,
    )
    @one_line()
    def judge_calibration(
        context: dg.AssetExecutionContext,
        settings: Settings,
        labels: LabelSettings,
        llm_labels: pd.DataFrame,
        synthetic_queries: pd.DataFrame,
    ) -> dg.MaterializeResult:
        dataset = settings.dataset(context).name
        suite = _suite(settings, dataset)
        llm = labels.llm(settings)
        pairs, ranks = labelling.pooled(
            suite,
            _companion(synthetic_queries),
            labels.pooling(settings, dataset, suite),
            labels.depth,
        )
        graded = [
            judge_labels.Label.model_validate(
                {k: (None if pd.isna(v) else v) for k, v in r.items()}
            )
            for r in llm_labels.to_dict("records")
        ]
        sheet = synthetic.sheet_path(_companion_folder(settings, dataset, suite), suite)
        second = config.second_judge()
        policy = load_policy(settings.data / "gate.yaml")
        result = labelling.calibrate(
            llm,
            pairs,
            graded,
            ranks,
            labelling.human_grades(suite, [sheet] if sheet.exists() else []),
            min_kappa=policy.rules_for(dataset).calibration.min_kappa,
            check_sample=labels.check_sample,
            seed=labels.seed,
            second=second and LLM(second, settings.storage / "llm_cache", dry_run=labels.dry_run),
            folder=None if labels.dry_run else settings.storage / "labels" / dataset,
        )
        meta = _usage(llm)
        if result is None:
            return dg.MaterializeResult(metadata=meta)
        context.log.info(labelling.describe(result))
        if result.refusal:
            context.log.warning(result.refusal)
        path = settings.storage / "labels" / dataset / "calibration.json"
        return dg.MaterializeResult(
            metadata={
                "kappa_quadratic": result.kappa_quadratic,
                "kendall_tau": result.kendall_tau,
                "usable_for_gating": result.usable,
                "pairs": result.pairs,
                "path": dg.MetadataValue.path(str(path)),
                **meta,
            }
        )

    @dg.asset(
        ins={"llm_labels": dg.AssetIn("llm_labels")},
        deps=["judge_calibration"],
        kinds={"json"},
        description="statistics.rule ppi on the synthetic population: every pooled system "
        "against the reference system, LLM labels corrected on the random human sample.",
        code_version=FORMAT_VERSION,
        **common,
    )
    @one_line()
    def ppi_verdict(
        context: dg.AssetExecutionContext,
        settings: Settings,
        labels: LabelSettings,
        llm_labels: pd.DataFrame,
    ) -> dg.MaterializeResult:
        dataset = settings.dataset(context).name
        suite = _suite(settings, dataset)
        out = settings.storage / "labels" / dataset
        judged = calibration.Calibration.model_validate_json(
            (out / "calibration.json").read_text("utf-8")
        )
        folder = _companion_folder(settings, dataset, suite)
        sheet = synthetic.sheet_path(folder, suite)
        companion = synthetic.read_companion(synthetic.companion_path(folder, suite))
        pooling = labels.pooling(settings, dataset, suite)
        _, ranks = labelling.pooled(suite, companion, pooling, labels.depth)
        policy = load_policy(settings.data / "gate.yaml")
        runs = label_verdict.summaries(
            dataset,
            ranks,
            labelling.human_grades(suite, [sheet] if sheet.exists() else []),
            judge_labels.parsed_grades(llm_labels),
            load_sample(folder / labelling.SAMPLE_FILE),
            where=str(sheet),
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            measures=policy.rules_for(dataset).compare or (PRIMARY_MEASURE,),
        )
        verdict = label_verdict.verdict(
            runs, labels.reference or next(iter(pooling.systems)), policy, judged
        )
        write_text(out / "ppi_verdict.json", verdict.model_dump_json(indent=1) + "\n")
        for check in verdict.checks:
            context.log.info(check.message)
        line = f"PPI {dataset}: {verdict.summary}"
        if not verdict.passed:
            raise refusal(line)
        context.log.info(line)
        return dg.MaterializeResult(metadata={"verdict": verdict.summary})

    return [synthetic_queries, llm_labels, judge_calibration, ppi_verdict]


def build_labels(datasets: dg.PartitionsDefinition) -> tuple[list, object, dict]:
    """The group's assets, its job and its resource, for `definitions` when configured."""
    job = dg.define_asset_job(
        JOB,
        selection=dg.AssetSelection.groups(GROUP),
        executor_def=executor_from_env(),
        description="Synthetic queries, LLM relevance labels and the judge's calibration.",
    )
    return build_label_assets(datasets), job, {"labels": LabelSettings()}
