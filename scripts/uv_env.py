"""Print pip's effective configuration as `export UV_...=...` lines for `uv pip install`.

uv reads no pip.conf, so without this it would ignore the package indexes, find-links folders
and constraints this machine configures for pip (and CI would install from somewhere else, or
not at all). Reads `pip config list` (files and PIP_* variables; a variable wins over a file).
"""

import shlex
import subprocess
import sys

# pip option -> (uv variable, how uv separates several values)
OPTIONS = {
    "index-url": ("UV_INDEX_URL", " "),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
    "find-links": ("UV_FIND_LINKS", ","),
    "constraint": ("UV_CONSTRAINT", " "),
    "no-index": ("UV_NO_INDEX", " "),
    "cert": ("SSL_CERT_FILE", " "),
}


def main() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, tuple[int, str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        scope, _, option = key.rpartition(".")
        if option not in OPTIONS:
            continue
        rank = 1 if scope == ":env:" else 0  # the environment overrides the files
        if rank >= found.get(option, (-1, ""))[0]:
            found[option] = (rank, " ".join(shlex.split(value)))
    for option, (_, value) in sorted(found.items()):
        name, sep = OPTIONS[option]
        if option == "no-index":
            value = "1" if value.lower() in {"1", "true", "yes", "on"} else "0"
        print(f"export {name}={shlex.quote(sep.join(value.split()))}")


if __name__ == "__main__":
    main()
