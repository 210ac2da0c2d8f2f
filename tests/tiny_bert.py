"""A tiny BERT (2 layers, hidden size 32) over a word-level vocabulary, random weights from a
fixed seed: what the dense and reranker tests load instead of a real model (no downloads)."""

from __future__ import annotations

from pathlib import Path


def save_tiny_bert(folder: Path, words: list[str], model_class: type, **config: int) -> Path:
    """Save a `model_class` (e.g. BertModel, BertForSequenceClassification) and its tokenizer
    for `words` in `folder`; `config` adds to the BertConfig (e.g. num_labels=1)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertTokenizerFast

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = BertTokenizerFast(tokenizer_object=core, do_lower_case=True)
    tokenizer.save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    bert = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        **config,
    )
    torch.manual_seed(0)
    model_class(bert).save_pretrained(folder)
    return folder


def save_tiny_bi_encoder(folder: Path, words: list[str]) -> Path:
    """A tiny BERT for `words` saved as a sentence-transformers folder (mean pooling,
    normalised, max_seq_length 64) under `folder`: what a dense system's `model:` may name."""
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertModel

    save_tiny_bert(folder / "bert", words, BertModel)
    transformer = models.Transformer(str(folder / "bert"), max_seq_length=64)
    modules = [transformer, models.Pooling(32, "mean"), models.Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder / "st"))
    return folder / "st"
