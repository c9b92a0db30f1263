"""The trained decoder on the site: SmolLM2-135M-Instruct read from its GGUF file, its running example and proofs.

Four proofs, on the default file:

* the package's state dict against ``transformers``' own reading of the file
  (``from_pretrained(folder, gguf_file=...)``), every tensor;
* the tokenizer the package builds from the metadata against ``transformers``',
  on texts of every kind of character;
* the logits at the real positions of a left-padded batch of prompts, and the
  ids ``generate()`` writes for 32 new tokens (greedy, sampled under one seed,
  beam search), against ``transformers``' Llama holding the same weights.

``transformers`` takes about 15 s to read the file, which is why the site's
build measures these (in a process of its own, beside the build's other
work), keeps what ``transformers`` read (its tensors, and its token ids of
the texts) per digest of the file and version of ``transformers``, in the
folder ``LT_SITE_CACHE`` names (the site's build sets it), so that an edit
of the package that runs these proofs again does not read the file through
``transformers`` again, and the test suite proves the same reading on small
files that llama.cpp's own Python package writes (``tests/test_trained.py``).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import importlib.metadata
import json
import os
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any
from unittest import mock

import gguf
import safetensors.torch
import torch
import transformers

from literate_transformer.core.checkpoints import resolve_decoder, sha256_of
from literate_transformer.trained import load_decoder

from ..base import Proof, RunningExample, max_diff
from ..deps import paused

__all__ = ["PROMPTS", "EXAMPLES", "PROOFS"]

#: The prompts of the proofs: three lengths, padded on the left.
PROMPTS = ("The capital of France is", "Water boils at a temperature of", "Once upon a time")
#: generate()'s options of each decoding the badges measure, and the seed both sides draw from.
DECODINGS = {
    "greedy": {},
    "sampled": {"do_sample": True, "temperature": 0.8, "top_k": 40, "top_p": 0.9},
    "beam": {"num_beams": 3},
}
SEED = 7
NEW_TOKENS = 32


#: Texts of every kind of character, for the tokenizer's proof.
TEXTS = (
    *PROMPTS,
    "  two spaces, a tab\tand\n\nnew lines",
    "numbers: 1,000°C, 3.14159, 2024-01-22",
    "émojis 🤗, accents, 中文",
    "def f(x):\n    return x ** 2  # comment",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
)


@lru_cache(maxsize=1)
def _models() -> dict[str, Any]:
    tokenizer, ours = load_decoder()
    hf = transformers.LlamaForCausalLM.from_pretrained(
        None, config=copy.deepcopy(ours.config), state_dict=ours.state_dict(), attn_implementation="eager"
    ).eval()
    batch = tokenizer(list(PROMPTS), return_tensors="pt", padding=True)
    return {"tokenizer": tokenizer, "ours": ours, "hf": hf, "batch": batch}


@torch.no_grad()
def _logits() -> float:
    models = _models()
    batch = models["batch"]
    ours = models["ours"](batch["input_ids"], batch["attention_mask"]).logits
    theirs = models["hf"](**batch).logits
    return max_diff(ours, theirs, batch["attention_mask"].bool())


@torch.no_grad()
def _generated_ids() -> float:
    """max |ours - transformers'| of the ids generate() writes, over the three decodings: 0 when they are identical."""
    models = _models()
    batch = {name: tensor[:2] for name, tensor in models["batch"].items()}
    largest = 0
    for options in DECODINGS.values():
        torch.manual_seed(SEED)
        with paused(transformers):  # the reference, without the build's call hook
            theirs = models["hf"].generate(**batch, max_new_tokens=NEW_TOKENS, **{"do_sample": False, **options})
        torch.manual_seed(SEED)
        ours = models["ours"].generate(batch["input_ids"], batch["attention_mask"], NEW_TOKENS, **options)
        if ours.shape != theirs.shape:
            return float("inf")
        largest = max(largest, int((ours - theirs).abs().max()))
    return float(largest)


#: The environment variable naming the folder where transformers' reading of the file is kept.
CACHE_ENV = "LT_SITE_CACHE"


@contextlib.contextmanager
def each_parse_once() -> Iterator[None]:
    """``transformers``' reading of a GGUF file, with what it computes again and again computed once.

    ``from_pretrained(folder, gguf_file=...)`` parses the file with ``gguf``'s
    ``GGUFReader`` once for the config and once for the weights, and
    ``AutoTokenizer`` once more: three parses of the header and its 49,152
    tokens (about 4 s each for SmolLM2).  Mapping the file's tensor names, it
    builds ``gguf``'s table of names (``get_tensor_name_map``) once per module
    of the model (397 times for SmolLM2, about 4 s in all).  Both are functions
    of their arguments that ``transformers`` only reads from; while this is
    open, each is computed once per argument and the same object is handed
    back: the same reading, parsed once (``tests/docs/test_tools_gguf_reading.py``
    compares the two on a small file).
    """
    readers = functools.lru_cache(maxsize=None)(gguf.GGUFReader)
    name_maps = functools.lru_cache(maxsize=None)(gguf.get_tensor_name_map)
    with mock.patch.object(gguf, "GGUFReader", readers), mock.patch.object(gguf, "get_tensor_name_map", name_maps):
        yield


@lru_cache(maxsize=1)
def _transformers_reading() -> tuple[dict[str, torch.Tensor], list[list[int]]]:
    """``transformers``' reading of the default file: every tensor, and the token ids of :data:`TEXTS`.

    Kept in ``$LT_SITE_CACHE`` per SHA-256 of the file, versions of ``transformers`` and ``gguf``, and texts.
    """
    path = resolve_decoder()
    key = hashlib.sha256(
        json.dumps([sha256_of(path), transformers.__version__, importlib.metadata.version("gguf"), TEXTS]).encode()
    ).hexdigest()[:16]
    folder = os.environ.get(CACHE_ENV)
    stored = Path(folder, f"transformers-reading-{key}") if folder else None
    # The token ids are written last: their file marks a finished reading.
    if stored is not None and stored.with_suffix(".json").is_file():
        ids = json.loads(stored.with_suffix(".json").read_text())
        return safetensors.torch.load_file(stored.with_suffix(".safetensors")), ids
    # transformers' own reading, its cost without the build's call hook (what it reached: transformers and gguf).
    with paused(transformers, gguf), each_parse_once():
        model = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
        tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    # Each tensor on its own (the tied head shares the token table's storage, which safetensors refuses).
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    ids = [tokenizer(text)["input_ids"] for text in TEXTS]
    if stored is not None:
        stored.parent.mkdir(parents=True, exist_ok=True)
        safetensors.torch.save_file(state, stored.with_suffix(".safetensors"))
        stored.with_suffix(".json").write_text(json.dumps(ids))
    return state, ids


@torch.no_grad()
def _state_dict() -> float:
    """max |ours - transformers'| over every tensor of the two readings of the file (inf if the names differ)."""
    ours = load_decoder()[1].state_dict()
    theirs = _transformers_reading()[0]
    if sorted(ours) != sorted(theirs):
        return float("inf")
    return max(max_diff(ours[name], theirs[name]) for name in ours)


def _token_ids() -> float:
    """max |ours - transformers'| of the token ids of :data:`TEXTS` (inf if a text gets another count)."""
    ours, theirs = load_decoder()[0], _transformers_reading()[1]
    largest = 0
    for text, b in zip(TEXTS, theirs, strict=True):
        a = ours(text)["input_ids"]
        if len(a) != len(b):
            return float("inf")
        largest = max([largest, *(abs(x - y) for x, y in zip(a, b, strict=True))])
    return float(largest)


def _read_the_file() -> None:
    tokenizer, model = load_decoder()
    prompt = tokenizer("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        model(prompt["input_ids"], prompt["attention_mask"])


#: The running example of the GGUF reader and of the trained module: the default file read, one prompt run.
EXAMPLES = (
    RunningExample(
        "smollm2",
        "SmolLM2-135M-Instruct read from its GGUF file (30 layers, 9 query heads sharing 3 key/value heads of 64, "
        'width 576), then "The capital of France is" (5 tokens) through it',
        {"B": 1, "T": 5, "S": 5, "H": 9, "K": 3, "D": 64, "R": 64, "E": 576, "F": 1536, "V": 49152, "L": 30},
        _read_the_file,
    ),
)

PROOFS = (
    Proof(
        "trained.state_dict_from_gguf",
        "transformers from_pretrained(gguf_file=...), every tensor",
        "tests/test_trained.py::test_the_tiny_files_state_dict_equals_transformers_reading",
        _state_dict,
        tolerance=0.0,
        example="smollm2",
    ),
    Proof(
        "core.gguf.gguf_tokenizer",
        "transformers AutoTokenizer.from_pretrained(gguf_file=...), token ids",
        "tests/test_trained.py::test_the_tiny_files_tokenizer_writes_transformers_ids",
        _token_ids,
        tolerance=0.0,
        example="smollm2",
        dtype="int64",
    ),
    Proof(
        "trained.llama_from_gguf",
        "transformers LlamaForCausalLM, the file's weights (logits, 3 padded prompts)",
        "tests/test_trained.py::test_the_defaults_logits_on_a_padded_batch_are_transformers_within_1e_4",
        _logits,
        tolerance=1e-4,
        example="smollm2",
    ),
    Proof(
        "trained.load_decoder",
        "transformers generate(), greedy, sampled and beam ids of 32 new tokens",
        "tests/test_trained.py::test_the_tiny_files_logits_and_generated_ids_are_transformers",
        _generated_ids,
        tolerance=0.0,
        example="smollm2",
        dtype="int64",
    ),
)
