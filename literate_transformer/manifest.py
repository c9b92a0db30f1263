"""The reading order: which chapter builds which module, in which order.

This is the one place that says in what order the package is read.  The
package's own docstring, the site's table of contents, its annotated-source
pages and its API reference are all generated from :data:`CHAPTERS`, so they
cannot disagree.  A chapter's number is its position here; its modules are
the ones it builds (a module is listed once, in the first chapter that
builds it); :data:`SUPPORT` lists the modules that every chapter leans on
and none is about.  The list holds lessons only: the site's own machinery
(what records the runtime values, measures the proofs, packs the model's
files for the browser) lives with the site, in ``docs/_tools``, not in the package.

A model family is read from its record (``models/<family>.ini``,
:mod:`~literate_transformer.core.records`), whose ``[chapter]`` names the
chapter that builds it and its place among that chapter's families: a new
family is its file and its record, and nothing here changes.

>>> [chapter.number for chapter in CHAPTERS][:3]
[1, 2, 3]
>>> chapter_of("core.kernels").title
'Scaled dot-product attention'
>>> MODULES[:3]
('core.checkpoints', 'core.config', 'core.masks')
"""

from __future__ import annotations

from dataclasses import dataclass

from .core.records import records

__all__ = ["PACKAGE", "Chapter", "CHAPTERS", "SUPPORT", "MODULES", "LAYOUT", "chapter_of", "reading_order_rst"]

#: The package's import name.
PACKAGE = "literate_transformer"


@dataclass(frozen=True)
class Chapter:
    """One chapter of the site and the modules it builds.

    Attributes:
        number: Its position in the reading order (1, 2, ...); 0 for :data:`SUPPORT`.
        docname: The page, relative to the documentation's root (``chapters/01_...``), or ``None``.
        title: The chapter's title.
        modules: The modules it builds, relative to the package (``book.attention``).
    """

    number: int
    docname: str | None
    title: str
    modules: tuple[str, ...]


def _families(number: int) -> tuple[str, ...]:
    """The family modules chapter ``number`` builds, in their records' order (each record's ``[chapter]``)."""
    found = sorted((r for r in records().values() if r.chapter == number), key=lambda r: (r.order, r.key))
    return tuple(f"models.{r.key}" for r in found)


def _with_families(number: int, first: tuple[str, ...] = (), last: tuple[str, ...] = (), **after: str) -> tuple:
    """A chapter's modules: ``first``, its families (:func:`_families`), each followed by the module ``after``
    names for it (``gpt_neo="parts.rotary"``), then ``last``."""
    modules = list(first)
    for module in _families(number):
        modules.append(module)
        if module.removeprefix("models.") in after:
            modules.append(after[module.removeprefix("models.")])
    return (*modules, *last)


#: The chapters, in reading order.
CHAPTERS: tuple[Chapter, ...] = (
    Chapter(1, "chapters/01_tokens_and_embeddings", "Tokens and embeddings", ("core.checkpoints", "core.config")),
    Chapter(2, "chapters/02_attention", "Scaled dot-product attention", ("core.masks", "core.kernels")),
    Chapter(3, "chapters/03_multi_head_attention", "Multi-head attention", ("book.attention", "core.outputs")),
    Chapter(
        4,
        "chapters/04_bert_self_attention",
        "BERT's self-attention",
        _with_families(4, last=("parts.heads", "parts.attention", "interop")),
    ),
    Chapter(5, "chapters/05_attention_views", "Attention you can see", ("visualize",)),
    Chapter(
        6,
        "chapters/06_feed_forward_and_layer_norm",
        "The feed-forward layer, layer norm and skip connections",
        ("core.activations", "book.feed_forward", "parts.feed_forward", "core.residual", "parts.norms"),
    ),
    Chapter(7, "chapters/07_positional_embeddings", "Positional embeddings", ("book.embeddings", "parts.positions")),
    Chapter(
        8, "chapters/08_encoder_and_bert", "The encoder: stacking layers into BERT", ("book.encoder", "parts.stack")
    ),
    Chapter(9, "chapters/09_classification_head", "A classification head", ("book.classification",)),
    Chapter(10, "chapters/10_decoder", "The decoder", ("book.decoder", "book.generation")),
    Chapter(11, "chapters/11_training", "Training a tiny encoder-decoder", ("book.training",)),
    Chapter(
        12,
        "chapters/12_meet_the_transformers",
        "Meet the transformers",
        ("models.registry", "core.records", "family_tree"),
    ),
    Chapter(
        13,
        "chapters/13_encoder_branch",
        "The encoder branch",
        _with_families(13, first=("pretraining.masked_lm",), last=("figures.lineage", "figures.encoders")),
    ),
    Chapter(
        14,
        "chapters/14_decoder_branch",
        "The decoder branch",
        _with_families(14, last=("book.decoding", "figures.decoders"), gpt_neo="parts.rotary"),
    ),
    Chapter(
        15,
        "chapters/15_encoder_decoder_branch",
        "The encoder-decoder branch",
        _with_families(15, last=("pretraining.denoising", "figures.encoder_decoders")),
    ),
    Chapter(
        16,
        "chapters/16_making_attention_fast",
        "Making attention fast",
        (
            "fast.bert",
            "fast.encode",
            "fast.corpus",
            "fast.flash",
            "fast.parallel",
            "parts.static_cache",
            "figures.fast",
        ),
    ),
    Chapter(
        17,
        "chapters/17_a_trained_decoder",
        "A trained decoder, read from its 4-bit file",
        ("core.gguf", "trained", "parts.int4", "onnx_export", "figures.trained"),
    ),
    Chapter(18, "chapters/18_reading_a_trained_model", "Reading a trained model", ("lens", "figures.lens")),
    Chapter(
        19,
        "chapters/19_training_a_language_model",
        "Training a language model",
        ("bpe", "pretraining.causal_lm", "pretraining.training_step", "figures.training"),
    ),
    Chapter(
        20,
        "chapters/20_fine_tuning",
        "Fine-tuning a pretrained model",
        ("tasks", "fine_tuning", "lora", "figures.fine_tuning"),
    ),
    Chapter(21, "chapters/21_errata", "What other tutorials get wrong", ()),
)

#: The modules every chapter leans on and none is about.
SUPPORT = Chapter(
    0,
    None,
    "Support",
    ("core.validation", "diagrams", "manifest"),
)

#: Every module of the package (relative names) in reading order.
MODULES: tuple[str, ...] = tuple(module for chapter in (*CHAPTERS, SUPPORT) for module in chapter.modules)

#: The package's parts, each sub-package or top-level module with what it holds, from the ground floor up.
LAYOUT: tuple[tuple[str, str], ...] = (
    (
        "core",
        "the ground floor, importing nothing above it: config, checkpoints, masks, the attention kernels, "
        "activations, the residual sub-layer, outputs, validation, GGUF files and their 4- and 8-bit blocks, the "
        "families' records",
    ),
    (
        "parts",
        "what models assemble: norms, positional schemes, feed-forward variants, heads, the attention between "
        "a family's projections, a stack of layers, and its decoding steps over a static cache",
    ),
    (
        "book",
        "the book's from-scratch path: attention, feed-forward, embeddings, encoder, classifier, decoder, "
        "generation, training",
    ),
    (
        "pretraining",
        "how each branch is pretrained: masked, causal and denoising objectives, one module each, and one "
        "training step of every family checked against transformers'",
    ),
    (
        "bpe",
        "byte-level BPE trained from scratch: GPT-2's words and byte alphabet, pairs counted and merged as "
        "tokenizers' trainer merges them, encoding and decoding",
    ),
    (
        "models",
        "the model families under HuggingFace's names, one file a family (its modules, key map and "
        "registration with from_hf) beside its record, and the registry from_hf finds them in",
    ),
    (
        "fast",
        "the same models with less work and on more processes: fused projections and packed tokens, sentence "
        "embeddings (and a real corpus to embed), FlashAttention's online softmax, tensor parallelism",
    ),
    (
        "trained",
        "the trained decoder (SmolLM2-135M-Instruct) read from llama.cpp's GGUF file into the package's Llama: "
        "names, the rows of rotary attention, the config, the verified default (load_decoder)",
    ),
    (
        "interop",
        "the same weights in the book's modules, BERT's and PyTorch's: heads fused and split, layers converted",
    ),
    (
        "onnx_export",
        "the trained decoder's step as one ONNX graph over the file's own 4- and 8-bit blocks (onnxruntime's "
        "MatMulNBits, the exact Q4_1 mapping, GroupQueryAttention), and the engine that generates with it",
    ),
    ("visualize", "attention drawn: bertviz's views and heatmaps; next-token charts; figures shown or saved"),
    (
        "lens",
        "any module's output read and changed with forward hooks, under HuggingFace's names: the cache of a run "
        "and its attention probabilities, patches",
    ),
    (
        "family_tree",
        "the families drawn from their modules: the tree, a family's lines beside its parent's, the branches' table",
    ),
    ("diagrams", "the architecture drawn from the modules themselves: layers, the head split, the cache"),
    (
        "figures",
        "the chapters' figures, drawn from the package's own tensors: the lineage of the families, what each "
        "branch changes and why, the fast kernels, what a trained model does inside",
    ),
    (
        "lora",
        "LoRA: a trainable low-rank update beside chosen linear layers of a frozen model, merged into the weights, "
        "saved and loaded as peft does",
    ),
    ("tasks", "a real task to fine-tune on, offline: sentences of Python's documentation labelled by its part"),
    (
        "fine_tuning",
        "a pretrained encoder fine-tuned to classify sentences: a linear head on its sentence vectors, and the loop "
        "that trains the head alone or the whole model, scoring a held-out set",
    ),
    ("manifest", "this reading order"),
)


def chapter_of(module: str) -> Chapter:
    """The chapter that builds ``module`` (a name relative to the package), or :data:`SUPPORT`.

    Raises:
        KeyError: for a module the manifest does not list.
    """
    for chapter in (*CHAPTERS, SUPPORT):
        if module in chapter.modules:
            return chapter
    raise KeyError(f"module {module!r} is not in the reading order (literate_transformer.manifest)")


def reading_order_rst() -> str:
    """The reading order and the layout as reStructuredText (the end of the package's docstring)."""
    lines = ["Reading order", "-------------", ""]
    for chapter in CHAPTERS:
        modules = ", ".join(f":mod:`~{PACKAGE}.{module}`" for module in chapter.modules) or "(no module)"
        lines.append(f"{chapter.number}. {chapter.title}: {modules}")
    support = " and ".join(f":mod:`~{PACKAGE}.{module}`" for module in SUPPORT.modules)
    lines += ["", f"Every chapter leans on {support}.", "", "Layout", "------", ""]
    for part, what in LAYOUT:
        lines.append(f"``{part}``\n    {what}")
    return "\n".join(lines) + "\n"
