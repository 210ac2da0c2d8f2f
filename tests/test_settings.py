"""Configuration from the environment (core/settings): one typed model, the only reader of
os.environ, its generated doc, and values read when used, not when imported."""

from __future__ import annotations

import gzip
import os
import re
import warnings
from pathlib import Path

import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.generation import config
from rageval_pipeline.core.io import paths
from rageval_pipeline.core.io.bounds import input_bytes
from rageval_pipeline.core.settings import base, catalog
from rageval_pipeline.core.settings.base import EnvGroup
from rageval_pipeline.core.settings.limits import LLM, LLM_DEFAULTS
from rageval_pipeline.core.settings.locations import Deployment
from rageval_pipeline.core.settings.providers import Providers

PACKAGE = Path(__file__).resolve().parents[1] / "rageval_pipeline"
READS_ENV = re.compile(r"os\.environ|getenv")
SECRET = "sk-do-not-show-7f3a"


def environment_readers(root: Path) -> list[str]:
    """The modules under `root` that name os.environ or getenv (what `rg` would find)."""
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if READS_ENV.search(path.read_text(encoding="utf-8"))
    )


def test_only_the_settings_module_touches_the_environment():
    assert environment_readers(PACKAGE) == ["core/settings/environ.py"]


def test_the_committed_configuration_doc_is_current():
    assert catalog.DOC.read_text(encoding="utf-8") == catalog.markdown(), (
        "docs/configuration.md is out of date: run "
        "`python -m rageval_pipeline.core.settings --markdown > docs/configuration.md`"
    )


def test_every_group_is_catalogued_and_every_variable_named_once():
    def subclasses(cls: type) -> set[type]:
        return {c for sub in cls.__subclasses__() for c in {sub, *subclasses(sub)}}

    assert subclasses(EnvGroup) <= {family.group for family in catalog.FAMILIES}
    names = [v for family in catalog.FAMILIES for v, _, _ in family.variables()]
    assert len(names) == len(set(names)) > 60
    assert all(info.description for f in catalog.FAMILIES for _, info, _ in f.variables())


def test_a_variable_set_after_import_applies_at_the_next_read(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGEVAL_STORAGE", str(tmp_path / "a"))
    assert paths.storage_dir() == tmp_path / "a"
    monkeypatch.setenv("RAGEVAL_STORAGE", str(tmp_path / "b"))
    assert paths.storage_dir() == tmp_path / "b"
    monkeypatch.setenv("RAGEVAL_STORAGE", "")  # empty: unset, the default
    assert paths.storage_dir() == Path(__file__).resolve().parents[1] / "data" / "storage"


def test_the_decompression_limit_is_read_when_a_file_is(tmp_path, monkeypatch):
    run = tmp_path / "run.trec.gz"
    run.write_bytes(gzip.compress(b"q1 Q0 d1 1 1.0 sys\n" * 10))
    assert input_bytes(run)[1].count(b"\n") == 10
    monkeypatch.setenv("RAGEVAL_MAX_DECOMPRESSED_BYTES", "100")
    with pytest.raises(InputError) as err:
        input_bytes(run)
    assert str(err.value) == (
        f"{run}: decompresses to more than 100 bytes (RAGEVAL_MAX_DECOMPRESSED_BYTES)"
    )
    monkeypatch.setenv("RAGEVAL_MAX_DECOMPRESSED_BYTES", "lots")
    with pytest.raises(InputError) as err:
        input_bytes(run)
    assert str(err.value) == (
        "environment: RAGEVAL_MAX_DECOMPRESSED_BYTES: "
        "Input should be a valid integer, unable to parse string as an integer"
    )


def test_nightly_lists_are_comma_separated_and_empty_means_none(monkeypatch):
    monkeypatch.setenv("RAGEVAL_NIGHTLY_DATASETS", " techdocs, ,hotel,techdocs")
    monkeypatch.setenv("RAGEVAL_NIGHTLY_BEIR", "")
    deployment = Deployment.from_env()
    assert (deployment.nightly_datasets, deployment.nightly_beir) == (["techdocs", "hotel"], [])
    monkeypatch.setenv("RAGEVAL_NIGHTLY_DATASETS", "")
    assert Deployment.from_env().nightly_datasets == []


def test_a_given_mapping_replaces_the_process_environment(monkeypatch):
    monkeypatch.setenv("RAGEVAL_OLLAMA_MODEL", "from-process")
    assert Providers.from_env().ollama_model == "from-process"
    assert Providers.from_env(env={}).ollama_model == "llama3.1:8b"
    assert Providers.from_env(env={"RAGEVAL_OLLAMA_MODEL": "given"}).ollama_model == "given"


def test_keys_are_never_shown_even_in_errors(monkeypatch, capsys):
    monkeypatch.setenv("RAGEVAL_ANTHROPIC_API_KEY", SECRET)
    settings = Providers.from_env()
    print(settings, repr(settings), settings.model_dump(), settings.model_dump_json())
    assert settings.anthropic_api_key.get_secret_value() == SECRET
    monkeypatch.setenv("RAGEVAL_MAX_TOKENS", SECRET)  # a key pasted into the wrong variable
    with pytest.raises(config.GenerationError) as err:
        config.from_env("answer")
    assert str(err.value) == (
        "invalid generation setting for the answer model: RAGEVAL_MAX_TOKENS: "
        "Input should be a valid integer, unable to parse string as an integer"
    )
    assert SECRET not in capsys.readouterr().out + str(err.value)


def test_a_bad_default_from_the_caller_names_the_field_not_a_variable(monkeypatch):
    monkeypatch.delenv("RAGEVAL_TEST_NET_ATTEMPTS", raising=False)
    with pytest.raises(InputError) as err:
        catalog.NetLimits.from_env("RAGEVAL_TEST_NET", attempts=0)
    assert str(err.value) == ("environment: attempts: Input should be greater than or equal to 1")


@pytest.fixture
def fresh_warnings(monkeypatch):
    """No old name warned about yet in this process."""
    monkeypatch.setattr(base, "_WARNED", set())


def test_an_old_name_is_read_as_the_new_one_and_warns_once(monkeypatch, fresh_warnings):
    monkeypatch.setenv("RAG_EVAL_OLLAMA_MODEL", "old-name-model")
    monkeypatch.setenv("RAG_EVAL_DEADLINE_S", "7")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = config.from_env("answer")
        again = config.from_env("judge")
        limits = catalog.NetLimits.from_env(LLM, **LLM_DEFAULTS)
    assert (first.model, again.model, limits.deadline_s) == ("old-name-model",) * 2 + (7.0,)
    assert config.configured()  # an old switch turns the generation group on as the new one does
    messages = [str(w.message) for w in caught if w.category is base.RenamedVariableWarning]
    assert messages == [
        "RAG_EVAL_OLLAMA_MODEL is deprecated and will stop being read: "
        "set RAGEVAL_OLLAMA_MODEL instead",
        "RAG_EVAL_DEADLINE_S is deprecated and will stop being read: "
        "set RAGEVAL_LLM_DEADLINE_S instead",
    ]


def test_the_new_name_wins_and_groups_never_renamed_read_no_alias(monkeypatch, fresh_warnings):
    monkeypatch.setenv("RAG_EVAL_OLLAMA_MODEL", "old")
    monkeypatch.setenv("RAGEVAL_OLLAMA_MODEL", "new")
    monkeypatch.setenv("RAG_EVAL_MAX_DEPTH", "1")  # never a name: not read as RAGEVAL_MAX_DEPTH
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert Providers.from_env().ollama_model == "new"
        assert catalog.FileLimits.from_env().depth == 64
    assert [str(w.message) for w in caught] == [
        "RAG_EVAL_OLLAMA_MODEL is deprecated and will stop being read: "
        "set RAGEVAL_OLLAMA_MODEL instead (ignored: that is set too)"
    ]


def test_an_unset_old_name_changes_nothing(monkeypatch, fresh_warnings):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert Providers.from_env(env={}).ollama_model == "llama3.1:8b"
    assert caught == []


def test_the_byte_limits_read_without_the_settings_model_are_its_defaults(monkeypatch):
    from rageval_pipeline.core.settings import file_defaults
    from rageval_pipeline.core.settings.limits import FileLimits

    for name in list(os.environ):
        if name.startswith(file_defaults.ENV_PREFIX):
            monkeypatch.delenv(name)
    defaults = FileLimits.from_env()
    for name in FileLimits.model_fields:
        fast = file_defaults.byte_limit_default(name)
        assert fast in (None, getattr(defaults, name)), name
    assert set(file_defaults.BYTE_DEFAULTS) <= set(FileLimits.model_fields)
    monkeypatch.setenv("RAGEVAL_MAX_DATA_BYTES", "10")
    assert file_defaults.byte_limit_default("data_bytes") is None  # the model decides
