"""`rageval synth SUITE --n 400` (LLM-written queries as a companion set of the suite, with a
seeded human sample) and `rageval label SUITE` (UMBRELA 0-3 labels of every query's pool, LLM
qrels and the judge's calibration). Models come from RAGEVAL_* (docs/generation.md); the
population, the sample and the costs are described in docs/synthetic.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _common(parser: argparse.ArgumentParser) -> None:
    from rageval_pipeline.cli import add_storage_option, add_systems_option, at_least, price

    parser.add_argument("suite", type=Path, metavar="SUITE", help="suite file or folder")
    add_systems_option(parser)
    parser.add_argument(
        "--system", action="append", help="pool with this system only (repeatable; default all)"
    )
    parser.add_argument(
        "-k", "--depth", type=at_least(1), default=10, help="pool depth (default: %(default)s)"
    )
    parser.add_argument("--concurrency", type=at_least(1), help="requests in flight at once")
    parser.add_argument("--dry-run", action="store_true", help="count calls and tokens only")
    parser.add_argument(
        "--price-in",
        type=price,
        default=None,
        help="price per million input tokens ($RAGEVAL_PRICE_IN, default 0: a local model)",
    )
    parser.add_argument(
        "--price-out",
        type=price,
        default=None,
        help="price per million output tokens ($RAGEVAL_PRICE_OUT, default 0)",
    )
    add_storage_option(parser)


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    from rageval_pipeline.cli import add_policy_option, at_least

    synth = subparsers.add_parser(
        "synth",
        help="LLM-written queries from sampled passages, a companion set of the suite",
        description="LLM-written queries from passages sampled from the suite's corpus, kept "
        "when they retrieve their passage back: a companion set of the suite, with a seeded "
        "random sample of them for humans to judge (docs/synthetic.md).",
    )
    _common(synth)
    synth.add_argument(
        "--seed",
        type=at_least(0),
        default=0,
        help="seed of the passage draw (default: %(default)s); the human sample's seed is the "
        "kept queries' commitment, never chosen",
    )
    synth.add_argument(
        "--n", type=at_least(1), default=400, help="queries to draw (default: %(default)s)"
    )
    synth.add_argument(
        "--human-sample-size",
        type=at_least(0),
        default=60,
        dest="human_sample",
        metavar="N",
        help="queries sampled for humans to judge (default: %(default)s)",
    )
    synth.add_argument(
        "-o",
        "--output",
        type=Path,
        dest="out",
        metavar="DIR",
        help="folder for the files (default: the suite's)",
    )
    synth.set_defaults(func=run_synth)
    label = subparsers.add_parser(
        "label",
        help="UMBRELA 0-3 LLM labels of every query's pool, LLM qrels and calibration",
        description="Grade the pooled top k of the suite's and the synthetic queries with the "
        "judge model, write the LLM qrels, and calibrate the judge against the human grades.",
    )
    _common(label)
    label.add_argument(
        "--seed",
        type=at_least(0),
        default=0,
        help="seed of the bias checks' pair samples (default: %(default)s)",
    )
    label.add_argument("--synthetic", type=Path, help="companion file (<suite>.synthetic.jsonl)")
    label.add_argument(
        "--human", type=Path, action="append", default=[], help="graded judging sheet (.jsonl)"
    )
    add_policy_option(label, "the gate policy whose kappa floor the calibration is held to")
    label.add_argument("--check-sample", type=at_least(0), default=50, help="pairs per bias check")
    label.add_argument(
        "-o",
        "--output",
        type=Path,
        dest="out",
        metavar="DIR",
        help="folder for the labels, LLM qrels and calibration (default: $RAGEVAL_STORAGE/labels)",
    )
    label.set_defaults(func=run_label)


def _setup(args: argparse.Namespace):
    """(suite, its folder, pooling, judge LLM) from the arguments and the environment."""
    from rageval_pipeline.core.generation import config
    from rageval_pipeline.core.generation.labelling import Pooling
    from rageval_pipeline.core.generation.llm import LLM
    from rageval_pipeline.core.suites.golden import load_suite, resolve_suite_file
    from rageval_pipeline.core.systems import load_systems

    suite = load_suite(args.suite)
    catalog = load_systems(args.systems)
    names = args.system or list(catalog)
    unknown = sorted(set(names) - set(catalog))
    if unknown:
        raise config.GenerationError(f"--system names unknown system(s) {unknown}")
    wanted = {n for n in names} | {m for n in names for m in catalog[n].member_names}
    pooling = Pooling(
        systems={n: s for n, s in catalog.items() if n in wanted},
        embeddings_dir=args.storage / "embeddings",
        base_dir=args.systems.parent,
    )
    model = config.from_env("judge")
    if args.concurrency:
        model = model.model_copy(update={"concurrency": args.concurrency})
    llm = LLM(model, args.storage / "llm_cache", dry_run=args.dry_run)
    return suite, resolve_suite_file(args.suite).parent, pooling, llm


def _usage(llm, args: argparse.Namespace) -> str:
    from rageval_pipeline.core.generation.judge_labels import cost

    u = llm.usage
    price_in, price_out, currency, source = _prices(args)
    return (
        f"{'would make' if args.dry_run else 'made'} {u.calls} call(s), {u.cached} cached; "
        f"tokens in {u.input_tokens}, out {u.output_tokens}; estimated cost "
        f"{cost(u, price_in, price_out):.4f} {currency} ({llm.label}; {price_in:g} in, "
        f"{price_out:g} out per million tokens, from {source})"
    )


def run_synth(args: argparse.Namespace) -> int:
    from rageval_pipeline.core.generation import config, labelling

    try:
        suite, folder, pooling, llm = _setup(args)
        outcome = labelling.synthesize(
            suite,
            llm,
            pooling,
            args.out or folder,
            n=args.n,
            seed=args.seed,
            human_sample=args.human_sample,
            depth=args.depth,
        )
    except config.GenerationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(_usage(llm, args))
    if outcome is not None:
        r = outcome.report
        print(f"{outcome.companion}: {r.describe()}")
        if outcome.sample is not None:
            print(f"human sample: {outcome.sample}; judging sheet: {outcome.sheet}")
    return 0


def run_label(args: argparse.Namespace) -> int:
    from rageval_pipeline.cli import policy_of
    from rageval_pipeline.core.generation import config, judge_labels, labelling, synthetic
    from rageval_pipeline.core.generation.llm import LLM
    from rageval_pipeline.core.settings.providers import Labelling
    from rageval_pipeline.core.storage.files import write_text

    folder = args.out or args.storage / "labels"
    try:
        suite, _, pooling, llm = _setup(args)
        # Every input read before the first judge call: a bad sheet costs nothing.
        human = labelling.human_grades(suite, args.human)
        sampled = labelling.trec(labelling.sheet_grades(args.human)) if args.human else None
        companion = synthetic.read_companion(args.synthetic) if args.synthetic else []
        policy = policy_of(args.policy)
        second = config.second_judge()
        if second is not None:
            second = LLM(second, args.storage / "llm_cache", dry_run=args.dry_run)
        pairs, ranks = labelling.pooled(suite, companion, pooling, args.depth)
        labels = judge_labels.grade(llm, pairs)
        if not args.dry_run:
            qrels = labelling.write_labels(folder, labels)
            if sampled is not None:  # the sample's human qrels, for `rageval eval --llm-qrels`
                write_text(folder / "human.qrels", sampled)
        result = labelling.calibrate(
            llm,
            pairs,
            labels,
            ranks,
            human,
            min_kappa=policy.rules_for(suite.name).calibration.min_kappa,
            check_sample=args.check_sample,
            seed=args.seed,
            second=second,
            folder=folder,
        )
    except config.GenerationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(_usage(llm, args))
    if second is not None:
        print(f"second judge: {_usage(second, args)}")
    if result is None:
        return 0
    unparseable = sum(lab.grade is None for lab in labels)
    print(f"{qrels}: {len(labels)} label(s), {unparseable} unparseable")
    print(labelling.describe(result))
    if result.refusal:
        print(f"warning: {result.refusal}", file=sys.stderr)
    limit = Labelling.from_env().max_unparseable
    if labels and unparseable > limit * len(labels):
        print(
            f"error: {unparseable} of {len(labels)} label(s) unparseable ("
            f"{unparseable / len(labels):.0%}), above $RAGEVAL_MAX_UNPARSEABLE {limit:.0%}: "
            f"the judge does not answer in the prompt's format (raw replies in {folder})",
            file=sys.stderr,
        )
        return 1
    return 0


def _prices(args: argparse.Namespace) -> tuple[float, float, str, str]:
    """Per million input and output tokens (the options, else $RAGEVAL_PRICE_IN/_OUT), their
    currency ($RAGEVAL_PRICE_CURRENCY) and where the prices came from."""
    from rageval_pipeline.core.settings.providers import Labelling

    prices = Labelling.from_env()
    given = [args.price_in is not None, args.price_out is not None]
    from_env = {"price_in", "price_out"} & prices.model_fields_set
    sources = ["--price-in/--price-out"] if any(given) else []
    sources += ["$RAGEVAL_PRICE_IN/_OUT"] if from_env and not all(given) else []
    return (
        prices.price_in if args.price_in is None else args.price_in,
        prices.price_out if args.price_out is None else args.price_out,
        prices.price_currency,
        " and ".join(sources) or "the default 0: a local model; set $RAGEVAL_PRICE_IN/_OUT",
    )
