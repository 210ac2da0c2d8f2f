"""How a dense model turns texts into unit vectors, per backend.

- `torch`: sentence-transformers on torch fp32 (the reference).
- `onnx-int8`: the same transformer exported locally to ONNX from the packaged weights, its
  MatMul weights quantized to int8 per channel (onnxruntime's dynamic quantization), run by
  ONNX Runtime; tokenisation, mean pooling and normalisation as the model's own modules do.
  Measured on nfcorpus (bench/README.md): faster on this CPU with nDCG@10 within 0.003 of fp32.
  sentence-transformers' own `backend="onnx"` needs `optimum-onnx`, whose releases require
  transformers < 4.58, so the export and the session are ours (the `onnx` extra).

An export is written once per model under a models folder (temp file, then rename), so
concurrent builds never see half a file.

Either runs on a `Device`: `cpu` (the default), `cuda`, or `auto` (CUDA when torch sees a GPU,
else CPU; ONNX Runtime's CUDA provider when onnxruntime lists it, else its CPU one).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from rageval_pipeline.core.errors import InputError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

Backend = Literal["torch", "onnx-int8"]  # what a dense system may use
Device = Literal["auto", "cpu", "cuda"]  # where it may run
_CPU, _CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"
_INPUTS = ["input_ids", "attention_mask", "token_type_ids"]


def check_mean_pooling(model: SentenceTransformer) -> None:
    """ONNX encoding re-implements the model's head: only Transformer, mean Pooling, Normalize."""
    kinds = [type(m).__name__ for m in model]
    pooling = getattr(model[1], "pooling_mode", None) if len(model) > 1 else None
    if kinds != ["Transformer", "Pooling", "Normalize"] or pooling != "mean":
        raise InputError(
            None,
            f"backend onnx-int8 supports mean-pooled, normalised models only (got {kinds})",
            field="backend",
        )


def _require_onnx() -> None:
    """One clear line, not an ImportError traceback, when the optional packages are missing."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        raise InputError(
            None,
            "backend onnx-int8 needs the onnx extra: pip install 'rageval_pipeline[onnx]'",
            field="backend",
        ) from None


def export_onnx(model: SentenceTransformer, folder: Path, name: str, *, int8: bool) -> Path:
    """The ONNX file of `model`'s transformer under `folder`, int8 or fp32 (exported if absent;
    bench/embedding.py measures the fp32 one)."""
    target = folder / f"{name}{'-int8' if int8 else ''}.onnx"
    _require_onnx()
    if target.exists():
        return target
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    check_mean_pooling(model)
    folder.mkdir(parents=True, exist_ok=True)
    transformer = model[0].auto_model.eval()

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer  # a submodule, so its weights export as weights

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    sample = model.tokenizer(["a b", "c d e"], padding=True, return_tensors="pt")
    axes = {n: {0: "batch", 1: "tokens"} for n in [*_INPUTS, "token_embeddings"]}
    with tempfile.TemporaryDirectory(dir=folder, prefix=".export-") as tmp:
        fp32, quantized = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        # The tracer warns that shape checks become constants; for an encoder they are (no
        # padding to add, never causal): the fp32 export equals torch within 2e-7 on batches
        # of mixed lengths (bench/embedding.py).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                TokenEmbeddings(),
                tuple(sample[n] for n in _INPUTS),
                str(fp32),
                dynamo=False,
                input_names=_INPUTS,
                output_names=["token_embeddings"],
                dynamic_axes=axes,
                opset_version=17,
            )
        if int8:
            kwargs = dict(weight_type=QuantType.QInt8, per_channel=True)
            quantize_dynamic(fp32, quantized, op_types_to_quantize=["MatMul"], **kwargs)
        os.replace(quantized if int8 else fp32, target)
    return target


def _no_cuda(what: str) -> InputError:
    return InputError(
        None, f"device cuda: {what} sees no CUDA device (use auto or cpu)", field="device"
    )


def torch_device(device: Device) -> Literal["cpu", "cuda"]:
    """The torch device `device` means here: `auto` is CUDA when torch sees a GPU, else CPU;
    `cuda` without one is refused rather than run on the CPU unasked."""
    if device == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if device == "cuda":
        raise _no_cuda("torch")
    return "cpu"


def onnx_providers(device: Device) -> list[str]:
    """ONNX Runtime's providers for `device`: CUDA's first when onnxruntime lists it (`auto`,
    `cuda`), else the CPU's alone."""
    if device == "cpu":
        return [_CPU]
    import onnxruntime as ort

    if _CUDA in ort.get_available_providers():
        return [_CUDA, _CPU]
    if device == "cuda":
        raise _no_cuda("onnxruntime")
    return [_CPU]


def onnx_device(device: Device) -> Literal["cpu", "cuda"]:
    """Where ONNX Runtime computes for `device`: its first provider's device."""
    return "cuda" if onnx_providers(device)[0] == _CUDA else "cpu"


class OnnxEncoder:
    """`encode` with the same call shape as `SentenceTransformer.encode` for what we use."""

    def __init__(self, model: SentenceTransformer, path: Path, providers: list[str]) -> None:
        import onnxruntime as ort

        self.session = ort.InferenceSession(str(path), providers=providers)
        self.device = "cuda" if providers[0] == _CUDA else "cpu"  # as `onnx_device` says
        self.tokenizer = model.tokenizer
        self.max_seq_length = model.max_seq_length

    def token_lengths(self, texts: list[str]) -> list[int]:
        """Tokens of each text after truncation, as `encode` feeds them."""
        tokens = self.tokenizer(texts, truncation=True, max_length=self.max_seq_length)
        return [len(ids) for ids in tokens["input_ids"]]

    def encode(self, texts: list[str], **_: object) -> np.ndarray:
        """Unit vectors, one text per session run: int8 dynamic quantization scales each
        activation tensor by its own range, so a text batched with others moved by up to
        0.016; alone, its vector depends on the text only (as the torch backend's does with
        batches of one length), at ~20% of the speed (5.7 vs 7.0 docs/s on nfcorpus)."""
        out = [np.zeros((0, 0), dtype=np.float32)]
        for text in texts:
            tokens = self.tokenizer(
                [text], truncation=True, max_length=self.max_seq_length, return_tensors="np"
            )
            feeds = {k: tokens[k].astype(np.int64) for k in ("input_ids", "attention_mask")}
            feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
            pooled = self.session.run(None, feeds)[0].mean(axis=1)  # no padding to mask out
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.vstack(out[1:]).astype(np.float32) if len(out) > 1 else out[0]
