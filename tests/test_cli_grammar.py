"""One grammar for `rageval` (docs/cli.md): every command's `--help` walked, complete sentences,
one meaning per option, shared options in the doc's one table, old spellings rewritten."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from rageval_pipeline.cli import build_parser, grammar, main

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
# Words a sentence does not end on: a help text ending so was cut.
DANGLING = {"a", "an", "the", "of", "and", "or", "with", "to", "for", "in", "by", "is", "its"}


def commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    """(command words, parser) of `parser` and every parser under it."""
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*words, name))


ALL = list(commands(build_parser()))
LEAVES = [
    (w, p) for w, p in ALL if not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)
]


def visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.help != argparse.SUPPRESS
        and not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]


def cut(text: str) -> str | None:
    """Why `text` reads as a sentence cut short, or None."""
    if text.count("(") != text.count(")") or text.count("`") % 2:
        return "unbalanced brackets or backticks"
    text = text.rstrip()
    words = re.findall(r"[A-Za-z]+", text)
    if text[-1:] in ",;:" or (text[-1:] not in ".)" and words and words[-1] in DANGLING):
        return "ends mid-sentence"
    return None


@pytest.mark.parametrize("words", [w for w, _ in ALL], ids=lambda w: " ".join(w) or "rageval")
def test_every_help_prints_its_own_usage_and_whole_sentences(words, capsys):
    with pytest.raises(SystemExit) as done:
        main([*words, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {' '.join(('rageval', *words))} ")
    parser = dict(ALL)[words]
    description = " ".join((parser.description or "").split())
    assert description.endswith("."), f"{words}: no description, or one cut: {description!r}"
    assert cut(description) is None, (words, description)
    for action in visible(parser):
        assert action.help, f"{words}: {action.option_strings or action.dest} has no help"
        assert cut(action.help) is None, (words, action.option_strings, cut(action.help))


def test_pool_actions_are_real_subcommands(capsys):
    with pytest.raises(SystemExit):
        main(["pool", "merge", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: rageval pool merge [-h] [--overwrite] SUITE SHEET")
    assert "--third" not in out and "--depth" not in out  # another action's options


def test_an_option_means_one_thing_everywhere():
    seen: dict[str, tuple] = {}
    for words, parser in LEAVES:
        for action in visible(parser):
            if not action.option_strings:
                continue
            shape = (tuple(action.option_strings), action.nargs == 0)
            for option in action.option_strings:
                assert seen.setdefault(option, shape) == shape, (
                    f"{' '.join(words)}: {option} spelled or used as {shape}, elsewhere "
                    f"{seen[option]}"
                )
    # The spellings replaced are gone from every parser (they live in `grammar` alone).
    old = {o for renamed in grammar.RENAMED.values() for o in renamed} - set(seen)
    replaced = {o for options in grammar.POSITIONAL.values() for o in options}
    assert not replaced & set(seen)
    assert old == {o for renamed in grammar.RENAMED.values() for o in renamed} - {
        "--human-sample"  # a file in eval/compare/gate; synth's count is --human-sample-size
    }


def test_an_option_shared_by_commands_is_in_the_one_table():
    users: dict[str, set[str]] = {}
    for words, parser in LEAVES:
        for action in visible(parser):
            for option in action.option_strings:
                users.setdefault(option, set()).add(words[0])
    table = DOC.read_text(encoding="utf-8").split("## Options", 1)[1].split("\n## ", 1)[0]
    shared = {o for o, where in users.items() if len(where) > 1 and o.startswith("--")}
    missing = sorted(o for o in shared if f"`{o}`" not in table)
    assert missing == [], f"options shared by several commands but not in docs/cli.md: {missing}"


def test_a_seed_is_described_by_what_it_draws():
    helps = {}
    for words, parser in LEAVES:
        for action in visible(parser):
            if "--seed" in action.option_strings:
                helps[words] = action.help
    assert set(helps) >= {("synth",), ("label",), ("compare",), ("pool", "agree")}
    assert len(set(helps.values())) == len(helps), helps


@pytest.mark.parametrize(
    ("old", "new", "warned"),
    [
        (
            ["pool", "s", "-o", "x.csv", "-k", "5"],
            ["pool", "export", "s", "-o", "x.csv", "-k", "5"],
            1,
        ),
        (
            ["gate", "--qrels", "q", "--run=r", "--baseline", "b", "--reports", "d"],
            ["gate", "q", "b", "r", "--output", "d"],
            4,
        ),
        (
            ["label", "s", "--gate", "g.yaml", "--out=o"],
            ["label", "s", "--policy", "g.yaml", "--output=o"],
            2,
        ),
        (["synth", "s", "--human-sample", "9"], ["synth", "s", "--human-sample-size", "9"], 1),
        (
            ["pool", "--no-extra", "s", "-o", "x"],
            ["pool", "export", "--no-extra", "s", "-o", "x"],
            1,
        ),
        (
            ["pool", "agree", "s", "t", "--record", "r"],
            ["pool", "agree", "s", "t", "--output", "r"],
            1,
        ),
        (["experiments", "--export", "e.json"], ["experiments", "--output", "e.json"], 1),
        # Current spellings, and the same words in other commands, are left as they are.
        (["eval", "q", "r", "--human-sample", "h"], ["eval", "q", "r", "--human-sample", "h"], 0),
        (["suggest", "s", "--output", "o"], ["suggest", "s", "--output", "o"], 0),
        (["pool", "merge", "s", "t"], ["pool", "merge", "s", "t"], 0),
        (["pool", "--help"], ["pool", "--help"], 0),
        (["gate", "q", "b", "r", "-o", "d"], ["gate", "q", "b", "r", "-o", "d"], 0),
    ],
)
def test_old_spellings_are_rewritten_with_one_warning_each(old, new, warned, capsys):
    assert grammar.current(old) == new
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == warned
    assert all(w.startswith("warning: ") and w.endswith("next release") for w in warnings)


def test_an_old_spelling_still_runs_the_command(tmp_path, capsys):
    fixtures = Path(__file__).parent / "fixtures" / "measures"
    qrels, base, run = (str(fixtures / n) for n in ("qrels.trec", "run_a.trec", "run_b.trec"))
    assert main(["gate", qrels, base, run, "--format", "json"]) in (0, 1)
    current = capsys.readouterr()
    argv = ["gate", "--qrels", qrels, "--baseline", base, "--run", run, "--format", "json"]
    assert main(argv) in (0, 1)
    old = capsys.readouterr()
    assert old.out == current.out
    assert [line for line in old.err.splitlines() if line.startswith("warning: ")] == [
        f"warning: {o} VALUE is now the positional {o[2:].upper()}; the old spelling stops "
        "working in the next release"
        for o in ("--qrels", "--baseline", "--run")
    ]
