"""The optional generation check, built only when a provider is configured.

`ground_truth` -> `<system>/answers` -> `<system>/answer_judgments`, per dataset partition,
in the asset group `generation`, run by the job `evaluate_generation` (never by the retrieval
jobs). Answers read each system's stored run and chunks; judgments attach `AnswerCorrectness`
(with its 95% Wilson interval) to the retrieval run they judge in DuckDB, where the gate reads
it like any other measure. Keys are read from the environment inside the step, never from run
config, so they appear in no Dagster record. A provider's failure, the step's deadline or a
generation set that names a query the dataset lacks ends the step with its one line (a
`dagster.Failure` chained to nothing). Reference: docs/generation.md.
"""

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pandas as pd

from rageval_pipeline.core import systems
from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.generation import config, correctness, prompts
from rageval_pipeline.core.generation.llm import LLM, prompt_hash
from rageval_pipeline.core.settings.providers import GenerationScope
from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.storage.location import StorageError
from rageval_pipeline.core.storage.reuse import content_key
from rageval_pipeline.core.suites import loaders
from rageval_pipeline.defs.assets.chunked import chunked
from rageval_pipeline.defs.executors import executor_from_env
from rageval_pipeline.defs.failures import refusal
from rageval_pipeline.defs.resources import Dataset, Settings, WarehouseResource

GROUP = "generation"
JOB = "evaluate_generation"
# Bump when these assets' tables or how they are computed change: part of their code versions.
FORMAT_VERSION = "2"  # 2: strict verdicts, the interval in ci_low/ci_high


class GenerationSettings(dg.ConfigurableResource):
    """Run-wide knobs of the generation check (providers and keys come from RAGEVAL_*)."""

    dry_run: bool = False  # count the calls and tokens a run would make; call nothing
    samples: int = 1  # judge samples per answer; agreement is reported
    context_k: int = 5  # retrieved units given to the answering model
    queries: list[str] | None = None  # default: correctness.GENERATION_SETS[dataset]

    def llm(self, settings: Settings, role: config.Role) -> LLM:
        cache = settings.storage / "llm_cache"
        return LLM(config.from_env(role), cache, dry_run=self.dry_run)

    def query_ids(self, dataset: str) -> tuple[tuple[str, ...], str]:
        """The generation set and, for messages, where it comes from."""
        if self.queries:
            return tuple(self.queries), "resources.generation.config.queries"
        if dataset not in correctness.GENERATION_SETS:
            raise refusal(
                f"no generation set for {dataset}: set resources.generation.config.queries"
            )
        return correctness.GENERATION_SETS[dataset], DEFAULT_SET.format(dataset=dataset)


DEFAULT_SET = "the default generation set of {dataset} (core/generation/correctness.py)"


@contextmanager
def one_line() -> Iterator[None]:
    """An expected failure (a provider's, the deadline, bad input) as a `dagster.Failure`
    holding its one line, chained to nothing: no provider or httpx trace behind it."""
    try:
        yield
    except (config.GenerationError, InputError) as exc:
        raise refusal(str(exc)) from None


def _queries_file(folder: Path) -> Path:
    """The file a dataset's queries come from (a golden suite's, or BEIR's queries.jsonl)."""
    return loaders.suite_file(folder) or folder / "queries.jsonl"


def check_default_sets(suites_dir: Path) -> None:
    """Each bundled suite's default generation set against the suite, when the definitions
    load: a query the suite no longer has is one InputError naming the suite file and the
    query, before any run starts (the BEIR sets are checked in the step, once downloaded)."""
    for dataset, query_ids in sorted(correctness.GENERATION_SETS.items()):
        folder = suites_dir / dataset
        if folder.is_dir():
            data = loaders.load_dataset(folder)
            where = _queries_file(folder)
            named = DEFAULT_SET.format(dataset=dataset)
            correctness.check_set(query_ids, data.queries, data.qrels, where, named)


def selected_systems(catalog: dict[str, systems.SystemConfig]) -> list[str]:
    """`RAGEVAL_SYSTEMS` (comma-separated) or every configured system."""
    wanted = GenerationScope.from_env().systems
    unknown = sorted(set(wanted) - set(catalog))
    if unknown:
        raise ValueError(f"RAGEVAL_SYSTEMS names unknown system(s) {unknown}")
    return wanted or list(catalog)


def chunk_sources(system: systems.SystemConfig, catalog: dict) -> list[str]:
    """Systems whose chunks a system's run ids refer to (itself, or its fused members)."""
    if system.member_names:
        return sorted({s for m in system.member_names for s in chunk_sources(catalog[m], catalog)})
    return [system.name] if system.indexed else []


def code_versions(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The code version of each generation asset: a digest of what changes its output, namely
    the prompt it sends, the model that answers it (provider, model, sampling parameters, the
    judge's structured output; never the key) and this module's format. Run config
    (context_k, samples) is not code."""

    def version(role: config.Role, prompt: str) -> str:
        try:
            model = config.from_env(role, env)
            used = [model.provider, model.model, model.params()]
            if role == "judge":  # the judge's verdict is asked for as structured output
                used.append(model.structured)
        except config.GenerationError:
            used = None  # the step itself reports the bad variable
        return content_key(FORMAT_VERSION, prompts.PROMPT_VERSION, prompt_hash(prompt), used)[:16]

    return {
        "ground_truth": version("answer", prompts.GROUND_TRUTH),
        "answers": version("answer", prompts.RAG_ANSWER),
        "answer_judgments": version("judge", prompts.CORRECTNESS),
    }


def usage(llm: LLM) -> dict:
    """An LLM's calls, tokens and model, as step metadata."""
    return {f"llm_{k}": v for k, v in llm.usage.model_dump().items()} | {"model": llm.label}


def _stored_ground_truth(settings: Settings, dataset: str, version: str) -> list[Path]:
    """Where a reference-answer version may live: committed with the suite, else in storage."""
    name = f"{version}.json"
    return [
        settings.dataset_folder(dataset) / "ground_truth" / name,
        settings.storage / "ground_truth" / dataset / name,
    ]


def build_generation_assets(
    catalog: dict[str, systems.SystemConfig], datasets: dg.PartitionsDefinition
) -> list[dg.AssetsDefinition]:
    """`ground_truth`, then `<system>/answers` and `<system>/answer_judgments` of each selected
    system."""
    common, versions = dict(partitions_def=datasets, group_name=GROUP), code_versions()
    out = [_ground_truth_asset(catalog, common, versions)]
    for name in selected_systems(catalog):
        out += [
            _answers_asset(catalog[name], catalog, common, versions),
            _judgments_asset(catalog[name], common, versions),
        ]
    return out


# The steps: plain functions of their inputs (`log`: the step's logger), returning value, metadata.


def write_ground_truth(
    settings: Settings,
    generation: GenerationSettings,
    catalog: dict[str, systems.SystemConfig],
    partition: Dataset,
    inputs: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame],
    log,
) -> tuple[pd.DataFrame, dict]:
    """The reference answers of the dataset's generation set: a committed or stored version
    of the same plan and model is read (no call), else written by the answering model.
    `inputs`: corpus, queries and qrels."""
    corpus, queries, qrels = inputs
    dataset, folder = partition.name, partition.folder
    judged = qrels[qrels["split"] == settings.split]
    query_ids, named = generation.query_ids(dataset)
    correctness.check_set(query_ids, queries, judged, _queries_file(folder), named)
    plan = correctness.plan_ground_truth(queries, judged, query_ids)
    llm = generation.llm(settings, "answer")
    version = correctness.ground_truth_version(llm, plan)
    stored = _stored_ground_truth(settings, dataset, version)
    found = next((p for p in stored if p.exists()), None)
    if found is not None:
        truth = correctness.GroundTruth.model_validate_json(found.read_text("utf-8"))
        log.info(f"reference answers {version} read from {found}: no call made")
    else:
        reference = partition.reference
        chunks = []
        if reference is not None:  # (a system's stored chunks when one chunks so)
            stored_corpus = settings.stored("corpus", partition=dataset)  # `corpus`'s file
            args = (settings, dataset, stored_corpus, reference, reference, *catalog.values())
            chunks = [chunked(*args)]
        texts = correctness.unit_texts(corpus, *chunks)
        truth = correctness.synthesize_ground_truth(llm, dataset, plan, texts)
        found = stored[1]
        if not generation.dry_run:
            write_text(found, truth.model_dump_json(indent=2) + "\n")
    grades = ", ".join(map(str, sorted({r.grade for r in truth.references})))
    meta = {"version": version, "path": dg.MetadataValue.path(str(found)), **usage(llm)}
    meta |= {"queries": len(truth.references), "grades_used": grades}
    df = pd.DataFrame([r.model_dump() for r in truth.references])
    written_by = f"{truth.provider}:{truth.model}"
    return df.assign(
        targets=df["targets"].map(json.dumps), version=version, written_by=written_by
    ), meta


def answer(
    settings: Settings,
    generation: GenerationSettings,
    system: systems.SystemConfig,
    sources: list[str],
    dataset: str,
    inputs: tuple[pd.DataFrame, pd.DataFrame],
    log,
) -> tuple[pd.DataFrame, dict] | None:
    """The system's answers from its retrieved context; None, with a warning, when the system
    has not been evaluated on the dataset. `inputs`: ground truth and corpus."""
    ground_truth, corpus = inputs
    name = system.name
    # The run and chunks are read from storage, not loaded as inputs: a system the user has
    # not evaluated (the documented recipe evaluates bm25 only) is left out with one line
    # instead of failing the job on its missing chunks; its judgments are skipped with it.
    try:
        run = settings.stored(name, "run", partition=dataset).frame
        chunks = [settings.stored(s, "chunks", partition=dataset).frame for s in sources]
    except StorageError:
        log.warning(
            f"{dataset}/{name}: not answered: {name} has not been evaluated on {dataset} "
            f"(run evaluate_{name} or evaluate_dataset first, or leave it out with "
            "RAGEVAL_SYSTEMS)"
        )
        return None
    with one_line():
        llm = generation.llm(settings, "answer")
        texts = correctness.unit_texts(corpus, *chunks)
        references = _references(ground_truth)
        df = correctness.rag_answers(llm, run, references, texts, generation.context_k)
    empty = int((df["context_ids"] == "[]").sum())
    if empty:  # e.g. an external system whose ids are not in the corpus
        log.warning(f"{empty} answer(s) had no retrieved text to answer from")
    return df, {"answers": len(df), "no_context": empty, **usage(llm)}


def judge(
    settings: Settings,
    warehouse: WarehouseResource,
    generation: GenerationSettings,
    where: tuple[str, str],
    inputs: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame],
    log,
) -> tuple[pd.DataFrame, dict]:
    """The judge's verdict on each answer, AnswerCorrectness recorded in the warehouse and a
    report written. `where`: dataset and system; `inputs`: answers, ground truth, metrics."""
    (dataset, name), (answers, ground_truth, metrics) = where, inputs
    llm = generation.llm(settings, "judge")
    judged = correctness.judge_answers(llm, answers, _references(ground_truth), generation.samples)
    summary = correctness.summarize(judged)
    run_id = str(metrics["run_id"].iloc[0])  # the retrieval run these answers came from
    meta = {"run_id": run_id, **summary.model_dump(), **usage(llm)}
    if generation.dry_run:
        log.info(f"dry run: {llm.usage.calls} judge call(s) would be made")
        return judged, meta
    keys = dict(run_id=run_id, dataset=dataset, split=settings.split, system=name)
    rows = correctness.metric_rows(summary, judged)
    correctness.record(warehouse.warehouse, keys, rows, datetime.now(UTC))
    report = settings.reports_dir / "generation" / dataset / name / f"{run_id}.json"
    write_text(report, json.dumps(meta, indent=2, default=str) + "\n")
    (log.warning if summary.unparseable else log.info)(
        f"{dataset}/{name}: AnswerCorrectness={summary.rate:.3f} "
        f"[{summary.ci95_low:.3f}, {summary.ci95_high:.3f}] over {summary.n} answers, "
        f"{summary.unparseable} unparseable verdict(s)"
    )
    return judged, meta | {"report": dg.MetadataValue.path(str(report))}


def _references(ground_truth: pd.DataFrame) -> list[correctness.Reference]:
    rows = ground_truth.assign(targets=ground_truth["targets"].map(json.loads))
    return [correctness.Reference.model_validate(r) for r in rows.to_dict("records")]


# The assets: each wires its step to Dagster.


def _ground_truth_asset(
    catalog: dict, common: dict, versions: dict[str, str]
) -> dg.AssetsDefinition:
    @dg.asset(
        ins={n: dg.AssetIn(n) for n in ("corpus", "queries", "qrels")},
        kinds={"json"},
        description="Reference answers written once from each selected query's best targets.",
        code_version=versions["ground_truth"],
        **common,
    )
    @one_line()
    def ground_truth(
        context: dg.AssetExecutionContext,
        settings: Settings,
        generation: GenerationSettings,
        corpus: pd.DataFrame,
        queries: pd.DataFrame,
        qrels: pd.DataFrame,
    ) -> pd.DataFrame:
        partition, inputs = settings.dataset(context), (corpus, queries, qrels)
        df, meta = write_ground_truth(settings, generation, catalog, partition, inputs, context.log)
        context.add_output_metadata(meta)
        return df

    return ground_truth


def _answers_asset(
    system: systems.SystemConfig, catalog: dict, common: dict, versions: dict[str, str]
) -> dg.AssetsDefinition:
    name, sources = system.name, chunk_sources(system, catalog)

    @dg.asset(
        key=[name, "answers"],
        ins={"ground_truth": dg.AssetIn("ground_truth"), "corpus": dg.AssetIn("corpus")},
        deps=[[name, "run"], *([s, "chunks"] for s in sources)],
        output_required=False,
        kinds={"parquet"},
        description=f"Answers generated from {name}'s retrieved context (skipped, with a "
        f"warning, when {name} has not been evaluated on the dataset).",
        code_version=versions["answers"],
        **common,
    )
    def answers(
        context: dg.AssetExecutionContext,
        settings: Settings,
        generation: GenerationSettings,
        ground_truth: pd.DataFrame,
        corpus: pd.DataFrame,
    ) -> Iterator[dg.Output]:
        dataset, inputs = settings.dataset(context).name, (ground_truth, corpus)
        made = answer(settings, generation, system, sources, dataset, inputs, context.log)
        if made is not None:
            yield dg.Output(made[0], metadata=made[1])

    return answers


def _judgments_asset(
    system: systems.SystemConfig, common: dict, versions: dict[str, str]
) -> dg.AssetsDefinition:
    name = system.name

    @dg.asset(
        key=[name, "answer_judgments"],
        ins={
            "answers": dg.AssetIn([name, "answers"]),
            "ground_truth": dg.AssetIn("ground_truth"),
            "metrics": dg.AssetIn([name, "metrics"]),
        },
        kinds={"parquet", "duckdb"},
        description=f"TRUE/FALSE/unparseable per answer of {name}, raw judge output kept; "
        "AnswerCorrectness with its 95% Wilson interval in DuckDB.",
        code_version=versions["answer_judgments"],
        **common,
    )
    @one_line()
    def answer_judgments(
        context: dg.AssetExecutionContext,
        settings: Settings,
        warehouse: WarehouseResource,
        generation: GenerationSettings,
        answers: pd.DataFrame,
        ground_truth: pd.DataFrame,
        metrics: pd.DataFrame,
    ) -> pd.DataFrame:
        where = (settings.dataset(context).name, name)
        inputs = (answers, ground_truth, metrics)
        judged, meta = judge(settings, warehouse, generation, where, inputs, context.log)
        context.add_output_metadata(meta)
        return judged

    return answer_judgments


def build_generation(
    catalog: dict[str, systems.SystemConfig],
    datasets: dg.PartitionsDefinition,
    suites_dir: Path,
) -> tuple[list[dg.AssetsDefinition], object, dict]:
    """The group's assets, its job (an unresolved asset job: Dagster exports no name for that
    type) and its resource, for `definitions` to add when configured; the default generation
    sets are checked against the bundled suites first."""
    check_default_sets(suites_dir)
    job = dg.define_asset_job(
        JOB,
        selection=dg.AssetSelection.groups(GROUP),
        executor_def=executor_from_env(),
        description="The generation check: reference answers, RAG answers and their judgments.",
    )
    return build_generation_assets(catalog, datasets), job, {"generation": GenerationSettings()}
