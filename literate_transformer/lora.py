r"""LoRA: fine-tune a frozen model through a small low-rank update beside some of its linear layers.

Fine-tuning every weight of a pretrained model costs as much memory as
pretraining it: a gradient for each weight, and Adam's two running averages
beside it, three more copies of the model.  Hu et al. (2021, "LoRA: Low-Rank
Adaptation of Large Language Models", arXiv:2106.09685, §4.1) froze the
pretrained weight :math:`W_0 \in \mathbb{R}^{d_\text{out} \times d_\text{in}}`
of a linear layer and learned its change as the product of two thin
matrices, :math:`\Delta W = B A`, with :math:`A \in \mathbb{R}^{r \times
d_\text{in}}`, :math:`B \in \mathbb{R}^{d_\text{out} \times r}` and a rank
:math:`r \ll \min(d_\text{in}, d_\text{out})`:

.. math::

    h = x W_0^\top + b + \frac{\alpha}{r}\, x A^\top B^\top .

The frozen layer computes the first two terms as before; the **adapter**
beside it reads the same input, narrows it to :math:`r` features (``lora_A``)
and widens them back (``lora_B``).  Only :math:`A` and :math:`B` train:
:math:`r (d_\text{in} + d_\text{out})` numbers instead of
:math:`d_\text{in} d_\text{out}`.

The pieces, as peft builds them
-------------------------------
* **A starts random, B starts at zero.**  :math:`A` is drawn as
  :class:`torch.nn.Linear` draws its weights (Kaiming-uniform with
  :math:`a = \sqrt 5`, uniform in :math:`\pm 1/\sqrt{d_\text{in}}`; the paper
  says Gaussian, its reference code and peft use this), :math:`B` is zero.
  So :math:`\Delta W = 0` at the start: the adapted model computes exactly the
  pretrained one until the first step, and the first gradients reach
  :math:`B` alone (:math:`\partial L / \partial A` has a factor :math:`B`).
* **The scale** :math:`\alpha / r`.  Hu et al. set :math:`\alpha` to the
  first :math:`r` they tried and left it; with Adam, changing :math:`\alpha`
  acts like changing the learning rate, and dividing by :math:`r` lets one
  try another rank without retuning it.  peft's default is
  :math:`\alpha = 8` for :math:`r = 8`; common recipes, and :func:`add`'s
  defaults, take :math:`\alpha = 2r`.
* **Dropout** on the adapter's input only (``lora_dropout``, none by
  default): the frozen layer sees the input unchanged.
* **Which layers.**  The paper adapts only attention's query and value
  projections (§7.1: at a fixed budget of trainable numbers, :math:`W_q` and
  :math:`W_v` together did best); peft's defaults are the same
  (``q_proj``/``v_proj`` for Llama, ``query``/``value`` for BERT).
  :func:`add` wraps every :class:`torch.nn.Linear` whose own name (the last
  part of its dotted name, as peft matches a list of names) is among
  ``targets``, and freezes every other parameter of the model.
* **Merging.**  After training, :math:`W = W_0 + \frac{\alpha}{r} B A` is one
  matrix of the layer's shape: :func:`merge` folds each adapter in and puts a
  plain :class:`torch.nn.Linear` back, so the adapted model costs nothing
  more to run (the paper's "no additional inference latency").

How this maps to peft
---------------------
:class:`LoraLinear` is ``peft.tuners.lora.layer.Linear`` with one adapter:
the same names (``base_layer``, ``lora_A``, ``lora_B``, ``lora_dropout``,
``scaling``), the same forward, the same initialisation drawn in the same
order (the same seed gives the same :math:`A`).  peft keeps each piece in a
dictionary by adapter name (``lora_A.default.weight``), so that one model
can hold several adapters; with one, the names here are the keys peft saves
(``lora_A.weight``).  :func:`add` is ``get_peft_model(model,
LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets,
lora_dropout=dropout))`` with LoraConfig's other defaults (``bias="none"``:
every bias frozen; no rsLoRA, whose scale is :math:`\alpha/\sqrt r`; no
DoRA), returning the model itself rather than a wrapper.  As peft does, an
adapter beside a float16 or bfloat16 layer is kept in float32.
:func:`save` writes the folder ``save_pretrained`` writes
(``adapter_model.safetensors`` and ``adapter_config.json``), which
``peft.PeftModel.from_pretrained`` loads onto the ``transformers`` model
the package's model was converted from, and :func:`load` reads back.

>>> import torch
>>> from transformers import LlamaConfig
>>> from literate_transformer.models.llama import LlamaForCausalLM
>>> config = LlamaConfig(vocab_size=40, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
...                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16)
>>> model = add(LlamaForCausalLM(config), rank=4, alpha=8, targets=("q_proj", "v_proj"))
>>> model.model.layers[0].self_attn.v_proj.lora_B.weight.shape       # (out, r): 2 key/value heads of 6
torch.Size([12, 4])
>>> trainable, total = trainable_parameters(model)
>>> trainable == 2 * (4 * (24 + 24) + 4 * (24 + 12)), trainable < total  # two layers, r (in + out) per adapter
(True, True)
>>> type(merge(model).model.layers[0].self_attn.q_proj).__name__
'Linear'
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from .core.validation import check_positive_int
from .parts.int4 import PackedLinear

__all__ = [
    "LoraLinear",
    "add",
    "merge",
    "adapters",
    "trainable_parameters",
    "PREFIX",
    "WEIGHTS_NAME",
    "CONFIG_NAME",
    "save",
    "load",
]

#: What peft puts before a module's name in a saved adapter, its PeftModel's ``base_model`` (the LoRA tuner) and
#: the tuner's ``model`` (the model it adapts).
PREFIX = "base_model.model."
#: The adapter's weights, as ``PeftModel.save_pretrained`` names the file.
WEIGHTS_NAME = "adapter_model.safetensors"
#: The adapter's config, as ``PeftModel.save_pretrained`` names the file.
CONFIG_NAME = "adapter_config.json"


class LoraLinear(nn.Module):
    r"""A frozen linear layer and a trainable low-rank update beside it: :math:`x W^\top + b + \frac{\alpha}{r} x A^\top B^\top`.

    Args:
        base_layer: The layer to adapt; its parameters are left as they are (:func:`add` freezes them).
        rank: :math:`r`, the adapter's inner width.
        alpha: :math:`\alpha`; the update is scaled by :math:`\alpha / r`.
        dropout: The probability of dropping an input feature of the adapter (training only).
    """

    def __init__(self, base_layer: nn.Linear, rank: int, alpha: float, dropout: float = 0.0) -> None:
        super().__init__()
        #: The frozen layer, :math:`W_0` and :math:`b` (peft's name).
        self.base_layer = base_layer
        #: :math:`r` and :math:`\alpha` (peft's names).
        self.r, self.lora_alpha = rank, alpha
        #: The update's scale, :math:`\alpha / r`.
        self.scaling = alpha / rank
        #: Dropout on the adapter's input alone (the identity when ``dropout`` is 0, as in peft).
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        # Built in peft's order, on the CPU in the default dtype: A, then B, then A drawn again (so the same seed
        # gives peft's numbers).
        #: :math:`A`, ``(r, in_features)``: the input narrowed to r features.
        self.lora_A = nn.Linear(base_layer.in_features, rank, bias=False)
        #: :math:`B`, ``(out_features, r)``: widened back.
        self.lora_B = nn.Linear(rank, base_layer.out_features, bias=False)
        # A as nn.Linear draws a weight (Kaiming-uniform, a = sqrt 5), B zero: Delta W = B A starts at 0.
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)
        weight = base_layer.weight
        # Beside a half-precision layer the adapter stays in float32 (peft's autocast_adapter_dtype).
        dtype = torch.float32 if weight.dtype in (torch.float16, torch.bfloat16) else weight.dtype
        self.lora_A.to(weight.device, dtype)
        self.lora_B.to(weight.device, dtype)

    @property
    def in_features(self) -> int:
        """The frozen layer's input width."""
        return self.base_layer.in_features

    @property
    def out_features(self) -> int:
        """The frozen layer's output width."""
        return self.base_layer.out_features

    @property
    def weight(self) -> Tensor:
        r"""The matrix the layer computes with, :math:`W_0 + \frac{\alpha}{r} B A`, for code that reads a linear
        layer's weight (peft's ``weight`` is :math:`W_0` alone)."""
        return self.base_layer.weight + self.delta_weight().to(self.base_layer.weight.dtype)

    @property
    def bias(self) -> Tensor | None:
        """The frozen layer's bias."""
        return self.base_layer.bias

    def forward(self, x: Tensor) -> Tensor:
        """The frozen layer's output plus the scaled low-rank update.

        Args:
            x: Inputs ``(*, in_features)``.

        Returns:
            ``(*, out_features)``, in the frozen layer's dtype.
        """
        # The frozen layer: x W0^T + b.
        result = self.base_layer(x)
        # The adapter: dropout, narrow to r features by A, widen back by B.
        update = self.lora_B(self.lora_A(self.lora_dropout(x.to(self.lora_A.weight.dtype))))  # (*, r) -> (*, out)
        # Scaled by alpha / r and added, in the frozen layer's dtype.
        return (result + update * self.scaling).to(result.dtype)

    def delta_weight(self) -> Tensor:
        r""":math:`\frac{\alpha}{r} B A`, the update as one ``(out_features, in_features)`` matrix."""
        return (self.lora_B.weight @ self.lora_A.weight) * self.scaling

    def extra_repr(self) -> str:
        return f"rank={self.r}, alpha={self.lora_alpha}, scaling={self.scaling:g}"


def adapters(model: nn.Module) -> dict[str, LoraLinear]:
    """The model's adapters by the dotted name of the layer each adapts (``model.layers.0.self_attn.q_proj``)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return {name: module for name, module in model.named_modules() if isinstance(module, LoraLinear)}


def _check_targets(targets: object) -> tuple[str, ...]:
    """A module name or a collection of them, as a tuple of non-empty names."""
    names = (targets,) if isinstance(targets, str) else targets
    if not isinstance(names, Iterable):
        raise TypeError(f"targets must be a module name or names like ('q_proj', 'v_proj'), got {targets!r}")
    names = tuple(names)
    if not names:
        raise ValueError("targets must name at least one module, got none")
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(f"targets must be module names (non-empty strings), got {name!r} in {targets!r}")
    return names


def _check_alpha(alpha: object) -> float:
    """A positive finite number (not a bool)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a positive finite number, got {alpha!r}")
    return alpha


def _check_dropout(dropout: object) -> float:
    """A probability in [0, 1) (not a bool)."""
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
    return float(dropout)


def _targeted(model: nn.Module, targets: tuple[str, ...]) -> dict[str, nn.Linear]:
    """The linear layers whose own names are among ``targets``, by their dotted names; refusing what cannot be."""
    found: dict[str, nn.Module] = {}
    names: set[str] = set()
    inside = ()  # the dotted names of the adapters met so far: their pieces are no targets
    for name, module in model.named_modules():
        if not name or name.startswith(inside):
            continue
        own = name.rpartition(".")[2]
        names.add(own)
        if isinstance(module, LoraLinear):
            inside += (name + ".",)
        if own in targets:
            found[name] = module
    for target in targets:
        if not any(name.rpartition(".")[2] == target for name in found):
            nearest = difflib.get_close_matches(target, sorted(names), n=5, cutoff=0.5) or sorted(names)[:5]
            raise ValueError(
                f"targets: no module of the model is named {target!r}; the nearest names: "
                + ", ".join(map(repr, nearest))
            )
    for name, module in found.items():
        if isinstance(module, LoraLinear):
            raise ValueError(
                f"targets: {name} already has a LoRA adapter (rank {module.r}); merge it (lora.merge) before adding one"
            )
        if not isinstance(module, nn.Linear):
            raise TypeError(
                f"targets: {name!r} is a {type(module).__name__}, not a torch.nn.Linear; LoRA here adapts linear layers"
            )
    return found


def add(
    model: nn.Module,
    rank: int = 8,
    alpha: float = 16,
    targets: str | Iterable[str] = ("q_proj", "v_proj"),
    dropout: float = 0.0,
) -> nn.Module:
    r"""Put a LoRA adapter beside each targeted linear layer and freeze every other parameter.

    peft's ``get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, target_modules=list(targets),
    lora_dropout=dropout))``, done to the model itself.

    Args:
        model: Any module; it is changed in place (and returned).
        rank: :math:`r`, at most the smaller width of each targeted layer.
        alpha: :math:`\alpha`; each update is scaled by :math:`\alpha / r`.
        targets: The own names of the layers to adapt (``"q_proj"`` adapts every ``....q_proj``).
        dropout: Dropout on the adapters' inputs, in [0, 1).

    Returns:
        The model, each targeted :class:`torch.nn.Linear` replaced by a :class:`LoraLinear` around it; only the
        adapters' parameters require gradients.

    Raises:
        TypeError: for a model that is not a module, targets that are not names, or a target that names a module
            other than a :class:`torch.nn.Linear`.
        ValueError: for a rank that is not a positive int or exceeds a targeted layer's smaller width, an alpha
            that is not a positive finite number, a dropout outside [0, 1), a target that names no module (with
            the nearest names), or a layer that already has an adapter.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if any(isinstance(module, PackedLinear) for module in model.modules()):
        raise ValueError(
            "model multiplies by 4-bit layers (load_decoder(weights='int4')), which adapters cannot change; "
            "load it with weights='float32'"
        )
    rank = check_positive_int(rank, "rank")
    alpha, dropout = _check_alpha(alpha), _check_dropout(dropout)
    layers = _targeted(model, _check_targets(targets))
    for name, layer in layers.items():
        if rank > min(layer.in_features, layer.out_features):
            raise ValueError(
                f"rank must be at most the smaller width of each targeted layer: {name} is "
                f"{layer.in_features} -> {layer.out_features}, got rank={rank}"
            )
    # Every parameter frozen (peft's bias="none": the biases too) ...
    model.requires_grad_(False)
    for name, layer in layers.items():
        parent_name, _, own = name.rpartition(".")
        setattr(model.get_submodule(parent_name), own, LoraLinear(layer, rank, alpha, dropout).train(layer.training))
    # ... but the adapters' A and B, these and any added before.
    for adapter in adapters(model).values():
        adapter.lora_A.requires_grad_(True)
        adapter.lora_B.requires_grad_(True)
    return model


def merge(model: nn.Module) -> nn.Module:
    r"""Fold every adapter into its layer's weight, :math:`W \leftarrow W + \frac{\alpha}{r} B A`, and put the plain layer back.

    peft's ``merge_and_unload()``.  The merged model computes what the adapted one did (up to rounding) with one
    multiply per layer; its parameters stay frozen as :func:`add` left them.

    Returns:
        The model, changed in place.

    Raises:
        TypeError: for a model that is not a module.
        ValueError: for a model without adapters.
    """
    found = adapters(model)
    if not found:
        raise ValueError("model has no LoRA adapter to merge (lora.add puts them in)")
    for name, adapter in found.items():
        base = adapter.base_layer
        with torch.no_grad():
            base.weight += adapter.delta_weight().to(base.weight.dtype)
        parent_name, _, own = name.rpartition(".")
        setattr(model.get_submodule(parent_name), own, base)
    return model


def trainable_parameters(model: nn.Module) -> tuple[int, int]:
    """How many numbers train, and how many the model has in all (each shared tensor counted once).

    peft's ``get_nb_trainable_parameters()``.

    Returns:
        ``(trainable, total)``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    parameters = list(model.parameters())
    return sum(p.numel() for p in parameters if p.requires_grad), sum(p.numel() for p in parameters)


def _one_setting(found: dict[str, LoraLinear], field: str) -> float:
    """The value every adapter has for ``field`` (a saved LoraConfig holds one)."""
    values = Counter(getattr(adapter, field) for adapter in found.values())
    if len(values) > 1:
        raise ValueError(
            f"model's adapters differ in {field} ({sorted(values)}): one adapter_config.json holds one value"
        )
    return next(iter(values))


def save(model: nn.Module, folder: str | os.PathLike[str]) -> Path:
    """Write the model's adapters as ``PeftModel.save_pretrained`` does, for peft (or :func:`load`) to read.

    The folder gets ``adapter_model.safetensors``, each adapter's matrices under the key peft gives them
    (``base_model.model.<layer>.lora_A.weight`` and ``.lora_B.weight``; ``get_peft_model_state_dict``), and
    ``adapter_config.json``, a ``LoraConfig``: ``r``, ``lora_alpha``, ``lora_dropout``, the layers' own names as
    ``target_modules``, and no ``task_type`` (the plain ``PeftModel``: a task type would make peft train and save
    a head too).  ``peft.PeftModel.from_pretrained(hf_model, folder)`` puts the same adapters on a
    ``transformers`` model with the same layer names.

    Args:
        model: A model with adapters (:func:`add`).
        folder: Where to write (made if missing).

    Returns:
        The folder.

    Raises:
        TypeError: for a model that is not a module.
        ValueError: for a model without adapters, or whose adapters differ in rank, alpha or dropout.
    """
    found = adapters(model)
    if not found:
        raise ValueError("model has no LoRA adapter to save (lora.add puts them in)")
    rank, alpha = _one_setting(found, "r"), _one_setting(found, "lora_alpha")
    dropouts = {name: getattr(adapter.lora_dropout, "p", 0.0) for name, adapter in found.items()}
    if len(set(dropouts.values())) > 1:
        raise ValueError(f"model's adapters differ in dropout ({sorted(set(dropouts.values()))})")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {
        f"{PREFIX}{name}.{piece}.weight": getattr(adapter, piece).weight.detach().contiguous().cpu()
        for name, adapter in found.items()
        for piece in ("lora_A", "lora_B")
    }
    save_file(tensors, str(folder / WEIGHTS_NAME), metadata={"format": "pt"})
    config = {
        "peft_type": "LORA",
        "task_type": None,
        "base_model_name_or_path": None,
        "r": rank,
        "lora_alpha": alpha,
        "lora_dropout": next(iter(dropouts.values())),
        "target_modules": sorted({name.rpartition(".")[2] for name in found}),
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "use_dora": False,
        "init_lora_weights": True,
        "modules_to_save": None,
        "inference_mode": True,
    }
    (folder / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return folder


#: What :func:`load` requires of a saved LoraConfig beyond its rank, alpha, dropout and targets: peft's defaults.
_DEFAULTS = {
    "peft_type": "LORA",
    "bias": "none",
    "fan_in_fan_out": False,
    "use_rslora": False,
    "use_dora": False,
    "rank_pattern": {},
    "alpha_pattern": {},
    "modules_to_save": None,
    "layers_to_transform": None,
}


def load(model: nn.Module, folder: str | os.PathLike[str]) -> nn.Module:
    """Put the adapters a folder holds (:func:`save`'s, or peft's ``save_pretrained``'s) on the model.

    :func:`add` with the config's ``r``, ``lora_alpha``, ``target_modules`` and ``lora_dropout``, then every
    adapter's matrices from the weights file, each key checked.

    Returns:
        The model with adapters (in place).

    Raises:
        FileNotFoundError: naming the folder's missing file.
        ValueError: for a config that is not a plain LoRA one (naming the field), or weights whose keys or shapes
            are not the adapters' (naming them); and whatever :func:`add` refuses.
    """
    folder = Path(folder)
    for name in (CONFIG_NAME, WEIGHTS_NAME):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name} does not exist (a LoRA adapter's folder holds {name})")
    config = json.loads((folder / CONFIG_NAME).read_text(encoding="utf-8"))
    for field, default in _DEFAULTS.items():
        if config.get(field, default) != default:
            raise ValueError(f"{CONFIG_NAME}: {field} is {config[field]!r}; this module loads {field}={default!r}")
    targets = config.get("target_modules")
    if not isinstance(targets, list):
        raise ValueError(f"{CONFIG_NAME}: target_modules must be a list of names, got {targets!r}")
    rank = check_positive_int(config.get("r"), f"{CONFIG_NAME}: r")
    # The keys and shapes the adapters will have, checked before the model is changed.
    tensors = load_file(str(folder / WEIGHTS_NAME))
    expected = {}
    for name, layer in _targeted(model, _check_targets(targets)).items():
        expected[f"{PREFIX}{name}.lora_A.weight"] = (rank, layer.in_features)
        expected[f"{PREFIX}{name}.lora_B.weight"] = (layer.out_features, rank)
    missing, unexpected = sorted(expected.keys() - tensors.keys()), sorted(tensors.keys() - expected.keys())
    if missing or unexpected:
        raise ValueError(f"{WEIGHTS_NAME}: missing keys {missing[:3]}, unexpected keys {unexpected[:3]}")
    for key, shape in expected.items():
        if tuple(tensors[key].shape) != shape:
            raise ValueError(f"{WEIGHTS_NAME}: {key} has shape {tuple(tensors[key].shape)}, expected {shape}")
    add(model, rank, config.get("lora_alpha"), targets, config.get("lora_dropout", 0.0))
    with torch.no_grad():
        for name, adapter in adapters(model).items():
            adapter.lora_A.weight.copy_(tensors[f"{PREFIX}{name}.lora_A.weight"])
            adapter.lora_B.weight.copy_(tensors[f"{PREFIX}{name}.lora_B.weight"])
    return model
