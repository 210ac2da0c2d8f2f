"""Spellings of the command line that changed, accepted for one release (docs/cli.md).

The parsers know only the current grammar, so `--help` shows one spelling of each thing; an
old spelling is rewritten to the current one before parsing, with one `warning:` line on
stderr. When the release after this one drops them, this module goes with them.
"""

from __future__ import annotations

import sys

# (command words) -> {old option: current option}, for the options that were renamed.
RENAMED: dict[tuple[str, ...], dict[str, str]] = {
    ("gate",): {"--reports": "--output"},
    ("experiments",): {"--export": "--output"},
    ("suggest",): {"--out": "--output"},
    ("synth",): {"--out": "--output", "--human-sample": "--human-sample-size"},
    ("label",): {"--out": "--output", "--gate": "--policy"},
    ("pool", "agree"): {"--record": "--output"},
}
# (command words) -> the options, in order, that are now the command's positional arguments.
POSITIONAL: dict[tuple[str, ...], tuple[str, ...]] = {
    ("gate",): ("--qrels", "--baseline", "--run"),
}
# command -> (its subcommands, the one a bare `rageval COMMAND ARG ...` meant).
DEFAULT_SUBCOMMAND: dict[str, tuple[frozenset[str], str]] = {
    "pool": (frozenset({"export", "merge", "difficulty", "agree"}), "export"),
}


def current(argv: list[str]) -> list[str]:
    """`argv` in the current grammar; each old spelling met is named once on stderr."""
    argv = list(argv)
    if not argv:
        return argv
    if argv[0] in DEFAULT_SUBCOMMAND and len(argv) > 1:
        known, default = DEFAULT_SUBCOMMAND[argv[0]]
        if argv[1] not in known and argv[1] not in ("-h", "--help"):
            _warn(f"`rageval {argv[0]} ARG ...`", f"`rageval {argv[0]} {default} ARG ...`")
            argv.insert(1, default)
    words = tuple(argv[:2])
    for command, renamed in RENAMED.items():
        if words[: len(command)] == command:
            argv = [_renamed(arg, renamed) for arg in argv]
    for command, options in POSITIONAL.items():
        if words[: len(command)] == command:
            argv = _positional(argv, len(command), options)
    return argv


def _renamed(arg: str, renamed: dict[str, str]) -> str:
    option, equals, value = arg.partition("=")
    if option not in renamed:
        return arg
    _warn(option, renamed[option])
    return renamed[option] + equals + value


def _positional(argv: list[str], after: int, options: tuple[str, ...]) -> list[str]:
    """Move `--option VALUE` (or `--option=VALUE`) of `options` to positionals, in their order,
    right after the command words; the rest keeps its order."""
    values: dict[str, str] = {}
    rest: list[str] = []
    args = iter(argv[after:])
    for arg in args:
        option, equals, value = arg.partition("=")
        if option in options and option not in values:
            values[option] = value if equals else next(args, "")
            _warn(f"{option} VALUE", f"the positional {option.lstrip('-').upper()}")
        else:
            rest.append(arg)
    if not values:
        return argv
    moved = [values[o] for o in options if o in values]
    return [*argv[:after], *moved, *rest]


def _warn(old: str, new: str) -> None:
    print(
        f"warning: {old} is now {new}; the old spelling stops working in the next release",
        file=sys.stderr,
    )
