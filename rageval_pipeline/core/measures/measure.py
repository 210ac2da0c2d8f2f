"""The base of every measure family: what a measure is called, its parameters and cutoff, and
what the gate and the reports need of it (its family and direction; the gate names a drop by
the family: `core.gate.taxonomy.category_of`).
The families are in `names` (ranking measures) and `span_names` (evidence-span measures)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Cutoff = Literal["required", "optional", "none"]
# budget: what retrieving costs (tokens), watched rather than compared by default.
Family = Literal["recall", "ranking", "diversity", "coverage", "budget"]


class Measure(BaseModel):
    """Base of every measure family; subclasses set the class-level description fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    NAME: ClassVar[str]
    ALIASES: ClassVar[tuple[str, ...]] = ()  # lower-case spellings besides NAME
    FAMILY: ClassVar[Family]
    HIGHER_IS_BETTER: ClassVar[bool] = True
    CUTOFF: ClassVar[Cutoff] = "required"
    PARAMS: ClassVar[frozenset[str]] = frozenset({"rel", "judged"})
    USES_QRELS: ClassVar[bool] = True
    USES_SOURCE: ClassVar[bool] = False
    USES_SPANS: ClassVar[bool] = False  # computed from evidence spans (`span_names`)
    # The largest value a query or a mean can take (the smallest is 0): a share, else a count.
    MAX_VALUE: ClassVar[float] = 1.0
    BUDGETED: ClassVar[bool] = False  # takes a token budget in place of a rank cutoff (@512t)

    k: int | None = Field(default=None, ge=1, description="rank cutoff")
    budget: int | None = Field(
        default=None,
        ge=1,
        description="token budget: the ranked list cut where its tokens reach it (@512t)",
    )
    rel: int = Field(default=1, ge=1, description="minimum label that counts as relevant")
    gain: Literal["lin", "exp"] = Field(
        default="lin", description="nDCG gain: label (trec_eval) or 2^label - 1 (Burges)"
    )
    judged: bool = Field(
        default=False,
        description="condensed: unjudged documents removed before ranking (trec_eval -J, Sakai)",
    )

    @model_validator(mode="after")
    def _check_family_rules(self) -> Measure:
        if self.budget is not None and not self.BUDGETED:
            raise ValueError(f"{self.NAME} takes no token budget")
        if self.budget is not None and self.k is not None:
            raise ValueError(f"{self.NAME} takes a rank cutoff or a token budget, not both")
        if self.CUTOFF == "required" and self.k is None and self.budget is None:
            raise ValueError(f"{self.NAME} needs a cutoff, e.g. {self.NAME}@10")
        if self.CUTOFF == "none" and self.k is not None:
            raise ValueError(f"{self.NAME} takes no cutoff")
        for param in ("rel", "gain", "judged"):
            default = type(self).model_fields[param].default
            if param not in self.PARAMS and getattr(self, param) != default:
                raise ValueError(f"{self.NAME} takes no parameter {param!r}")
        return self

    def params(self) -> dict[str, int | str | bool]:
        """The parameters that differ from their defaults, by name."""
        out: dict[str, int | str | bool] = {}
        for param in sorted(self.PARAMS):
            value = getattr(self, param)
            if value != type(self).model_fields[param].default:
                out[param] = value
        return out

    @property
    def family(self) -> Family:
        return self.FAMILY

    @property
    def higher_is_better(self) -> bool:
        return self.HIGHER_IS_BETTER

    def __str__(self) -> str:
        params = self.params()
        text = self.NAME
        if params:
            shown = (key if value is True else f"{key}={value}" for key, value in params.items())
            text += "(" + ",".join(shown) + ")"
        if self.k is not None:
            text += f"@{self.k}"
        if self.budget is not None:
            text += f"@{self.budget}t"
        return text
