r"""Chapter 13's figures: what three encoder families change, drawn from the package's own tensors.

* :func:`parameter_groups` and :func:`plot_parameter_budget` split a model's parameters by where they sit
  (token table, the projection ALBERT adds, the other embeddings, the layers, the pooler) and stack them, one
  bar a model: BERT-base against ALBERT-base shows both of ALBERT's cuts, a narrow token table
  (:math:`V W + W E` instead of :math:`V E`) and one layer's weights shared by all twelve calls;
* :func:`disentangled_terms` and :func:`plot_disentangled_attention` take DeBERTa's scores apart: content to
  content, content to position and position to content, each a :math:`T \times T` matrix computed by the
  package's :class:`~literate_transformer.models.deberta_v2.DisentangledSelfAttention`, beside the bucketed
  distance each pair reads;
* :func:`token_losses` and :func:`plot_replaced_token_detection` show where each objective learns: masked
  language modelling scores the few positions it masked, ELECTRA's replaced-token detection every token.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from torch import Tensor, nn

from ..core.validation import check_tensor
from ..models.deberta_v2 import DebertaV2Model
from ..parts.heads import split_heads

__all__ = [
    "GROUPS",
    "parameter_groups",
    "plot_parameter_budget",
    "disentangled_terms",
    "plot_disentangled_attention",
    "token_losses",
    "plot_replaced_token_detection",
]

#: Where a parameter sits, in the order the bars stack them (bottom first).
GROUPS: tuple[str, ...] = ("token table", "embedding projection", "positions, segments, norm", "layers", "pooler")
_GROUP_COLOURS = ("#4c72b0", "#8fb3de", "#c6d6ea", "#dd8452", "#8c8c8c")
# The projection from the token table's width to the layers' (ALBERT's name, ELECTRA's name).
_PROJECTIONS = ("embedding_hidden_mapping_in", "embeddings_project")


def _group_of(name: str) -> str:
    if "word_embeddings" in name:
        return "token table"
    if any(projection in name for projection in _PROJECTIONS):
        return "embedding projection"
    if name.startswith("embeddings."):
        return "positions, segments, norm"
    if name.startswith("pooler"):
        return "pooler"
    return "layers"


def _check_model(model: object, name: str) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module, got {type(model).__name__}")
    return model


def _layer_calls(model: nn.Module) -> tuple[int, int]:
    """How many layers the model runs, and how many distinct layers (ALBERT's are one, run again and again)."""
    if hasattr(model, "layers"):
        layers = list(model.layers())
    else:
        layers = list(getattr(getattr(model, "encoder", None), "layer", []))
    return len(layers), len({id(layer) for layer in layers})


def parameter_groups(model: nn.Module) -> dict[str, int]:
    """The model's parameters counted by where they sit (:data:`GROUPS`), a tensor shared by two modules once.

    The names are HuggingFace's: ``embeddings.word_embeddings`` is the token table, ALBERT's
    ``encoder.embedding_hidden_mapping_in`` (ELECTRA's ``embeddings_project``) the projection to the layers'
    width, the rest of ``embeddings`` the positions, segments and norm, ``pooler`` the pooler, and everything
    else the layers.  Works on the ``meta`` device (shapes only).

    Raises:
        TypeError: if ``model`` is not a ``torch.nn.Module``.
    """
    model = _check_model(model, "model")
    counts = dict.fromkeys(GROUPS, 0)
    for name, parameter in model.named_parameters():
        counts[_group_of(name)] += parameter.numel()
    return counts


def plot_parameter_budget(models: Mapping[str, nn.Module]) -> Figure:
    r"""One stacked bar a model: its parameters by where they sit, in millions, with the total on top.

    Drawn for BERT-base and ALBERT-base, it shows ALBERT's two cuts: the token table, :math:`V E` in BERT,
    becomes :math:`V W` plus a :math:`W E` projection (each written on its segment, from the tensors'
    shapes), and twelve layers' weights become one layer's, run twelve times (written on the layers' segment).

    Args:
        models: ``{label: model}``, two or more, in the order of the bars (built on the ``meta`` device is
            enough).

    Returns:
        A matplotlib ``Figure`` (not registered with ``pyplot``): one axes, one bar container per group of
        :data:`GROUPS`, each with one bar per model, its heights the counts in millions.

    Raises:
        TypeError: if ``models`` is not a mapping of labels to modules.
        ValueError: if it holds fewer than two models.
    """
    if not isinstance(models, Mapping):
        raise TypeError(f"models must be a mapping of labels to models, got {type(models).__name__}")
    if len(models) < 2:
        raise ValueError(f"models must hold two or more models to compare, got {len(models)}")
    for label, model in models.items():
        if not isinstance(label, str):
            raise TypeError(f"models' labels must be strings, got {label!r}")
        _check_model(model, f"models[{label!r}]")
    counts = {label: parameter_groups(model) for label, model in models.items()}
    figure = Figure(figsize=(7.0, 4.6), layout="constrained")
    ax = figure.add_subplot()
    labels = list(models)
    bottoms = [0.0] * len(labels)
    outside: dict[int, list[tuple[float, float, str]]] = {index: [] for index in range(len(labels))}
    for group, colour in zip(GROUPS, _GROUP_COLOURS, strict=True):
        heights = [counts[label][group] / 1e6 for label in labels]
        bars = ax.bar(labels, heights, bottom=bottoms, color=colour, width=0.55, label=group, edgecolor="white")
        for index, (bar, label) in enumerate(zip(bars, labels, strict=True)):
            note = _segment_note(models[label], group, counts[label][group])
            middle = bottoms[index] + heights[index] / 2
            if note and heights[index] > 6:
                ax.text(
                    bar.get_x() + bar.get_width() / 2,
                    middle,
                    note,
                    ha="center",
                    va="center",
                    fontsize=8.5,
                    color="white",
                )
            elif note:
                outside[index].append((bar.get_x() + bar.get_width(), middle, note))
        bottoms = [bottom + height for bottom, height in zip(bottoms, heights, strict=True)]
    # The notes of thin segments to the right of their bar, one above the other, each with a leader line.
    gap = 0.045 * max(bottoms)
    for notes in outside.values():
        floor = -math.inf
        for edge, middle, note in notes:
            floor = max(middle, floor + gap)
            ax.annotate(
                note,
                (edge, middle),
                xytext=(edge + 0.06, floor),
                va="center",
                fontsize=8,
                arrowprops={"arrowstyle": "-", "color": "#777777", "linewidth": 0.6},
            )
    for index, total in enumerate(bottoms):
        ax.text(index, total, f"{total:.1f}M", ha="center", va="bottom", fontsize=9, weight="bold")
    ax.set_ylim(0, max(bottoms) * 1.1)
    ax.set_ylabel("parameters (millions)")
    ax.set_xlabel("model (built on the meta device from its released configuration)")
    ax.set_title("Where the parameters sit: ALBERT's narrow token table and shared layers")
    handles, names = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], names[::-1], fontsize=8, loc="upper right", frameon=False)
    return figure


def _segment_note(model: nn.Module, group: str, count: int) -> str:
    """What a segment is made of: the token table's and projection's shapes, the layers' calls."""
    if not count:
        return ""
    if group in ("token table", "embedding projection"):
        weights = [
            parameter
            for name, parameter in model.named_parameters()
            if _group_of(name) == group and parameter.dim() == 2
        ]
        # A table's weight is (rows, width); a linear layer's is (out, in), written in × out like the table.
        shapes = [weight.shape if group == "token table" else weight.shape[::-1] for weight in weights]
        return " + ".join(f"{rows:,}×{columns:,}" for rows, columns in shapes)
    if group == "layers":
        calls, distinct = _layer_calls(model)
        if calls and distinct == 1:
            return f"1 layer, run {calls} times"
        return f"{distinct} layers" if distinct else ""
    return ""


def disentangled_terms(model: DebertaV2Model, input_ids: Tensor, layer: int = 0, head: int = 0) -> dict[str, Tensor]:
    r"""DeBERTa's three score terms for one sequence, one head, each ``(T, T)``, already divided by the scale.

    Computed by the layer's own :class:`~literate_transformer.models.deberta_v2.DisentangledSelfAttention`:
    the content term is :math:`Q^c K^{c\top} / \sqrt{3D}` of its projections, and each position term is its
    :meth:`~literate_transformer.models.deberta_v2.DisentangledSelfAttention.disentangled_attention_bias` run
    with that term alone (``pos_att_type`` set to it for the call, and restored).  The three add up to the
    scores the layer's softmax reads.

    Args:
        model: A :class:`~literate_transformer.models.deberta_v2.DebertaV2Model` with relative attention and
            both position terms (``pos_att_type`` ``["p2c", "c2p"]``).
        input_ids: ``(1, T)`` or ``(T,)`` token ids.
        layer: The layer whose attention is taken apart (its input is the previous layer's output).
        head: The head.

    Returns:
        ``{"content → content", "content → position", "position → content", "scores", "bucket"}``: the three
        terms, their sum as the layer computes it, and the bucketed distance :math:`i - j` of every pair.

    Raises:
        TypeError: if ``model`` is not a ``DebertaV2Model`` or ``input_ids`` not an integer tensor.
        ValueError: if the model has no relative attention or not both position terms, or ``layer``, ``head``
            or the shape of ``input_ids`` is out of range.
    """
    if not isinstance(model, DebertaV2Model):
        raise TypeError(f"model must be the package's DebertaV2Model, got {type(model).__name__}")
    attention_of = [block.attention.self for block in model.layers()]
    if not isinstance(layer, int) or not 0 <= layer < len(attention_of):
        raise ValueError(f"layer must be an int in [0, {len(attention_of) - 1}], got {layer!r}")
    attention = attention_of[layer]
    if not attention.relative_attention or sorted(attention.pos_att_type) != ["c2p", "p2c"]:
        raise ValueError("model must have relative attention with both position terms (pos_att_type c2p and p2c)")
    if not isinstance(head, int) or not 0 <= head < attention.num_attention_heads:
        raise ValueError(f"head must be an int in [0, {attention.num_attention_heads - 1}], got {head!r}")
    input_ids = check_tensor(input_ids, "input_ids", dtypes=("int",))
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"input_ids must be one sequence, (T,) or (1, T), got shape {tuple(input_ids.shape)}")
    length = input_ids.shape[1]
    with torch.no_grad():
        hidden = model(input_ids, output_hidden_states=True).hidden_states[layer]  # shape (1, T, E)
        heads = attention.num_attention_heads
        query = split_heads(attention.query_proj(hidden), heads)  # shape (1, H, T, D)
        key = split_heads(attention.key_proj(hidden), heads)  # shape (1, H, T, D)
        scale = math.sqrt(attention.attention_head_size * (1 + len(attention.pos_att_type)))
        relative_pos = model.encoder.get_rel_pos(length, input_ids.device)  # shape (T, T)
        table = model.encoder.get_rel_embedding()  # shape (2k, E)
        terms = {"content → content": (query @ key.transpose(-1, -2) / scale)[0, head]}
        both = attention.pos_att_type
        try:
            for name, term in (("content → position", "c2p"), ("position → content", "p2c")):
                attention.pos_att_type = [term]
                terms[name] = attention.disentangled_attention_bias(query, key, relative_pos, table, scale)[0, head]
        finally:
            attention.pos_att_type = both
        bias = attention.disentangled_attention_bias(query, key, relative_pos, table, scale)[0, head]
    terms["scores"] = terms["content → content"] + bias
    terms["bucket"] = relative_pos
    return terms


def plot_disentangled_attention(
    model: DebertaV2Model, input_ids: Tensor, tokens: Sequence[str], layer: int = 0, head: int = 0
) -> Figure:
    r"""DeBERTa's three score terms as heatmaps on one colour scale, beside the bucket each pair reads.

    Content to content is BERT's score.  Content to position, :math:`Q^c_i \cdot K^r_{\delta(i,j)}`, depends on
    the query and the *distance* only, so along a row it takes one value per bucket: near keys (each distance
    its own bucket) differ, far keys that share a bucket get one colour.  Position to content (the paper's
    :math:`K^c_j \cdot Q^r_{\delta(j,i)}`, which the code indexes by the bucket of :math:`i - j`) depends on the
    key and the distance: the same holds down each column.
    The fourth panel writes the bucket of :math:`i - j` in each cell.

    Args:
        model: The model, as for :func:`disentangled_terms`.
        input_ids: The ids, as for :func:`disentangled_terms`.
        layer: The layer, as for :func:`disentangled_terms`.
        head: The head, as for :func:`disentangled_terms`.
        tokens: The ``T`` tokens' labels.

    Returns:
        A matplotlib ``Figure`` (not registered with ``pyplot``): four axes, each with one image whose array is
        the matrix drawn (the three terms, then the buckets).

    Raises:
        TypeError, ValueError: as :func:`disentangled_terms`; ValueError also if ``tokens`` does not hold ``T``
            strings.
    """
    terms = disentangled_terms(model, input_ids, layer, head)
    length = terms["bucket"].shape[0]
    if (
        isinstance(tokens, str)
        or not isinstance(tokens, Sequence)
        or len(tokens) != length
        or not all(isinstance(token, str) for token in tokens)
    ):
        raise ValueError(f"tokens must hold {length} strings, one per token, got {tokens!r}")
    names = ("content → content", "content → position", "position → content")
    limit = max(float(terms[name].abs().max()) for name in names)
    size = min(4.2, 1.2 + 0.26 * length)
    figure = Figure(figsize=(2 * size + 1.4, 2 * size + 0.6), layout="constrained")
    axes = list(figure.subplots(2, 2).flat)
    for ax, name in zip(axes, names, strict=False):
        image = ax.imshow(terms[name].numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit)
        ax.set_title(name, fontsize=10)
    figure.colorbar(image, ax=axes[:3], shrink=0.6, label="score (divided by √(3D))")
    buckets = terms["bucket"]
    most = int(buckets.abs().max())
    axes[3].imshow(buckets.numpy(), cmap="PuOr", vmin=-most, vmax=most)
    for i in range(length):
        for j in range(length):
            value = int(buckets[i, j])
            colour = "white" if abs(value) > 0.6 * most else "black"
            axes[3].text(j, i, str(value), ha="center", va="center", fontsize=7, color=colour)
    axes[3].set_title("bucket of the distance i − j (the row of P read)", fontsize=10)
    for ax in axes:
        ax.set_xticks(range(length), tokens, rotation=90, fontsize=7.5)
        ax.set_yticks(range(length), tokens, fontsize=7.5)
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
    figure.suptitle(f"DeBERTa's scores taken apart: layer {layer}, head {head} (random weights)")
    return figure


def _one_sequence(tensor: Tensor, name: str, dim: int) -> Tensor:
    """``tensor`` without a leading batch dimension of 1: ``dim`` dimensions."""
    if tensor.dim() == dim + 1 and tensor.shape[0] == 1:
        tensor = tensor[0]
    if tensor.dim() != dim:
        raise ValueError(
            f"{name} must be one sequence ({dim} dimensions, or a batch of one), got {tuple(tensor.shape)}"
        )
    return tensor


def token_losses(mlm_logits: Tensor, mlm_labels: Tensor, rtd_logits: Tensor, replaced: Tensor) -> tuple[Tensor, Tensor]:
    """Each objective's loss at each token of one sequence: ``(T,)`` each.

    Masked language modelling: the cross-entropy of the label at each masked position (``mlm_labels`` not
    ``-100``), 0 elsewhere; their mean over the masked positions is the masked-LM loss.  Replaced-token
    detection: the binary cross-entropy of "replaced" at every token; their mean is ELECTRA's loss.

    Args:
        mlm_logits: The masked LM's scores, ``(T, V)`` (or ``(1, T, V)``).
        mlm_labels: ``(T,)``: the original id where a token was masked, ``-100`` elsewhere.
        rtd_logits: The discriminator's replaced-token logits, ``(T,)``.
        replaced: ``(T,)``: 1 where the token was replaced, 0 where it is the original.

    Raises:
        TypeError: if an argument is not a tensor.
        ValueError: if the shapes do not describe one sequence of ``T`` tokens.
    """
    mlm_logits = _one_sequence(check_tensor(mlm_logits, "mlm_logits", dtypes=("float",)), "mlm_logits", 2)
    mlm_labels = _one_sequence(check_tensor(mlm_labels, "mlm_labels", dtypes=("int",)), "mlm_labels", 1)
    rtd_logits = _one_sequence(check_tensor(rtd_logits, "rtd_logits", dtypes=("float",)), "rtd_logits", 1)
    replaced = _one_sequence(check_tensor(replaced, "replaced", dtypes=("int", "bool")), "replaced", 1)
    length = mlm_logits.shape[0]
    if not mlm_labels.shape[0] == rtd_logits.shape[0] == replaced.shape[0] == length:
        raise ValueError(
            f"mlm_logits, mlm_labels, rtd_logits and replaced must describe the same {length} tokens, got "
            f"{tuple(mlm_labels.shape)}, {tuple(rtd_logits.shape)} and {tuple(replaced.shape)}"
        )
    mlm = F.cross_entropy(mlm_logits.float(), mlm_labels, ignore_index=-100, reduction="none")
    rtd = F.binary_cross_entropy_with_logits(rtd_logits.float(), replaced.float(), reduction="none")
    return mlm, rtd


def plot_replaced_token_detection(
    tokens: Sequence[str],
    corrupted_tokens: Sequence[str],
    mlm_logits: Tensor,
    mlm_labels: Tensor,
    rtd_logits: Tensor,
    replaced: Tensor,
) -> Figure:
    """Where each objective learns: the masked LM's loss at each token above, replaced-token detection's below.

    The masked LM (BERT's objective, ELECTRA's generator) has a loss term only where it masked a token: a
    bar there, nothing elsewhere.  The discriminator answers "replaced or original?" at every token, so every
    token has a bar: red where the generator's sample replaced the original, blue where the token is the
    original.  A replaced token is labelled ``original → sample``.

    Args:
        tokens: The original sequence's ``T`` tokens.
        corrupted_tokens: The ``T`` tokens the discriminator reads (the generator's samples at the masked
            positions).
        mlm_logits: As for :func:`token_losses`.
        mlm_labels: As for :func:`token_losses`.
        rtd_logits: As for :func:`token_losses`.
        replaced: As for :func:`token_losses`.

    Returns:
        A matplotlib ``Figure`` (not registered with ``pyplot``): two axes, each with one bar container of
        ``T`` bars whose heights are :func:`token_losses`' two tensors.

    Raises:
        TypeError, ValueError: as :func:`token_losses`; ValueError also if the token lists do not hold ``T``
            strings each.
    """
    mlm, rtd = token_losses(mlm_logits, mlm_labels, rtd_logits, replaced)
    length = mlm.shape[0]
    for name, values in (("tokens", tokens), ("corrupted_tokens", corrupted_tokens)):
        if isinstance(values, str) or not isinstance(values, Sequence) or len(values) != length:
            raise ValueError(f"{name} must hold {length} strings, one per token, got {values!r}")
    flags = _one_sequence(replaced, "replaced", 1).bool().tolist()
    masked = (_one_sequence(mlm_labels, "mlm_labels", 1) != -100).tolist()
    labels = [
        f"{original}\n→ {sample}" if flag else original
        for original, sample, flag in zip(tokens, corrupted_tokens, flags, strict=True)
    ]
    figure = Figure(figsize=(10.0, 5.2), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True)
    positions = range(length)
    top.bar(positions, mlm.tolist(), color=["#7b5ea7" if flag else "#cccccc" for flag in masked], width=0.6)
    for position, flag in enumerate(masked):
        if not flag:
            top.text(position, 0, "no loss", ha="center", va="bottom", fontsize=7.5, color="#777777", rotation=90)
    top.set_ylabel("cross-entropy")
    top.set_title(f"Masked language modelling: a loss at the {sum(masked)} masked positions of {length}", fontsize=10)
    colours = ["#c44e52" if flag else "#4c72b0" for flag in flags]
    bottom.bar(positions, rtd.tolist(), color=colours, width=0.6)
    bottom.set_ylabel("binary cross-entropy")
    bottom.set_title(f"Replaced-token detection: a loss at all {length} tokens", fontsize=10)
    bottom.set_xticks(list(positions), labels, fontsize=8)
    bottom.set_xlabel("token (original → the generator's sample where it was replaced)")
    bottom.set_ylim(0, 1.35 * float(rtd.max()))
    bottom.legend(
        handles=[Patch(color="#c44e52", label="replaced"), Patch(color="#4c72b0", label="original")],
        fontsize=8,
        loc="upper right",
        ncols=2,
        frameon=False,
    )
    figure.suptitle("Where each objective learns (small models, random weights)")
    return figure
