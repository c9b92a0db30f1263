"""Mixtral, Mistral with a sparse mixture of experts, equals transformers.MixtralForCausalLM.

Random Mixtrals: 4 experts of which each token takes 2, with grouped-query
attention and a sliding window shorter than the test's sequences; 3 experts
of which each token takes 1, with a key/value head per query head, no window
and a tied head.  Beyond what every decoder family proves
(``tests/families.py``): the routers' scores and the load-balancing loss
equal ``transformers``' (padding left out), the loss of ``labels=`` adds it
as ``transformers`` does, training's router jitter draws what
``transformers`` draws, and the routing is not vacuous (a token's output is
its chosen experts' alone, and the tokens spread over the experts).
``transformers`` 4 stores one ``nn.Linear`` per expert and matrix, which
the package does not read: the comparisons skip there, saying so, and a test
checks that such a checkpoint is refused, its tensors named.
"""

from __future__ import annotations

import families
import pytest
import torch
import transformers
from shapes import LLAMA_GROUPED, LLAMA_HEAD_OF_10
from transformers.models.mixtral import modeling_mixtral

from literate_transformer import from_hf
from literate_transformer.models.mixtral import MixtralForCausalLM, MixtralModel, check_mixtral_config

#: transformers 5 stores the experts stacked (``mlp.experts.gate_up_proj``), under the package's names; 4.x
#: one ``nn.Linear`` per expert and matrix (``block_sparse_moe.experts.0.w1``), which the package does not read.
HF_STACKS_EXPERTS = hasattr(modeling_mixtral, "MixtralExperts")
NEEDS_STACKED_EXPERTS = pytest.mark.skipif(
    not HF_STACKS_EXPERTS,
    reason=f"transformers {transformers.__version__} stores one nn.Linear per expert (block_sparse_moe.experts.N.w1), "
    "not transformers 5's stacked experts, which the package reads",
)

#: name: MixtralConfig fields.
SHAPES = {
    "4_experts_top_2_4_heads_2_kv_heads_window_3": dict(
        LLAMA_GROUPED, num_local_experts=4, num_experts_per_tok=2, sliding_window=3
    ),
    # The one-layer row of the Llama branch, without its head size of 10 (Mixtral's heads share E).
    "3_experts_top_1_3_heads_3_kv_heads_no_window_tied": dict(
        {key: value for key, value in LLAMA_HEAD_OF_10.items() if key != "head_dim"},
        num_attention_heads=3,
        num_key_value_heads=3,
        num_local_experts=3,
        num_experts_per_tok=1,
        sliding_window=None,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
    ),
}
NEEDS = dict.fromkeys(SHAPES, NEEDS_STACKED_EXPERTS)


models = families.hf_and_ours_fixture(transformers.MixtralConfig, transformers.MixtralForCausalLM, SHAPES, NEEDS)


def _padded_batch(config) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The families' right-padded batch, and its labels (padding ignored)."""
    input_ids, attention_mask = families.right_padded_batch(config.vocab_size)
    return input_ids, attention_mask, input_ids.masked_fill(attention_mask == 0, -100)


def test_from_hf_builds_mixtral_under_hfs_names(models):
    hf, ours = families.assert_from_hf_builds(models, MixtralForCausalLM)
    experts = ours.model.layers[0].mlp.experts
    n, f, e = hf.config.num_local_experts, hf.config.intermediate_size, hf.config.hidden_size
    assert experts.gate_up_proj.shape == (n, 2 * f, e) and experts.down_proj.shape == (n, e, f)
    assert all(layer.bias is None for layer in ours.modules() if isinstance(layer, torch.nn.Linear))


class TestGenerationCacheLossAndBadInputs(families.DecoderFamilyTests):
    """Mixtral's logits, ``generate()`` ids (greedy, sampled, beam), cache, loss and refusals, as every decoder's."""


@torch.no_grad()
def test_router_logits_aux_loss_and_loss_equal_hfs(models):
    hf, ours = models
    input_ids, attention_mask, labels = _padded_batch(hf.config)
    kwargs = dict(attention_mask=attention_mask, labels=labels, output_router_logits=True)
    expected, actual = hf(input_ids, **kwargs), ours(input_ids, **kwargs)
    # Every layer's scores, one row per token, at the real tokens (padding's rows are each side's business).
    real = attention_mask.bool().flatten()
    assert len(actual.router_logits) == len(expected.router_logits) == hf.config.num_hidden_layers
    for ours_layer, hf_layer in zip(actual.router_logits, expected.router_logits, strict=True):
        assert ours_layer.shape == (input_ids.numel(), hf.config.num_local_experts)
        torch.testing.assert_close(ours_layer[real], hf_layer[real], atol=families.ATOL, rtol=0)
    torch.testing.assert_close(actual.aux_loss, expected.aux_loss, atol=families.ATOL, rtol=0)
    torch.testing.assert_close(actual.loss, expected.loss, atol=families.ATOL, rtol=0)
    # Not vacuous: the loss is the next-token loss plus router_aux_loss_coef times the aux loss, and without
    # output_router_logits neither side computes the aux loss.
    plain = ours(input_ids, attention_mask=attention_mask, labels=labels)
    assert plain.router_logits is None and plain.aux_loss is None
    coefficient = hf.config.router_aux_loss_coef
    torch.testing.assert_close(actual.loss - plain.loss, coefficient * actual.aux_loss, atol=1e-6, rtol=0)
    assert actual.aux_loss > 0
    # The padding is left out: counting it gives another loss, on both sides alike.
    unmasked = ours(input_ids, output_router_logits=True).aux_loss
    torch.testing.assert_close(unmasked, hf(input_ids, output_router_logits=True).aux_loss, atol=families.ATOL, rtol=0)
    assert (unmasked - actual.aux_loss).abs() > 1e-4


@torch.no_grad()
def test_the_configs_output_router_logits_is_the_default(models):
    hf, ours = models
    input_ids, attention_mask, _ = _padded_batch(hf.config)
    ours.config.output_router_logits = True
    try:
        output = ours(input_ids, attention_mask=attention_mask)
    finally:
        ours.config.output_router_logits = False
    assert len(output.router_logits) == hf.config.num_hidden_layers and output.aux_loss is not None
    assert ours(input_ids, attention_mask=attention_mask, output_router_logits=False).router_logits is None


@torch.no_grad()
def test_a_tokens_output_is_its_chosen_experts_alone(models):
    hf, ours = models
    config = hf.config
    moe = ours.model.layers[0].mlp
    hidden_states = torch.randn(2, 9, config.hidden_size)
    _, weights, chosen = moe.route(hidden_states.view(-1, config.hidden_size))
    assert chosen.shape == (18, config.num_experts_per_tok)
    torch.testing.assert_close(weights.sum(-1), torch.ones(18))
    # Not vacuous: the tokens spread over every expert, and each one's choice matters.
    assert set(chosen.flatten().tolist()) == set(range(config.num_local_experts))
    before = moe(hidden_states)
    token = 0
    others = [expert for expert in range(config.num_local_experts) if expert not in chosen[token]]
    saved = moe.experts.down_proj.clone()
    try:
        moe.experts.down_proj[others] = 100.0
        after = moe(hidden_states)
        # The experts it did not choose change nothing of its output, and move the tokens that chose them.
        assert torch.equal(after[0, token], before[0, token])
        assert (after - before).abs().max() > 1.0
        # One of its own experts changed: its output moves.
        moe.experts.down_proj.copy_(saved)
        moe.experts.down_proj[chosen[token]] *= 2.0
        assert (moe(hidden_states)[0, token] - before[0, token]).abs().max() > 1e-3
    finally:
        moe.experts.down_proj.copy_(saved)


@torch.no_grad()
def test_the_router_decides_the_logits(models):
    # Not vacuous: a Mixtral whose routers score otherwise computes other logits.
    hf, ours = models
    input_ids = torch.tensor([[3, 4, 5, 6, 7, 8]])
    before = ours(input_ids).logits
    gate = ours.model.layers[0].mlp.gate
    saved = gate.weight.clone()
    gate.weight.copy_(-saved)
    try:
        assert (ours(input_ids).logits - before).abs().max() > 1e-3
    finally:
        gate.weight.copy_(saved)


def test_training_jitters_the_routers_input_as_transformers_does(models):
    hf, ours = models
    input_ids = torch.tensor([[3, 4, 5, 6, 7, 8]])
    mixtures = [layer.mlp for model in models for layer in model.model.layers]
    for moe in mixtures:
        moe.jitter_noise = 0.2
    hf.train()
    ours.train()
    try:
        with torch.no_grad():
            torch.manual_seed(3)
            actual = ours(input_ids).logits
            torch.manual_seed(3)
            expected = hf(input_ids).logits
            torch.manual_seed(4)
            other = ours(input_ids).logits
    finally:
        for moe in mixtures:
            moe.jitter_noise = 0.0
        hf.eval()
        ours.eval()
    torch.testing.assert_close(actual, expected, atol=families.ATOL, rtol=0)
    assert (actual - other).abs().max() > 1e-3  # not vacuous: another draw, other logits


@NEEDS_STACKED_EXPERTS
@torch.no_grad()
def test_the_stack_alone_converts_and_reports_its_routers():
    config = transformers.MixtralConfig(**SHAPES["3_experts_top_1_3_heads_3_kv_heads_no_window_tied"])
    hf = transformers.MixtralModel(config).eval()
    ours = from_hf(hf)
    assert isinstance(ours, MixtralModel)
    input_ids = torch.tensor([[3, 4, 5, 6]])
    expected, actual = hf(input_ids, output_router_logits=True), ours(input_ids, output_router_logits=True)
    torch.testing.assert_close(actual.last_hidden_state, expected.last_hidden_state, atol=families.ATOL, rtol=0)
    torch.testing.assert_close(actual.router_logits[0], expected.router_logits[0], atol=families.ATOL, rtol=0)


def test_a_checkpoint_with_one_linear_per_expert_is_refused_naming_its_tensors(models):
    # transformers 4's layout: each expert's gate, up and down matrices as block_sparse_moe.experts.N.w1, w3, w2.
    _, ours = models
    state = ours.state_dict()
    legacy = {key.replace(".mlp.", ".block_sparse_moe."): tensor for key, tensor in state.items()}
    gate_up = legacy.pop("model.layers.0.block_sparse_moe.experts.gate_up_proj")
    legacy["model.layers.0.block_sparse_moe.experts.0.w1.weight"] = gate_up[0].chunk(2)[0]
    with pytest.raises(ValueError, match=r"missing tensors: .*model\.layers\.0\.mlp\.experts\.gate_up_proj") as error:
        MixtralForCausalLM.map_hf_state_dict(legacy, state)
    assert "unexpected tensors: model.layers.0.block_sparse_moe.experts.0.w1.weight" in str(error.value)


def test_configs_mixtral_does_not_build_are_refused():
    with pytest.raises(TypeError, match="MixtralConfig"):
        check_mixtral_config(transformers.MistralConfig())
    with pytest.raises(ValueError, match=r"num_experts_per_tok \(3\) must be at most num_local_experts \(2\)"):
        check_mixtral_config(transformers.MixtralConfig(num_local_experts=2, num_experts_per_tok=3))
    with pytest.raises(ValueError, match="MixtralConfig.num_local_experts must be a positive int"):
        check_mixtral_config(transformers.MixtralConfig(num_local_experts=0, num_experts_per_tok=0))
    with pytest.raises(ValueError, match="MixtralConfig.num_experts_per_tok must be a positive int"):
        check_mixtral_config(transformers.MixtralConfig(num_experts_per_tok=0))
    with pytest.raises(ValueError, match="MixtralConfig.sliding_window must be a positive int"):
        check_mixtral_config(transformers.MixtralConfig(sliding_window=0))
