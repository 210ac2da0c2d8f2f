"""`device: auto | cpu | cuda` of dense systems (issue 27): what each resolves to, for torch and
for ONNX Runtime, on this CPU-only machine and with CUDA made visible (resolution only: no
model is loaded on a GPU here). torch and onnxruntime are imported by the tests that use them,
not at collection."""

from __future__ import annotations

import numpy as np
import pytest

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.retrieval.dense import DenseIndex, model_key
from rageval_pipeline.core.retrieval.encoders import onnx_providers, torch_device
from rageval_pipeline.core.systems import DenseSystem

CPU, CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"


def test_auto_is_the_cpu_on_a_machine_without_a_gpu():
    import onnxruntime
    import torch

    assert not torch.cuda.is_available()
    assert [torch_device(d) for d in ("auto", "cpu")] == ["cpu", "cpu"]
    assert CUDA not in onnxruntime.get_available_providers()
    assert onnx_providers("auto") == onnx_providers("cpu") == [CPU]


def test_cuda_asked_for_without_a_gpu_is_one_line():
    with pytest.raises(InputError) as err:
        torch_device("cuda")
    assert (
        str(err.value)
        == "<input>: device: device cuda: torch sees no CUDA device (use auto or cpu)"
    )
    with pytest.raises(InputError, match="onnxruntime sees no CUDA device"):
        onnx_providers("cuda")


def test_auto_is_cuda_when_torch_or_onnxruntime_sees_it(monkeypatch):
    import onnxruntime
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert [torch_device(d) for d in ("auto", "cuda", "cpu")] == ["cuda", "cuda", "cpu"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: [CUDA, CPU])
    assert onnx_providers("auto") == onnx_providers("cuda") == [CUDA, CPU]
    assert onnx_providers("cpu") == [CPU]


def test_the_device_keeps_the_fingerprint_but_never_shares_cached_vectors():
    systems = [DenseSystem(retriever="dense", device=d) for d in ("cpu", "auto", "cuda")]
    assert len({s.fingerprint() for s in systems}) == 1
    assert DenseSystem(retriever="dense").device == "cpu"
    assert model_key("m", 256) == model_key("m", 256, device="cpu")
    assert (
        model_key("m", 256, device="cuda")
        == "m|max_seq_length=256|normalized|batch=by-length|device=cuda"
    )
    with pytest.raises(ValueError, match="device"):
        DenseSystem(retriever="dense", device="gpu")


def test_the_configured_device_is_saved_with_the_index(tmp_path):
    index = DenseIndex(np.zeros((0, 384), np.float32), np.asarray([], object), [], device="auto")
    index.save(tmp_path / "index")
    loaded = DenseIndex.load(tmp_path / "index")
    assert loaded.device == "auto"


def test_the_default_device_is_not_recorded_as_a_configuration_change():
    # The committed baselines were recorded before devices existed.
    from pathlib import Path

    from rageval_pipeline.core.gate import load_baseline
    from rageval_pipeline.core.gate.changes import config_changes
    from rageval_pipeline.core.suites import loaders
    from rageval_pipeline.core.systems import DenseSystem

    data = Path(__file__).resolve().parents[1] / "data"
    baseline = load_baseline(data / "baselines" / "techdocs" / "dense.json")
    reference = loaders.reference_chunking(data / "suites" / "techdocs")
    shipped = DenseSystem(retriever="dense", chunking={"strategy": "reference"})
    assert config_changes(baseline.config, shipped.recorded_config(reference)) == {}
    auto = shipped.model_copy(update={"device": "auto"})
    assert config_changes(baseline.config, auto.recorded_config(reference)) == {
        "device": (None, "auto")
    }
