r"""Beyond one device: BERT's attention and feed-forward layers split across processes, as Megatron-LM splits them.

A layer too large (or too slow) for one device can be cut into pieces, one
per device, such that each piece computes part of the answer and one
collective operation puts the parts together.  Megatron-LM (Shoeybi et al.,
2019, "Megatron-LM: Training Multi-Billion Parameter Language Models Using
Model Parallelism", arXiv:1909.08053, section 3 and figure 3) cuts every
transformer block with two kinds of linear layer:

**Column-parallel.**  :math:`Y = XA` with :math:`A` split by *columns*,
:math:`A = [A_1, A_2]`, gives :math:`Y = [XA_1, XA_2]`: each process computes
its own columns of the output from the whole input, with no communication.

**Row-parallel.**  :math:`Z = YB` with :math:`B` split by *rows* and its
input split by columns to match, :math:`Y = [Y_1, Y_2]`,
:math:`B = \begin{bmatrix} B_1 \\ B_2 \end{bmatrix}`, gives
:math:`Z = Y_1 B_1 + Y_2 B_2`: each process computes a *partial sum* of the
whole output, and one **all-reduce** (every process ends with the sum of all
processes' tensors) completes it.

A column-parallel layer followed by a row-parallel one needs nothing between
them when what sits between acts on each column alone:

* **Multi-head attention.**  The query, key and value projections are
  column-parallel: process :math:`r` of :math:`P` keeps the rows of ``query``,
  ``key`` and ``value`` of *its* heads, ``H / P`` of them, and attends with
  them alone (heads never look at each other).  The output projection
  :math:`W^O` is row-parallel: its columns that read those heads.
* **The feed-forward layer.**  ``intermediate.dense`` is column-parallel
  (each process keeps ``F / P`` of the hidden units; GELU acts on each unit
  alone) and ``output.dense`` is row-parallel.

So each block costs **one all-reduce** in the forward pass, of a
``(B, T, E)`` tensor.  What is not split is replicated: the output biases
(added once, after the sum), the residual and the layer norm (cheap, and
identical on every process).

:class:`ParallelBertAttention` and :class:`ParallelBertFeedForward` build a
process's piece from BERT's own modules (:func:`shard_attention`,
:func:`shard_feed_forward`); communication is PyTorch's own
:mod:`torch.distributed` (:func:`torch.distributed.all_reduce`), which runs
across processes, devices and machines alike (``gloo`` on CPUs, ``nccl`` on
NVIDIA GPUs).  :func:`run_in_processes` starts the processes on this
machine, the way a reader can try it on a laptop; chapter 16 runs two of
them and proves each layer equal to the one-process layer.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.kernels import fused_attention
from ..core.residual import add_and_norm
from ..models.bert import BertAttention, BertLayer

__all__ = [
    "ColumnParallelLinear",
    "RowParallelLinear",
    "ParallelBertAttention",
    "ParallelBertFeedForward",
    "shard_attention",
    "shard_feed_forward",
    "run_in_processes",
    "split_bert_layer",
]


def _check_split(size: int, world_size: int, what: str) -> int:
    if not isinstance(world_size, int) or world_size < 1 or size % world_size:
        raise ValueError(f"world_size must be a positive int dividing the {what} ({size}), got {world_size!r}")
    return size // world_size


class ColumnParallelLinear(nn.Module):
    """Process ``rank``'s columns of :math:`XA + b`: the rows ``rows`` of a linear layer's weight and bias.

    Args:
        linear: The whole layer (``out x in`` weight).
        rows: The output features this process keeps.
    """

    def __init__(self, linear: nn.Linear, rows: slice) -> None:
        super().__init__()
        self.weight = nn.Parameter(linear.weight.detach()[rows].clone())
        self.bias = nn.Parameter(linear.bias.detach()[rows].clone())

    def forward(self, hidden_states: Tensor) -> Tensor:
        """The whole input in, this process's output features out; no communication."""
        return F.linear(hidden_states, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """Process ``rank``'s rows of :math:`YB`: a partial sum, completed by one all-reduce, then the bias.

    Args:
        linear: The whole layer (``out x in`` weight).
        columns: The input features this process reads (the column-parallel layer's output features).
    """

    def __init__(self, linear: nn.Linear, columns: slice) -> None:
        super().__init__()
        self.weight = nn.Parameter(linear.weight.detach()[:, columns].clone())
        # Replicated: added once, after the sum (added on every process before it, it would count P times).
        self.bias = nn.Parameter(linear.bias.detach().clone())

    def partial(self, hidden_states: Tensor) -> Tensor:
        """This process's term :math:`Y_r B_r` of the sum."""
        return F.linear(hidden_states, self.weight)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """This process's input features in, the whole output out (the same on every process)."""
        output = self.partial(hidden_states)
        # Sum the partial products of every process, in place: each ends with Y_1 B_1 + ... + Y_P B_P.
        dist.all_reduce(output, op=dist.ReduceOp.SUM)
        return output + self.bias


class ParallelBertAttention(nn.Module):
    """One process's heads of :class:`~literate_transformer.models.bert.BertAttention` (self-attention).

    Build it with :func:`shard_attention`.

    Args:
        attention: The whole sub-layer.
        rank: This process's index, ``0 .. world_size - 1``.
        world_size: The number of processes ``P``; it must divide the number of heads.
    """

    def __init__(self, attention: BertAttention, rank: int, world_size: int) -> None:
        super().__init__()
        self_attention = attention.self
        self.num_attention_heads = _check_split(self_attention.num_attention_heads, world_size, "number of heads")
        self.attention_head_size = self_attention.attention_head_size
        # Process r keeps heads r*H/P ... (r+1)*H/P - 1: rows of Q, K, V, columns of W^O.
        width = self.num_attention_heads * self.attention_head_size
        features = slice(rank * width, (rank + 1) * width)
        self.query = ColumnParallelLinear(self_attention.query, features)
        self.key = ColumnParallelLinear(self_attention.key, features)
        self.value = ColumnParallelLinear(self_attention.value, features)
        self.dense = RowParallelLinear(attention.output.dense, features)
        self.LayerNorm = attention.output.LayerNorm

    def split_heads(self, x: Tensor) -> Tensor:
        """``(B, T, E / P) -> (B, H / P, T, D)``: this process's heads."""
        batch_size, length, _ = x.shape
        return x.view(batch_size, length, self.num_attention_heads, self.attention_head_size).transpose(1, 2)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """The whole sub-layer's output, ``(B, T, E) -> (B, T, E)``, on every process.

        Args:
            hidden_states: ``(B, T, E)``, the same on every process.
            attention_mask: As :meth:`BertSelfAttention.forward <literate_transformer.models.bert.BertSelfAttention.forward>`
                takes it (additive or boolean).
        """
        batch_size, length, _ = hidden_states.shape
        # 1) Column-parallel: this process's heads' queries, keys and values, from the whole input.
        query = self.split_heads(self.query(hidden_states))
        key = self.split_heads(self.key(hidden_states))
        value = self.split_heads(self.value(hidden_states))
        # 2) Attention in each of those heads: no head needs another's numbers.
        context = fused_attention(query, key, value, attention_mask)
        context = context.transpose(1, 2).reshape(batch_size, length, -1)
        # 3) Row-parallel W^O: partial sums, one all-reduce, the bias once.
        projected = self.dense(context)  # (B, T, E)
        # 4) Residual and layer norm, replicated (the same numbers on every process).
        return add_and_norm(hidden_states, projected, self.LayerNorm, norm_first=False)


class ParallelBertFeedForward(nn.Module):
    """One process's hidden units of BERT's feed-forward sub-layer (``intermediate`` and ``output``).

    Build it with :func:`shard_feed_forward`.

    Args:
        layer: The whole :class:`~literate_transformer.models.bert.BertLayer`.
        rank: This process's index.
        world_size: The number of processes; it must divide ``intermediate_size``.
    """

    def __init__(self, layer: BertLayer, rank: int, world_size: int) -> None:
        super().__init__()
        width = _check_split(layer.intermediate.dense.out_features, world_size, "intermediate size")
        units = slice(rank * width, (rank + 1) * width)
        self.intermediate = ColumnParallelLinear(layer.intermediate.dense, units)
        self.intermediate_act_fn = layer.intermediate.intermediate_act_fn
        self.output = RowParallelLinear(layer.output.dense, units)
        self.LayerNorm = layer.output.LayerNorm

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``, the same on every process."""
        # 1) Column-parallel: F / P hidden units, and GELU on each of them alone.
        units = self.intermediate_act_fn(self.intermediate(hidden_states))
        # 2) Row-parallel: partial sums, one all-reduce, the bias once; then residual and layer norm.
        return add_and_norm(hidden_states, self.output(units), self.LayerNorm, norm_first=False)


def shard_attention(attention: BertAttention, rank: int, world_size: int) -> ParallelBertAttention:
    """Process ``rank``'s piece of a self-attention sub-layer (copies of its weights)."""
    if attention.self.is_cross_attention:
        raise ValueError("attention must be a self-attention sub-layer (cross-attention is not split here)")
    return ParallelBertAttention(attention, rank, world_size).eval()


def shard_feed_forward(layer: BertLayer, rank: int, world_size: int) -> ParallelBertFeedForward:
    """Process ``rank``'s piece of a layer's feed-forward sub-layer (copies of its weights)."""
    return ParallelBertFeedForward(layer, rank, world_size).eval()


def _process(rank: int, world_size: int, store: str, function: Callable[..., Any], args: tuple, results: str) -> None:
    """One process: join the group, run ``function(rank, world_size, *args)``, save what it returned."""
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    try:
        torch.set_num_threads(1)
        torch.save(function(rank, world_size, *args), Path(results) / f"{rank}.pt")
    finally:
        dist.destroy_process_group()


def run_in_processes(function: Callable[..., Any], world_size: int = 2, *args: Any) -> list[Any]:
    """Run ``function(rank, world_size, *args)`` in ``world_size`` new processes joined by :mod:`torch.distributed`.

    The processes are started with :func:`torch.multiprocessing.spawn` and
    meet through a file (``gloo``, the CPU backend): the way to try tensor
    parallelism on one machine.  On a cluster the same ``function`` runs
    under ``torchrun``, one process per GPU, with the ``nccl`` backend.

    Args:
        function: A module-level function (the new processes import it by name).
        world_size: How many processes.
        *args: Passed to ``function`` after ``rank`` and ``world_size``.

    Returns:
        What each process's ``function`` returned, by rank.
    """
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as folder:
        store = os.path.join(folder, "store")
        mp.spawn(_process, args=(world_size, store, function, args, folder), nprocs=world_size, join=True)
        return [torch.load(Path(folder) / f"{rank}.pt", weights_only=False) for rank in range(world_size)]


def split_bert_layer(
    rank: int, world_size: int, layer: BertLayer, hidden_states: Tensor, attention_mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """One process's run of a BERT layer split ``world_size`` ways: what chapter 16 runs in each process.

    Each process keeps its heads and its hidden units of ``layer`` (a copy of
    the whole layer reaches every process; on a cluster each would load only
    its piece), runs the attention sub-layer, then the feed-forward sub-layer
    on its output.

    Args:
        rank: This process's index.
        world_size: The number of processes.
        layer: The whole :class:`~literate_transformer.models.bert.BertLayer`.
        hidden_states: ``(B, T, E)``, the layer's input (the same on every process).
        attention_mask: The additive mask :class:`~literate_transformer.models.bert.BertModel` builds, or ``None``.

    Returns:
        ``(attention output, feed-forward output)``, each ``(B, T, E)`` and the same on every process.
    """
    attention = shard_attention(layer.attention, rank, world_size)
    feed_forward = shard_feed_forward(layer, rank, world_size)
    with torch.inference_mode():
        attention_output = attention(hidden_states, attention_mask)  # (B, T, E)
        return attention_output, feed_forward(attention_output)
