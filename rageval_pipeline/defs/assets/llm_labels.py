"""Synthetic queries, LLM labels and the judge's calibration as assets.

`synthetic_queries` -> `pooled_rankings` -> `llm_labels` -> `judge_calibration` ->
`ppi_verdict`, per golden-suite partition,
downstream of the suite's `queries`, in the group `llm_labels` run by the job `label_dataset`.
Built only when a provider is configured (RAGEVAL_*), like the generation group. The files
are those of `rageval synth` and `rageval label` (core/generation/labelling.py), under
`$RAGEVAL_STORAGE/synthetic/<dataset>/` and `labels/<dataset>/`; a companion set committed
beside the suite (`data/suites/<s>/<s>.synthetic.jsonl`, with its `sample.json`) is read
instead of writing one. Every reply is cached, so a re-run makes no call. docs/synthetic.md.
"""

import dagster as dg
import pandas as pd

from rageval_pipeline.core.generation import calibration, prompts
from rageval_pipeline.defs.assets.dense_index import STEPS_IO
from rageval_pipeline.defs.assets.generation import one_line
from rageval_pipeline.defs.assets.label_steps import (
    FORMAT_VERSION,
    GROUP,
    JOB,
    LabelSettings,
    calibrate_judge,
    code_version,
    decide_ppi,
    grade_pool,
    make_synthetic_queries,
    pool_rankings,
)
from rageval_pipeline.defs.executors import executor_from_env
from rageval_pipeline.defs.policy import GatePolicyResource
from rageval_pipeline.defs.resources import Settings

__all__ = ["LabelSettings", "build_label_assets", "build_labels"]


# The assets: each wires its step to Dagster (partition, resources, upstream values, metadata).


def _synthetic_queries(common: dict) -> dg.AssetsDefinition:
    @dg.asset(
        deps=["queries"],
        kinds={"json"},
        description="LLM-written queries from sampled passages, round-trip filtered and "
        "de-duplicated: the suite's companion query set, with its seeded human sample.",
        code_version=code_version(prompts.SYNTHETIC_QUERY),
        **common,
    )
    @one_line()
    def synthetic_queries(context, settings: Settings, labels: LabelSettings) -> pd.DataFrame:
        frame, meta = make_synthetic_queries(settings, labels, context.partition_key, context.log)
        context.add_output_metadata(meta)
        return frame

    return synthetic_queries


def _pooled_rankings(common: dict) -> dg.AssetsDefinition:
    @dg.asset(
        kinds={"parquet"},
        description="Every pooled system's ranks of the suite's and the synthetic queries "
        "(query_id, target_id, system, rank): retrieved once, shared by the label steps.",
        code_version=FORMAT_VERSION,
        **common,
    )
    @one_line()
    def pooled_rankings(
        context, settings: Settings, labels: LabelSettings, synthetic_queries: pd.DataFrame
    ) -> pd.DataFrame:
        ranks, meta = pool_rankings(settings, labels, context.partition_key, synthetic_queries)
        context.add_output_metadata(meta)
        return ranks

    return pooled_rankings


def _llm_labels(common: dict) -> dg.AssetsDefinition:
    @dg.asset(
        kinds={"parquet"},
        description="UMBRELA 0-3 labels of the pooled top k of every query, the suite's and "
        "the synthetic ones; llm.qrels (TREC) for --llm-qrels, unparseable replies left out.",
        code_version=code_version(prompts.RELEVANCE),
        **common,
    )
    @one_line()
    def llm_labels(
        context,
        settings: Settings,
        labels: LabelSettings,
        synthetic_queries: pd.DataFrame,
        pooled_rankings: pd.DataFrame,
    ) -> pd.DataFrame:
        inputs = (synthetic_queries, pooled_rankings)
        frame, meta = grade_pool(settings, labels, context.partition_key, *inputs, context.log)
        context.add_output_metadata(meta)
        return frame

    return llm_labels


def _judge_calibration(common: dict) -> dg.AssetsDefinition:
    @dg.asset(
        kinds={"json"},
        io_manager_key=STEPS_IO,
        description="The judge against human grades: weighted kappa, confusion per grade, "
        "Kendall's tau of system rankings, bias checks; refused for gating below the "
        "policy's calibration.min_kappa.",
        code_version=code_version(prompts.RELEVANCE),
        **common,
    )
    @one_line()
    def judge_calibration(
        context,
        settings: Settings,
        labels: LabelSettings,
        policy: GatePolicyResource,
        synthetic_queries: pd.DataFrame,
        pooled_rankings: pd.DataFrame,
        llm_labels: pd.DataFrame,
    ) -> calibration.Calibration | None:
        inputs = (synthetic_queries, pooled_rankings, llm_labels)
        args = (settings, labels, policy.policy, context.partition_key, inputs, context.log)
        result, meta = calibrate_judge(*args)
        context.add_output_metadata(meta)
        return result

    return judge_calibration


def _ppi_verdict(common: dict) -> dg.AssetsDefinition:
    @dg.asset(
        kinds={"json"},
        description="statistics.rule ppi on the synthetic population: every pooled system "
        "against the reference system, LLM labels corrected on the random human sample.",
        code_version=FORMAT_VERSION,
        **common,
    )
    @one_line()
    def ppi_verdict(
        context,
        settings: Settings,
        labels: LabelSettings,
        policy: GatePolicyResource,
        pooled_rankings: pd.DataFrame,
        llm_labels: pd.DataFrame,
        judge_calibration: calibration.Calibration | None,
    ) -> dg.MaterializeResult:
        inputs = (pooled_rankings, llm_labels, judge_calibration)
        args = (settings, labels, policy.policy, context.partition_key, inputs, context.log)
        return dg.MaterializeResult(metadata={"verdict": decide_ppi(*args)})

    return ppi_verdict


def build_label_assets(datasets: dg.PartitionsDefinition) -> list[dg.AssetsDefinition]:
    common = dict(partitions_def=datasets, group_name=GROUP)
    steps = (_synthetic_queries, _pooled_rankings, _llm_labels, _judge_calibration, _ppi_verdict)
    return [asset(common) for asset in steps]


def build_labels(datasets: dg.PartitionsDefinition) -> tuple[list, object, dict]:
    """The group's assets, its job and its resource, for `definitions` when configured."""
    job = dg.define_asset_job(
        JOB,
        selection=dg.AssetSelection.groups(GROUP),
        executor_def=executor_from_env(),
        description="Synthetic queries, LLM relevance labels and the judge's calibration.",
    )
    return build_label_assets(datasets), job, {"labels": LabelSettings()}
