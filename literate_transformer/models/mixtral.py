r"""Mixtral: Mistral with a sparse mixture of experts in place of each layer's feed-forward network.

Mixtral 8x7B (Jiang et al., 2024, "Mixtral of Experts", arXiv:2401.04088,
§2) has Mistral 7B's architecture (:mod:`~literate_transformer.models.mistral`)
with one difference: each layer holds :math:`n` feed-forward networks, the
*experts* (8), each a SwiGLU network as Llama's, and a *router*, a linear
layer :math:`W_g` (``gate``) that scores the experts for every token.  A
token goes through its :math:`k` best-scored experts only
(``num_experts_per_tok``, 2), and the layer's output is theirs, weighted by
a softmax over those :math:`k` scores,

.. math::

    y = \sum_{i \in \operatorname{TopK}(x W_g)} G(x)_i\, \operatorname{SwiGLU}_i(x), \qquad
    G(x) = \operatorname{softmax}\big(\operatorname{TopK}(x W_g)\big) .

So the model *holds* :math:`n` experts' parameters, but a token *uses*
:math:`k` of them: per token, a layer computes :math:`k` feed-forward
networks, while what the layers can store grows with :math:`n` (the
paper's abstract: each token has access to 47B parameters and uses 13B).
``transformers`` takes the softmax over all :math:`n` scores, in float32,
keeps the :math:`k` largest and divides them by their sum, which is the same
:math:`G` (:meth:`MixtralSparseMoeBlock.route`).  Attention, norms and
positions are Mistral's, its sliding window included (``None`` in Mixtral
8x7B's config: the paper's context is "fully dense").

A router may send most tokens to a few experts, which then do the work of
all while the others learn nothing.  ``transformers`` computes an auxiliary
*load-balancing* loss "as in Switch Transformer" (its comment: Fedus et al.,
2021, equations (4) to (6)), :math:`n \sum_e f_e P_e`, with :math:`f_e` the
share of tokens that have expert :math:`e` among their :math:`k` and
:math:`P_e` its mean router probability (:func:`load_balancing_loss_func`):
with ``output_router_logits``, the output carries every layer's
``router_logits`` and that ``aux_loss``, and with ``labels``, ``loss`` adds
``router_aux_loss_coef`` times it.

The experts' weights are kept as ``transformers`` 5 keeps them, stacked
(``mlp.experts.gate_up_proj``, :math:`n \times 2F \times E`: each expert's
gate rows, then its up rows; ``mlp.experts.down_proj``,
:math:`n \times E \times F`), so they load by name.  ``transformers`` 4 kept
one ``nn.Linear`` per expert and matrix (``block_sparse_moe.experts.0.w1``),
which :func:`~literate_transformer.models.registry.from_hf` refuses, naming the
tensors.

A token's output is its two experts' alone: change every expert it did not
choose, and it does not move.

>>> import torch
>>> from transformers import MixtralConfig
>>> config = MixtralConfig(hidden_size=24, intermediate_size=40, num_local_experts=4, num_experts_per_tok=2)
>>> moe = MixtralSparseMoeBlock(config)
>>> token = torch.randn(1, 1, 24)
>>> _, weights, chosen = moe.route(token.view(1, 24))
>>> chosen.shape, bool(torch.isclose(weights.sum(), torch.tensor(1.0)))   # 2 experts of 4; weights sum to 1
(torch.Size([1, 2]), True)
>>> before = moe(token)
>>> others = [expert for expert in range(4) if expert not in chosen[0]]
>>> with torch.no_grad():
...     moe.experts.down_proj[others] = 1e3
>>> torch.equal(moe(token), before)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.activations import get_activation
from ..core.outputs import ModelOutput
from .llama import LlamaDecoderLayer
from .mistral import MistralForCausalLM, MistralModel
from .registry import register

__all__ = [
    "MixtralExperts",
    "MixtralSparseMoeBlock",
    "MixtralDecoderLayer",
    "MixtralModel",
    "MixtralForCausalLM",
    "load_balancing_loss_func",
]


class MixtralExperts(nn.Module):
    """The ``n`` experts of a layer, each a SwiGLU network, their matrices stacked as ``transformers`` 5 stacks them.

    Args:
        config: The Mixtral config.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        experts, hidden, intermediate = config.num_local_experts, config.hidden_size, config.intermediate_size
        # Drawn as transformers draws them: a normal of standard deviation initializer_range.
        std = config.initializer_range
        #: Each expert's ``gate_proj`` and ``up_proj`` weights, one above the other: ``(n, 2F, E)``.
        self.gate_up_proj = nn.Parameter(std * torch.randn(experts, 2 * intermediate, hidden))
        #: Each expert's ``down_proj`` weight: ``(n, E, F)``.
        self.down_proj = nn.Parameter(std * torch.randn(experts, hidden, intermediate))
        self.act_fn = get_activation(config.hidden_act)

    def expert(self, index: int, tokens: Tensor) -> Tensor:
        """Expert ``index`` on the tokens sent to it, one row each: Llama's SwiGLU network with this expert's weights."""
        gate, up = self.gate_up_proj[index].chunk(2)
        # (act(x W_gate) * x W_up) W_down, each weight applied as its nn.Linear would apply it.
        return F.linear(self.act_fn(F.linear(tokens, gate)) * F.linear(tokens, up), self.down_proj[index])


class MixtralSparseMoeBlock(nn.Module):
    """The mixture: the router (``gate``) chooses ``k`` experts per token, whose outputs are summed with its weights.

    Args:
        config: The Mixtral config.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.top_k = config.num_experts_per_tok
        #: In training only, each input feature is multiplied by a factor drawn in [1 - noise, 1 + noise].
        self.jitter_noise = getattr(config, "router_jitter_noise", 0.0)
        #: The router, a score per expert for every token (``E -> n``, without bias).
        self.gate = nn.Linear(config.hidden_size, config.num_local_experts, bias=False)
        self.experts = MixtralExperts(config)

    def route(self, tokens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The router's scores of every token, the weights of its ``k`` chosen experts, and which they are.

        Args:
            tokens: One row per token, ``(B T, E)``.

        Returns:
            ``(router_logits, weights, chosen)``: ``(B T, n)``, ``(B T, k)`` in float32 summing to 1, ``(B T, k)``.
        """
        router_logits = self.gate(tokens)
        # Kept for the stack, which reports every layer's with output_router_logits (and the loss that balances
        # the experts' loads trains the router through them).
        self.router_logits = router_logits
        # A distribution over the experts, in float32 however the model runs.
        probabilities = F.softmax(router_logits.float(), dim=-1)
        weights, chosen = torch.topk(probabilities, self.top_k, dim=-1)
        # The k kept probabilities renormalised: the softmax over the k chosen scores alone.
        return router_logits, weights / weights.sum(dim=-1, keepdim=True), chosen

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``: every token through its ``k`` experts, their outputs weighted and summed."""
        if self.training and self.jitter_noise > 0:
            noise = torch.empty_like(hidden_states).uniform_(1.0 - self.jitter_noise, 1.0 + self.jitter_noise)
            hidden_states = hidden_states * noise
        # The positions do not matter to an expert: one row per token of the batch.
        tokens = hidden_states.reshape(-1, hidden_states.shape[-1])
        _, weights, chosen = self.route(tokens)
        output = torch.zeros_like(tokens)
        for expert in range(self.experts.gate_up_proj.shape[0]):
            # The tokens that chose this expert, and in which of their k places.
            token_index, place = torch.where(chosen == expert)
            # Each token's share of this expert's output, added to its row (no token: an empty batch, nothing added).
            expert_output = self.experts.expert(expert, tokens[token_index]) * weights[token_index, place, None]
            output.index_add_(0, token_index, expert_output.to(output.dtype))
        return output.view_as(hidden_states)


class MixtralDecoderLayer(LlamaDecoderLayer):
    """Llama's (Mistral's) layer, its feed-forward network (``mlp``) the mixture of experts.

    Args:
        config: The Mixtral config.
        layer_idx: The layer's index.
    """

    mlp_class = MixtralSparseMoeBlock


def load_balancing_loss_func(
    router_logits: Sequence[Tensor], num_experts: int, top_k: int, attention_mask: Tensor | None = None
) -> Tensor:
    r""":math:`n \sum_e f_e P_e` over every layer's routing, as ``transformers``' ``load_balancing_loss_func``.

    :math:`f_e` is the number of times expert :math:`e` is among a token's
    :math:`k` choices, per token, and :math:`P_e` the router's mean
    probability for it, both over the real tokens of every layer.  A router
    that spreads the tokens evenly scores :math:`k`.

    Args:
        router_logits: One ``(B T, n)`` tensor per layer.
        num_experts: ``n``.
        top_k: ``k``.
        attention_mask: ``(B, T)``, 0 at padding, which is left out; ``None``: every token counts.
    """
    probabilities = torch.cat([F.softmax(logits.float(), dim=-1) for logits in router_logits])
    # 1 where the expert is among the token's k choices.
    choices = F.one_hot(torch.topk(probabilities, top_k, dim=-1).indices, num_experts).sum(dim=1).float()
    # 1 for a real token, 0 for padding: a column, the same tokens in every layer.
    mask = router_logits[0].new_ones(len(router_logits[0])) if attention_mask is None else attention_mask
    real = mask.reshape(-1, 1).float().repeat(len(router_logits), 1)
    f, p = (choices * real).sum(0) / real.sum(), (probabilities * real).sum(0) / real.sum()
    return num_experts * (f * p).sum()


class MixtralModel(MistralModel):
    """Mistral's stack with Mixtral's layers, which reports every layer's router scores when asked.

    Args:
        config: A ``transformers`` ``MixtralConfig``.
    """

    hf_name = "Mixtral"
    config_type, config_name = "mixtral", "MixtralConfig"
    config_positive = ("num_local_experts", "num_experts_per_tok")
    layer_class = MixtralDecoderLayer

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """Mistral's, and at most as many experts per token as there are (a token chooses among the layer's)."""
        super().check_own_config(config)
        if config.num_experts_per_tok > config.num_local_experts:
            raise ValueError(
                f"MixtralConfig.num_experts_per_tok ({config.num_experts_per_tok}) must be at most "
                f"num_local_experts ({config.num_local_experts})"
            )

    def forward(self, *args: Any, output_router_logits: bool | None = None, **kwargs: Any) -> ModelOutput:
        """Llama's forward, with its arguments; with ``output_router_logits`` (the config's when ``None``),
        ``router_logits`` too: every layer's router scores, ``(B T, n)`` each."""
        output = super().forward(*args, **kwargs)
        if self.config.output_router_logits if output_router_logits is None else output_router_logits:
            output.router_logits = tuple(layer.mlp.router_logits for layer in self.layers)
        return output


class MixtralForCausalLM(MistralForCausalLM):
    """Mixtral with its language-model head; with ``output_router_logits``, the load-balancing loss too.

    Args:
        config: A ``transformers`` ``MixtralConfig``.
    """

    model_class = MixtralModel

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *args: Any,
        labels: Tensor | None = None,
        output_router_logits: bool | None = None,
        **kwargs: Any,
    ) -> ModelOutput:
        """Llama's forward, with its arguments; with ``output_router_logits`` (the config's when ``None``),
        ``router_logits`` and ``aux_loss`` (:func:`load_balancing_loss_func`), which ``loss`` adds
        ``router_aux_loss_coef`` times."""
        output = super().forward(input_ids, attention_mask, *args, labels=labels, **kwargs)
        output.router_logits = None  # the stack reported them as the config says; this call decides
        if self.config.output_router_logits if output_router_logits is None else output_router_logits:
            config = self.config
            output.router_logits = tuple(layer.mlp.router_logits for layer in self.model.layers)
            # The mask's last T columns: this call's tokens, the ones the routers saw (a cache holds the others).
            mask = None if attention_mask is None else attention_mask[:, -input_ids.shape[1] :]
            output.aux_loss = load_balancing_loss_func(
                output.router_logits, config.num_local_experts, config.num_experts_per_tok, mask
            )
            if labels is not None:
                output.loss = output.loss + config.router_aux_loss_coef * output.aux_loss
        return output


register(MixtralModel, MixtralForCausalLM)


#: The checks of a Mixtral config, by the name they had before they were declared (:class:`MixtralModel`).
check_mixtral_config = MixtralModel.check_config
