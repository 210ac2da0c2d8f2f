"""Measures as small named declarative objects, and the one parser that turns "P(rel=2)@5" into one.

Naming a measure is separate from computing it (see `compute.py`), in the style of ir_measures:
each family is a frozen pydantic model with a cutoff `k`, a relevance threshold `rel` and, for
nDCG, a `gain`; `str(measure)` gives the canonical name, which parses back to an equal object.

Canonical syntax: ``Family(param=value,...)@k``; parameters left at their default are omitted and
the others are sorted by name. The parser also accepts the parameters after the cutoff
(``nDCG@10(gain=exp)``) and common aliases, case-insensitively (``MRR``, ``MAP``, ``NDCG@10``,
``Recall@100``, ``HitRate@10``).
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rageval_pipeline.core.errors import InputError

Cutoff = Literal["required", "optional", "none"]


class Measure(BaseModel):
    """Base of every measure family; subclasses set the class-level description fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    NAME: ClassVar[str]
    CUTOFF: ClassVar[Cutoff] = "required"
    PARAMS: ClassVar[frozenset[str]] = frozenset({"rel"})
    USES_QRELS: ClassVar[bool] = True
    USES_SOURCE: ClassVar[bool] = False

    k: int | None = Field(default=None, ge=1, description="rank cutoff")
    rel: int = Field(default=1, ge=1, description="minimum label that counts as relevant")
    gain: Literal["lin", "exp"] = Field(
        default="lin", description="nDCG gain: label (trec_eval) or 2^label - 1 (Burges)"
    )

    @model_validator(mode="after")
    def _check_family_rules(self) -> Measure:
        if self.CUTOFF == "required" and self.k is None:
            raise ValueError(f"{self.NAME} needs a cutoff, e.g. {self.NAME}@10")
        if self.CUTOFF == "none" and self.k is not None:
            raise ValueError(f"{self.NAME} takes no cutoff")
        for param in ("rel", "gain"):
            default = type(self).model_fields[param].default
            if param not in self.PARAMS and getattr(self, param) != default:
                raise ValueError(f"{self.NAME} takes no parameter {param!r}")
        return self

    def params(self) -> dict[str, int | str]:
        """The parameters that differ from their defaults, by name."""
        out: dict[str, int | str] = {}
        for param in sorted(self.PARAMS):
            value = getattr(self, param)
            if value != type(self).model_fields[param].default:
                out[param] = value
        return out

    def __str__(self) -> str:
        params = self.params()
        text = self.NAME
        if params:
            text += "(" + ",".join(f"{key}={value}" for key, value in params.items()) + ")"
        if self.k is not None:
            text += f"@{self.k}"
        return text


class P(Measure):
    """Precision@k: relevant documents in the top k divided by k, even when fewer than k were
    retrieved (trec_eval `P_k`)."""

    NAME = "P"


class R(Measure):
    """Recall@k: relevant documents in the top k divided by all relevant documents
    (trec_eval `recall_k`)."""

    NAME = "R"


class F1(Measure):
    """F1@k: harmonic mean of P@k and R@k, 0 when both are 0 (seed 000 `F1AtK`)."""

    NAME = "F1"


class RR(Measure):
    """Reciprocal rank of the first relevant document, 0 if none (trec_eval `recip_rank`; with a
    cutoff only the top k are searched, as ir_measures `RR@k`). Its mean is MRR."""

    NAME = "RR"
    CUTOFF = "optional"


class nDCG(Measure):
    """Normalised DCG@k (Järvelin & Kekäläinen 2002): gain / log2(rank + 1) summed over the top k,
    divided by the same sum for the judgments sorted by label. `gain=lin` uses the label
    (trec_eval `ndcg_cut_k`, BEIR); `gain=exp` uses 2^label - 1 (Burges et al. 2005). Labels
    <= 0 give no gain. Every label > 0 counts, whatever the relevance threshold."""

    NAME = "nDCG"
    PARAMS = frozenset({"gain"})


class AP(Measure):
    """Average precision: the precision at each relevant retrieved document, summed and divided
    by the number of relevant documents (trec_eval `map`; `map_cut_k` with a cutoff). Its mean
    is MAP."""

    NAME = "AP"
    CUTOFF = "optional"


class Success(Measure):
    """Success@k (hit rate): 1 if any relevant document is in the top k (trec_eval `success_k`)."""

    NAME = "Success"


class Rprec(Measure):
    """R-precision: precision at rank R, R being the number of relevant documents
    (trec_eval `Rprec`)."""

    NAME = "Rprec"
    CUTOFF = "none"


class Judged(Measure):
    """Judged@k: share of the top k that has any judgment, label 0 included; divides by k like
    P@k (ir_measures `Judged@k`)."""

    NAME = "Judged"
    PARAMS = frozenset()


class ER(Measure):
    """Entity recall@k as seed 001 defines Recall@K: distinct relevant *source documents* among
    the top k *chunks*, divided by the number of relevant documents. Unlike R@k on the
    document-level run, several chunks of one document use several of the k places."""

    NAME = "ER"
    USES_SOURCE = True


class Diversity(Measure):
    """Diversity@k: distinct source documents in the top k divided by k. Needs no qrels."""

    NAME = "Diversity"
    PARAMS = frozenset()
    USES_QRELS = False
    USES_SOURCE = True


class Clustering(Measure):
    """Clustering@k: share of the results in the top k that come from the most frequent source
    document (0 when nothing was retrieved). Needs no qrels."""

    NAME = "Clustering"
    PARAMS = frozenset()
    USES_QRELS = False
    USES_SOURCE = True


FAMILIES: dict[str, type[Measure]] = {
    cls.NAME: cls
    for cls in (P, R, F1, RR, nDCG, AP, Success, Rprec, Judged, ER, Diversity, Clustering)
}

# Lower-case spellings people write, mapped to a family.
_ALIASES: dict[str, type[Measure]] = {name.lower(): cls for name, cls in FAMILIES.items()}
_ALIASES.update(
    {
        "precision": P,
        "recall": R,
        "mrr": RR,
        "map": AP,
        "hit": Success,
        "hits": Success,
        "hitrate": Success,
        "r-prec": Rprec,
        "entityrecall": ER,
    }
)

_SYNTAX = re.compile(
    r"^(?P<family>[A-Za-z][A-Za-z0-9_-]*)"
    r"(?:\((?P<before>[^()]*)\))?"
    r"(?:@(?P<k>\d+))?"
    r"(?:\((?P<after>[^()]*)\))?$"
)


def parse_measure(name: str | Measure) -> Measure:
    """Parse "nDCG@10", "P(rel=2)@5", "MRR", ... into a Measure; InputError if it is not one."""
    if isinstance(name, Measure):
        return name
    text = name.strip().replace(" ", "")
    match = _SYNTAX.match(text)
    if match is None:
        raise InputError(None, f"cannot parse measure {name!r}", field="measure")
    family = _ALIASES.get(match["family"].lower())
    if family is None:
        known = ", ".join(FAMILIES)
        raise InputError(None, f"unknown measure {name!r} (known: {known})", field="measure")
    if match["before"] is not None and match["after"] is not None:
        raise InputError(None, f"measure {name!r} has two parameter lists", field="measure")
    fields: dict[str, object] = {}
    for item in filter(None, (match["before"] or match["after"] or "").split(",")):
        key, sep, value = item.partition("=")
        if not sep or key not in ("rel", "gain"):
            raise InputError(
                None,
                f"measure {name!r}: bad parameter {item!r} (rel=N or gain=lin|exp)",
                field="measure",
            )
        fields[key] = value
    if match["k"] is not None:
        fields["k"] = int(match["k"])
    try:
        return family(**fields)
    except ValidationError as exc:
        problem = "; ".join(err["msg"].removeprefix("Value error, ") for err in exc.errors())
        raise InputError(None, f"measure {name!r}: {problem}", field="measure") from None
