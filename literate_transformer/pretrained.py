"""Pretrained weights: from a checkpoint file to :class:`~literate_transformer.models.bert.BertModel`, key by key.

Because :mod:`~literate_transformer.models.bert` keeps HuggingFace's module names, a
BERT checkpoint's tensors *almost* have our parameter names already.  The
differences are few and are all written down in :func:`map_bert_state_dict`:

* checkpoints saved from a model with heads (``BertForPreTraining``,
  ``BertForMaskedLM``) prefix every encoder key with ``bert.``: stripped;
* their pre-training heads (``cls.predictions.*``, ``cls.seq_relationship.*``)
  are not part of :class:`~literate_transformer.models.bert.BertModel`: dropped;
* ``embeddings.position_ids`` and ``embeddings.token_type_ids`` are constant
  buffers that older checkpoints saved; we build them on the fly: dropped;
* checkpoints converted from the original TensorFlow code name the layer-norm
  parameters ``gamma`` and ``beta``: renamed ``weight`` and ``bias``.

Everything else must match exactly: a missing, unexpected or mis-shaped tensor
is an error that lists the keys, never a silently half-initialised model
(``load_state_dict(strict=False)`` would hide exactly the bugs that matter).

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> from literate_transformer.models.bert import BertModel
>>> model = BertModel(TransformerConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
...                                     num_attention_heads=2, intermediate_size=16))
>>> state = {"bert." + key: value for key, value in model.state_dict().items()}
>>> state["cls.seq_relationship.weight"] = torch.zeros(2, 8)
>>> mapped = map_bert_state_dict(state, model.state_dict())
>>> sorted(mapped) == sorted(model.state_dict())
True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["map_bert_state_dict", "read_checkpoint_state_dict", "load_pretrained", "load_from_hf"]

#: Prefix of the encoder's keys in checkpoints of models with heads.
BASE_PREFIX = "bert."
#: Key prefixes of pre-training heads, which BertModel does not have.
HEAD_PREFIXES = ("cls.",)
#: Constant buffers some checkpoints saved; BertModel builds them per call.
DROPPED_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
#: TensorFlow-era layer-norm parameter names and today's.
LEGACY_NAMES = {"gamma": "weight", "beta": "bias"}


def map_bert_state_dict(state_dict: Mapping[str, Tensor], expected: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Rename a BERT checkpoint's tensors to our parameter names and check them all.

    Args:
        state_dict: The checkpoint's tensors, by name.
        expected: The target model's ``state_dict()`` (names and shapes).

    Returns:
        A dictionary with exactly the keys of ``expected``.

    Raises:
        ValueError: listing every missing, unexpected and mis-shaped key.
    """
    mapped: dict[str, Tensor] = {}
    unexpected: list[str] = []
    for original_key, tensor in state_dict.items():
        key = original_key
        # 1) bert.encoder.layer.0... -> encoder.layer.0...
        if key.startswith(BASE_PREFIX):
            key = key[len(BASE_PREFIX) :]
        # 2) Pre-training heads and constant buffers are not parameters of BertModel.
        if original_key.startswith(HEAD_PREFIXES) or key in DROPPED_BUFFERS:
            continue
        # 3) ...LayerNorm.gamma -> ...LayerNorm.weight, ...LayerNorm.beta -> ...LayerNorm.bias
        module_path, _, leaf = key.rpartition(".")
        if leaf in LEGACY_NAMES:
            key = f"{module_path}.{LEGACY_NAMES[leaf]}"
        if key not in expected:
            unexpected.append(original_key)
            continue
        if key in mapped:
            unexpected.append(f"{original_key} (a second tensor for {key})")
            continue
        mapped[key] = tensor
    missing = sorted(set(expected) - set(mapped))
    misshaped = [
        f"{key}: checkpoint {tuple(mapped[key].shape)}, model {tuple(expected[key].shape)}"
        for key in sorted(mapped)
        if tuple(mapped[key].shape) != tuple(expected[key].shape)
    ]
    problems = []
    if missing:
        problems.append("missing tensors: " + ", ".join(missing))
    if unexpected:
        problems.append("unexpected tensors: " + ", ".join(sorted(unexpected)))
    if misshaped:
        problems.append("mis-shaped tensors: " + "; ".join(misshaped))
    if problems:
        raise ValueError("the checkpoint does not fit BertModel: " + " | ".join(problems))
    return mapped


def _checkpoint_file(name_or_path: str, is_local: bool, filename: str) -> Path | None:
    """A file of a checkpoint folder, or of a hub checkpoint in the HuggingFace cache."""
    if is_local:
        path = Path(name_or_path) / filename
        return path if path.is_file() else None
    from transformers.utils import cached_file

    found = cached_file(
        name_or_path,
        filename,
        _raise_exceptions_for_missing_entries=False,
        _raise_exceptions_for_connection_errors=False,
    )
    return Path(found) if found else None


def read_checkpoint_state_dict(weights_file: str | os.PathLike[str]) -> dict[str, Tensor]:
    """Read the tensors of ``model.safetensors`` or ``pytorch_model.bin`` (never executing pickled code)."""
    weights_file = Path(weights_file)
    if weights_file.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(weights_file), device="cpu")
    # weights_only=True: a .bin file is a pickle; only tensors may come out of it.
    return torch.load(weights_file, map_location="cpu", weights_only=True)


def _check_bert_config(config_file: Path) -> None:
    model_type = json.loads(config_file.read_text()).get("model_type")
    if model_type != "bert":
        raise ValueError(f"{config_file} describes a {model_type!r} model; BertModel loads only model_type 'bert'")


def load_pretrained(cls: type[nn.Module], path_or_name: str | os.PathLike[str] | None = None, **config_changes: Any):
    """Implementation of :meth:`literate_transformer.models.bert.BertModel.from_pretrained`."""
    from .checkpoints import resolve_checkpoint
    from .core.config import TransformerConfig

    checkpoint = resolve_checkpoint(path_or_name)
    config_file = _checkpoint_file(checkpoint.name_or_path, checkpoint.is_local, "config.json")
    if config_file is None:
        raise ValueError(f"{checkpoint.name_or_path} has no config.json")
    _check_bert_config(config_file)
    config = TransformerConfig.from_pretrained(checkpoint.name_or_path)
    if config_changes:
        config = config.replace(**config_changes)
    weights_file = checkpoint.weights_file
    if weights_file is None:
        for name in ("model.safetensors", "pytorch_model.bin"):
            weights_file = _checkpoint_file(checkpoint.name_or_path, checkpoint.is_local, name)
            if weights_file is not None:
                break
    if weights_file is None:
        raise ValueError(f"{checkpoint.name_or_path} has neither model.safetensors nor pytorch_model.bin")
    model = cls(config)
    state_dict = map_bert_state_dict(read_checkpoint_state_dict(weights_file), model.state_dict())
    model.load_state_dict(state_dict, strict=True)
    return model.eval()


def load_from_hf(cls: type[nn.Module], hf_model: nn.Module, **config_changes: Any):
    """Implementation of :meth:`literate_transformer.models.bert.BertModel.from_hf`."""
    from .core.config import as_config

    hf_config = getattr(hf_model, "config", None)
    if getattr(hf_config, "model_type", None) != "bert":
        raise ValueError(
            f"hf_model must be a transformers BERT model (config.model_type 'bert'), got {type(hf_model).__name__}"
        )
    config = as_config(hf_config)
    if config_changes:
        config = config.replace(**config_changes)
    state = hf_model.state_dict()
    has_pooler = any(key.removeprefix(BASE_PREFIX).startswith("pooler.") for key in state)
    model = cls(config, add_pooling_layer=has_pooler)
    model.load_state_dict(map_bert_state_dict(state, model.state_dict()), strict=True)
    # Same mode as the source (a live model may be training).
    return model.train(hf_model.training)
