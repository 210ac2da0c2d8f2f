"""Measures as small named declarative objects, and the one parser that turns "P(rel=2)@5" into one.

Naming a measure is separate from computing it (see `compute.py`), in the style of ir_measures:
each family is a frozen pydantic model with a cutoff `k`, a relevance threshold `rel` and, for
nDCG, a `gain`; `str(measure)` gives the canonical name, which parses back to an equal object.

Canonical syntax: ``Family(param=value,...)@k``, or ``@512t`` for a token budget in place of the
cutoff (`span_names`); parameters left at their default are omitted and the others are sorted by
name. The parser also accepts the parameters after the cutoff
(``nDCG@10(gain=exp)``), each family's aliases, case-insensitively (``MRR``, ``MAP``,
``NDCG@10``, ``Recall@100``, ``HitRate@10``), and trec_eval's spellings (``ndcg_cut_10``,
``ndcg_cut.10``, ``P_5``, ``recall_100``, ``recip_rank``, ``map``, ``success_5``).

Each family also knows what the gate and the reports need: its `FAMILY` and whether higher is
better (the gate names a drop by the family).
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    PlainSerializer,
    ValidationError,
)

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.bounds import quote_json
from rageval_pipeline.core.measures.measure import (  # noqa: F401 - Family re-exported
    Cutoff,
    Family,
    Measure,
)
from rageval_pipeline.core.measures.span_names import SPAN_FAMILIES


class P(Measure):
    """Precision@k: relevant documents in the top k divided by k, even when fewer than k were
    retrieved (trec_eval `P_k`)."""

    NAME = "P"
    ALIASES = ("precision",)
    FAMILY = "ranking"


class R(Measure):
    """Recall@k: relevant documents in the top k divided by all relevant documents
    (trec_eval `recall_k`)."""

    NAME = "R"
    ALIASES = ("recall",)
    FAMILY = "recall"


class F1(Measure):
    """F1@k: harmonic mean of P@k and R@k, 0 when both are 0."""

    NAME = "F1"
    ALIASES = ("f-measure",)
    FAMILY = "recall"


class RR(Measure):
    """Reciprocal rank of the first relevant document, 0 if none (trec_eval `recip_rank`; with a
    cutoff only the top k are searched, as ir_measures `RR@k`). Its mean is MRR."""

    NAME = "RR"
    ALIASES = ("mrr", "recip_rank", "reciprocal_rank")
    FAMILY = "ranking"
    CUTOFF = "optional"


class nDCG(Measure):
    """Normalised DCG@k (Järvelin & Kekäläinen 2002): gain / log2(rank + 1) summed over the top k,
    divided by the same sum for the judgments sorted by label. `gain=lin` uses the label
    (trec_eval `ndcg_cut_k`, BEIR); `gain=exp` uses 2^label - 1 (Burges et al. 2005). Labels
    <= 0 give no gain. Every label > 0 counts, whatever the relevance threshold."""

    NAME = "nDCG"
    ALIASES = ("ndcg_cut",)
    FAMILY = "ranking"
    PARAMS = frozenset({"gain", "judged"})


class AP(Measure):
    """Average precision: the precision at each relevant retrieved document, summed and divided
    by the number of relevant documents (trec_eval `map`; `map_cut_k` with a cutoff). Its mean
    is MAP."""

    NAME = "AP"
    ALIASES = ("map", "map_cut")
    FAMILY = "ranking"
    CUTOFF = "optional"


class Success(Measure):
    """Success@k (hit rate): 1 if any relevant document is in the top k (trec_eval `success_k`)."""

    NAME = "Success"
    ALIASES = ("hit", "hits", "hitrate", "hit_rate")
    FAMILY = "recall"


class Rprec(Measure):
    """R-precision: precision at rank R, R being the number of relevant documents
    (trec_eval `Rprec`)."""

    NAME = "Rprec"
    ALIASES = ("r-prec", "r_prec")
    FAMILY = "ranking"
    CUTOFF = "none"


class Judged(Measure):
    """Judged@k: share of the top k that has any judgment, label 0 included; divides by k like
    P@k (ir_measures `Judged@k`)."""

    NAME = "Judged"
    FAMILY = "coverage"
    PARAMS = frozenset()


class ER(Measure):
    """Entity recall@k: distinct relevant *source documents* among
    the top k *chunks*, divided by the number of relevant documents. Unlike R@k on the
    document-level run, several chunks of one document use several of the k places."""

    NAME = "ER"
    ALIASES = ("entityrecall", "entity_recall")
    FAMILY = "recall"
    PARAMS = frozenset({"rel"})
    USES_SOURCE = True


class Diversity(Measure):
    """Diversity@k: distinct source documents in the top k divided by k. Needs no qrels."""

    NAME = "Diversity"
    FAMILY = "diversity"
    PARAMS = frozenset()
    USES_QRELS = False
    USES_SOURCE = True


class Clustering(Measure):
    """Clustering@k: share of the results in the top k that come from the most frequent source
    document (0 when nothing was retrieved). Needs no qrels."""

    NAME = "Clustering"
    FAMILY = "diversity"
    HIGHER_IS_BETTER = False  # one source filling the top k is the collapse
    PARAMS = frozenset()
    USES_QRELS = False
    USES_SOURCE = True


FAMILIES: dict[str, type[Measure]] = {
    cls.NAME: cls
    for cls in (
        *(P, R, F1, RR, nDCG, AP, Success, Rprec, Judged, ER, Diversity, Clustering),
        *SPAN_FAMILIES,
    )
}

# Lower-case spellings people write, mapped to a family.
_ALIASES: dict[str, type[Measure]] = {
    alias: cls for cls in FAMILIES.values() for alias in (cls.NAME.lower(), *cls.ALIASES)
}


# trec_eval writes the cutoff after "_" or ".": ndcg_cut_10, P.5, recall_100, success_5.
_TREC_EVAL = re.compile(r"^(?P<family>[A-Za-z][A-Za-z_-]*?)[_.](?P<k>\d+)$")

_SYNTAX = re.compile(
    r"^(?P<family>[A-Za-z][A-Za-z0-9_-]*)"
    r"(?:\((?P<before>[^()]*)\))?"
    r"(?:@(?P<k>\d+)(?P<tokens>[tT])?)?"
    r"(?:\((?P<after>[^()]*)\))?$"
)


def parse_measure(name: str | Measure) -> Measure:
    """Parse "nDCG@10", "P(rel=2)@5", "MRR", ... into a Measure; InputError if it is not one."""
    if isinstance(name, Measure):
        return name
    if not isinstance(name, str):
        raise InputError(
            None, f"a measure name is a string, not {quote_json(name)}", field="measure"
        )
    return _parse(name)


def canonical(name: str | Measure) -> str:
    """The canonical name of any spelling: "ndcg_cut_10" -> "nDCG@10"; InputError if none."""
    return _canonical(name) if isinstance(name, str) else str(parse_measure(name))


@functools.lru_cache(maxsize=4096)
def _canonical(name: str) -> str:
    """Cached: the gate canonicalises every measure key of every per-query row it reads."""
    return str(_parse(name))


def try_parse(name: str) -> Measure | None:
    """The measure `name` spells, None when it spells none (for names read from storage)."""
    try:
        return parse_measure(name)
    except InputError:
        return None


def sort_key(name: str) -> tuple[Any, ...]:
    """Natural order, so that nDCG@10 sorts before nDCG@100."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", name))


@functools.lru_cache(maxsize=4096)
def _parse(name: str) -> Measure:
    """parse_measure of a string; cached, as names repeat across every query and summary."""
    text = name.strip().replace(" ", "")
    trec = _TREC_EVAL.match(text)
    if trec is not None and trec["family"].lower() in _ALIASES:
        return _build(name, _ALIASES[trec["family"].lower()], {"k": int(trec["k"])})
    match = _SYNTAX.match(text)
    if match is None:
        raise InputError(None, f"cannot parse measure {quote_json(name)}", field="measure")
    family = _ALIASES.get(match["family"].lower())
    if family is None:
        known = ", ".join(FAMILIES)
        raise InputError(
            None, f"unknown measure {quote_json(name)} (known: {known})", field="measure"
        )
    if match["before"] is not None and match["after"] is not None:
        raise InputError(
            None, f"measure {quote_json(name)} has two parameter lists", field="measure"
        )
    fields: dict[str, object] = {}
    for item in filter(None, (match["before"] or match["after"] or "").split(",")):
        key, sep, value = item.partition("=")
        if item == "judged":  # a bare flag: the condensed variant
            key, sep, value = "judged", "=", "true"
        if not sep or key not in ("rel", "gain", "judged"):
            raise InputError(
                None,
                f"measure {quote_json(name)}: bad parameter {quote_json(item)} "
                "(rel=N, gain=lin|exp or judged)",
                field="measure",
            )
        fields[key] = value
    if match["k"] is not None:
        fields["budget" if match["tokens"] else "k"] = int(match["k"])
    return _build(name, family, fields)


def _build(name: str, family: type[Measure], fields: dict[str, object]) -> Measure:
    try:
        return family(**fields)
    except ValidationError as exc:
        problem = "; ".join(err["msg"].removeprefix("Value error, ") for err in exc.errors())
        raise InputError(None, f"measure {quote_json(name)}: {problem}", field="measure") from None


# --------------------------------------------------------------------- names in files people write


# `config.rule` is imported where a config file's name fails: naming `-m` on the command line
# need not load config's YAML reader (0.03 s more on `rageval eval`'s importing thread).


def _canonical_field(value: str) -> str:
    try:
        return canonical(value)
    except InputError as exc:
        from rageval_pipeline.core.io.config import rule

        raise rule((), exc.problem) from None


def _measure_field(value: Any) -> Measure:
    if isinstance(value, Measure):
        return value
    try:
        return parse_measure(value)
    except InputError as exc:
        from rageval_pipeline.core.io.config import rule

        raise rule((), exc.problem) from None


def _one_spelling_each(value: Any) -> Any:
    """Two spellings of one measure in one mapping or list would silently keep one of them."""
    if isinstance(value, dict | list):
        seen: dict[str, Any] = {}
        for name in value:
            try:
                measure = canonical(name)
            except InputError:
                continue  # the name's own validation reports it
            if measure in seen:
                from rageval_pipeline.core.io.config import rule

                raise rule(
                    (), f"{quote_json(seen[measure])} and {quote_json(name)} both name {measure}"
                )
            seen[measure] = name
    return value


# A measure name in a config file, stored canonical: "NDCG@10" and "ndcg_cut_10" become "nDCG@10".
MeasureName = Annotated[str, AfterValidator(_canonical_field)]
# A measure in a file people write, parsed once on load into its object (any spelling) and
# written back as its canonical name: what the gate policy holds and passes on.
MeasureField = Annotated[
    Measure, BeforeValidator(_measure_field), PlainSerializer(str, return_type=str)
]
# Mappings and lists of measure names, where two spellings of one measure are an error.
OneSpellingEach = BeforeValidator(_one_spelling_each)
