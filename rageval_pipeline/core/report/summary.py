"""The report's first screen: the verdict per run, the configuration diff, the measures that
moved with their paired intervals, and what to do next.

It is sized to be read without scrolling (1400x900): the moved measures are capped at `SHOWN`
rows, the rest are in each run's folded details.
"""

from __future__ import annotations

from rageval_pipeline.core.gate import Check, RunChange, Verdict
from rageval_pipeline.core.gate.decision import MIN_PASS_QUERIES, queries_text
from rageval_pipeline.core.measures.defaults import BUDGET_FAMILIES
from rageval_pipeline.core.measures.names import try_parse
from rageval_pipeline.core.report.blocks import Block, Bullets, Heading, Para, Section, Table, Tone
from rageval_pipeline.core.report.deciding import policy_blocks
from rageval_pipeline.core.report.model import LATENCY_KINDS, Report, iso_date
from rageval_pipeline.core.report.resolution import ci_label, interval, resolution_blocks
from rageval_pipeline.core.report.states import (
    LIMIT_KINDS,
    RunKey,
    compared_with,
    headline,
    limit,
    moved,
    moved_label,
    number,
    run_checks,
    run_state,
    shown,
    status,
    stored_words,
    undecided,
)
from rageval_pipeline.core.report.texts import shorten

SHOWN = 8  # moved measures on the first screen


def _delta(check: Check) -> str:
    test = check.paired
    if test is not None:
        interval = "" if test.ci_low is None else f" [{test.ci_low:+.4f}, {test.ci_high:+.4f}]"
        return f"{test.delta:+.4f}{interval}"
    if check.delta is None:
        return "–"
    return f"{check.delta:+.1f} ms" if check.kind in LATENCY_KINDS else f"{check.delta:+.4f}"


def _moved_table(checks: list[Check]) -> Table:
    rows, tones = [], []
    for c in checks:
        text, tone = status(c)
        p = c.paired.p_holm if c.paired is not None else None
        rows.append(
            (
                f"{c.dataset}/{c.system}",
                moved_label(c),
                limit(c) if c.kind in LIMIT_KINDS else number(c, c.reference),
                number(c, c.value),
                _delta(c),
                "–" if p is None else f"{p:.3g}",
                text,
            )
        )
        tones.append(tone)
    header = ("Run", "Measure", "Baseline or limit", "Current", f"Delta [{ci_label(checks)}]")
    return Table((*header, "p (Holm)", "Status"), rows, tones)


def _config_blocks(verdict: Verdict) -> list[Block]:
    rows = [
        (f"{r.dataset}/{r.system}", c.key, shown(c.before), shown(c.after))
        for r in verdict.changes
        for c in r.config
    ]
    notes = [
        f"{r.dataset}/{r.system}: the suite (corpus, queries or judgments) changed since the "
        f"baseline; judged against the {compared_with(r)}."
        for r in verdict.changes
        if r.suite_changed
    ] + [_rerun_words(r) for r in verdict.changes if _rerun(r) and not r.note]
    blocks: list[Block] = [Heading(2, "Configuration changes since the baseline")]
    if rows:
        blocks.append(Table(("Run", "Key", "Before", "After"), rows))
    else:
        blocks.append(Para("No configuration changed since the baselines."))
    return blocks + ([Bullets(notes)] if notes else [])


def _rerun(change: RunChange) -> bool:
    """Re-run for another reason than a changed suite (which says so on its own)."""
    return change.compared_with == "rerun" and not change.suite_changed


def _rerun_words(change: RunChange) -> str:
    return (
        f"{change.dataset}/{change.system}: {change.rerun_reason} since the "
        f"{stored_words(change)}, "
        "so the baseline values are its configuration re-run in this run on the same queries, "
        "compared query by query."
    )


def _budget_blocks(verdict: Verdict) -> list[Block]:
    """Where the chunking or the scoring level changed (`gate.comparable`), in words what the
    verdict was decided on, and both configurations' evidence at each token budget side by
    side: their per-chunk ranking measures count other units."""
    notes = [
        words
        for r in verdict.changes
        if r.note
        for words in (r.note, *([_rerun_words(r)] if _rerun(r) else []))
    ]
    judged = {(r.dataset, r.split, r.system) for r in verdict.changes if r.note}
    cells: dict[tuple[RunKey, int], dict[str, str]] = {}
    failed: set[tuple[RunKey, int]] = set()
    for c in verdict.checks:
        key, measure = (c.dataset, c.split, c.system), try_parse(c.measure or "")
        if key not in judged or c.kind != "baseline" or measure is None or not measure.budget:
            continue
        word = status(c)[0] if not c.passed or c.improved or c.inconclusive else "PASS"
        row = (key, measure.budget)
        cells.setdefault(row, {})[measure.NAME] = (
            f"{number(c, c.reference)} → {number(c, c.value)} {word}"
        )
        failed |= {row} if c.blocking and not c.passed else set()
    if not cells:
        return [Bullets(notes)] if notes else []
    order = sorted(cells)
    rows = [
        (f"{k[0]}/{k[2]}", f"{b} tokens", *(cells[k, b].get(f, "–") for f in BUDGET_FAMILIES))
        for k, b in order
    ]
    tones: list[Tone] = ["fail" if row in failed else "pass" for row in order]
    header = ("Run", "Budget", *(f"{f}: baseline → this run" for f in BUDGET_FAMILIES))
    return [Bullets(notes), Table(header, rows, tones)]


def _update(dataset: str, system: str, note: str) -> str:
    return f'rageval baseline update --dataset {dataset} --system {system} --note "{note}"'


def next_steps(report: Report) -> list[str]:
    """What a person does next, per run, most pressing first."""
    verdict = report.verdict
    changes = {(r.dataset, r.split, r.system): r for r in verdict.changes}
    steps = []
    for key in verdict.runs:
        dataset, _, system = key
        name, checks = f"{dataset}/{system}", run_checks(verdict, key)
        state, tone = run_state(checks)
        change = changes.get(key)
        # A broken run's one-line cause and fix comes first: its drops follow from it; so does
        # a baseline of another corpus (an unjudged warning without a category).
        steps += [
            c.message
            for c in checks
            if c.kind == "unjudged" and not c.passed and c.category in ("unjudged_run", None)
        ]
        if tone == "fail":
            worst = [w for w in verdict.worst_queries if (w.dataset, w.split, w.system) == key]
            first = ""
            if worst:
                text = report.query_text(dataset, worst[0].query_id)
                said = f' "{shorten(text, 120)}"' if text else ""
                first = (
                    f", starting with {worst[0].query_id}{said} ({worst[0].measure} "
                    f"{worst[0].baseline:.4f} -> {worst[0].value:.4f})"
                )
            steps.append(
                f"{name} {state}: look at the worst queries in its details{first}, and at "
                "its recommendations."
            )
        if any(c.kind == "policy" and not c.passed for c in checks):
            steps.append(
                f"{name}: the policy judging it is looser than its baseline's (above): revert "
                "the loosened fields, or record their approval under `loosened:` in the "
                "policy file for review."
            )
        noisy = [c for c in checks if c.inconclusive and c.kind in LATENCY_KINDS]
        if noisy:
            steps.append(
                f"{name}: latency {', '.join(sorted({moved_label(c) for c in noisy}))} rose in "
                "its percentiles, but the interleaved pairs do not establish it (the machine's "
                "load, not the change): nothing blocks; time it again on a quieter machine if "
                "it matters."
            )
        steps += _unsure_steps(name, dataset, [c for c in checks if undecided(c)])
        if change is not None and change.suite_changed and tone == "fail":
            steps.append(
                f"{name}: the suite changed too; keep the baseline until this run passes (a "
                "worse one is refused unless `rageval baseline update --accept-worse "
                '"REASON"` says why).'
            )
        elif change is not None and change.suite_changed:
            steps.append(
                f"{name}: the suite changed, so the baseline no longer measures the same "
                "thing; once this run is reviewed, update the baseline: "
                + _update(dataset, system, "suite changed")
            )
        elif tone == "better":
            better = ", ".join(moved_label(c) for c in checks if c.improved)
            steps.append(
                f"{name} improved ({better}): make it the baseline: "
                + _update(dataset, system, "improved: " + better)
            )
        elif state == "INCONCLUSIVE" and change is not None and change.config:
            steps.append(
                f"{name}: the configuration changed and may have made it worse (above): keep "
                "the baseline until more queries, or LLM-judged ones (statistics.rule: ppi, "
                "docs/statistics.md), settle it."
            )
        elif tone != "fail" and change is not None and change.config:
            steps.append(
                f"{name}: the configuration changed and nothing got worse beyond tolerance; if "
                "the change is intended, record it: " + _update(dataset, system, "new config")
            )
        if any(c.kind == "missing_baseline" for c in checks):
            steps.append(
                f"{name} has no baseline: review this run, then record it: "
                + _update(dataset, system, "first baseline")
            )
    # One line per piece of advice, however many runs or measures give it.
    return list(dict.fromkeys(steps)) or [f"Nothing to do: {_quiet(verdict)}."]


def _names(checks: list[Check]) -> str:
    return ", ".join(sorted({moved_label(c) for c in checks}))


def _unsure_steps(name: str, dataset: str, unsure: list[Check]) -> list[str]:
    """What to do about measures the suite could not decide, by why: the query floor decided,
    the suite resolves the band and the drop still reaches it, or the suite is too small. A
    measure gets one of them, so "resolved" and "add queries" never meet."""
    floor = [c for c in unsure if c.resolution and c.resolution.floor]
    resolved = [c for c in unsure if c.resolution and c.resolution.resolves and c not in floor]
    small = [c for c in unsure if c not in floor and c not in resolved]
    steps = []
    if floor:
        more = max(c.resolution.floor for c in floor if c.resolution)
        steps.append(
            f"{name}: the {MIN_PASS_QUERIES}-query floor decided {_names(floor)} (below it an "
            f"interval runs too narrow to pass on): add {queries_text(more)} to the suite to "
            "lift it."
        )
    if resolved:
        steps.append(
            f"{name}: {dataset} resolves the band on {_names(resolved)}, and the drop still "
            "reaches the band: the change likely costs about the band; keep the baseline, or "
            "accept the cost with a reviewed baseline update."
        )
    shown = [c for c in small if _drop_shown(c)]
    several = len({moved_label(c) for c in shown}) > 1
    excludes = "their intervals exclude" if several else "its interval excludes"
    for checks, what in (
        (
            shown,
            f"shows a drop on {{}} ({excludes} zero) but cannot tell whether it reaches the band",
        ),
        ([c for c in small if c not in shown], "cannot tell a drop of the band from none on {}"),
    ):
        if not checks:
            continue
        needed = [c.resolution.needed for c in checks if c.resolution and c.resolution.needed]
        more = f" (about {max(needed)} human-judged queries)" if needed else ""
        steps.append(
            f"{name}: {dataset} {what.format(_names(checks))}: add queries to the suite until "
            f"it resolves the band{more}, or judge more with PPI (What this suite can tell, "
            "above)."
        )
    return steps


def _drop_shown(check: Check) -> bool:
    """Whether the paired interval lies wholly on the worse side of zero: a drop the data
    show, whether or not it reaches the band."""
    test, measure = check.paired, try_parse(check.measure or "")
    if test is None or test.ci_low is None or test.ci_high is None or measure is None:
        return False
    return test.ci_high < 0 if measure.higher_is_better else test.ci_low > 0


def _quiet(verdict: Verdict) -> str:
    """What a verdict without a step says of its primary measures (moves within the band too)."""
    primary = [
        c
        for key in verdict.runs
        for c in run_checks(verdict, key)
        if c.kind == "baseline" and c.paired and c.measure == verdict.judged_by(key)
    ]
    if not primary:
        return "no measure moved beyond tolerance"
    moves = ", ".join(f"{c.dataset}/{c.system} {c.measure} {interval(c)}" for c in primary)
    return f"every compared measure passed; {moves}, within the band"


def summary_blocks(report: Report) -> list[Block]:
    """The first screen, each part in a `Section` a reader (or a test) can find by its id."""
    verdict = report.verdict
    title, tone = headline(verdict)
    runs, levels = [], []  # levels: what each run's judgments ranked, chunks or documents
    tones: list[Tone | None] = []
    changes = {(r.dataset, r.split, r.system): r for r in verdict.changes}
    for key in verdict.runs:
        state, run_tone = run_state(run_checks(verdict, key))
        change = changes.get(key)
        runs.append((key[0], key[2], state, compared_with(change)))
        levels.append(
            f"{key[0]}/{key[2]} at {change.level} level" if change and change.level else ""
        )
        tones.append(run_tone)
    shifted = moved(verdict)
    more = len(shifted) - SHOWN
    return [
        Section(
            "verdict",
            [
                Heading(1, title, tone),
                Para(f"{verdict.summary} · evaluated {iso_date(verdict.created_at) or '–'}"),
                Table(("Dataset", "System", "Verdict", "Compared with"), runs, tones),
                *([Para("Scored " + ", ".join(filter(None, levels)) + ".")] if any(levels) else []),
                *policy_blocks(verdict),
                *_budget_blocks(verdict),
            ],
        ),
        Section("resolution", resolution_blocks(verdict)),
        Section("config-diff", _config_blocks(verdict)),
        Section(
            "moved",
            [Heading(2, f"Measures that moved ({len(shifted)})")]
            + (
                [_moved_table(shifted[:SHOWN])]
                if shifted
                else [Para("No measure moved beyond tolerance.")]
            )
            + ([Para(f"{more} more in the runs' details below.")] if more > 0 else []),
        ),
        Section("next", [Heading(2, "What to do next"), Bullets(next_steps(report))]),
    ]
