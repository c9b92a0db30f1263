"""Phi-3, Llama's layers with fused projections in Mistral's stack, equals transformers.Phi3ForCausalLM.

Random Phi-3s: grouped-query and multi-query attention, a sliding window
shorter than the test's sequences and none, three quarters and half of each
head turned, tied and untied heads.  Tolerances as for every family of the
branch (``tests/families.py``).  Rows that need what an older
``transformers`` lacks (``partial_rotary_factor``, the window counted as
``transformers`` 5 counts it) skip there, saying so.  ``generate()`` runs
over the static cache by default, and its ids are ``transformers``' there.
"""

from __future__ import annotations

import copy

import families
import pytest
import torch
import transformers
from shapes import LLAMA_GROUPED

from literate_transformer.core.masks import causal_mask
from literate_transformer.models.llama import LlamaForCausalLM, check_llama_config, rotary_dim_of
from literate_transformer.models.phi3 import Phi3ForCausalLM, check_phi3_config

#: Whether this release's Phi-3 reads ``partial_rotary_factor`` (``rope_parameters`` in 5; a field from a 4.x release).
HAS_PARTIAL_ROTARY = "partial_rotary_factor" in {
    **transformers.Phi3Config().to_dict(),
    **(getattr(transformers.Phi3Config(), "rope_parameters", None) or {}),
}


@torch.no_grad()
def _hf_counts_the_window_as_we_do() -> bool:
    """Whether transformers' eager Phi-3 lets each of 6 queries see the keys the package's band does (window 2)."""
    config = transformers.Phi3Config(
        **dict(LLAMA_GROUPED, num_hidden_layers=1), sliding_window=2, pad_token_id=0, attn_implementation="eager"
    )
    probabilities = transformers.Phi3ForCausalLM(config).eval()(torch.arange(1, 7)[None], output_attentions=True)
    return torch.equal(probabilities.attentions[0][0, 0] > 0, causal_mask(6, window=2))


#: name: Phi3Config fields (LLAMA_GROUPED's heads are of D = 8: three quarters is R = 6, a half R = 4).
SHAPES = {
    "4_heads_2_kv_heads_window_3_three_quarters_turned": dict(
        LLAMA_GROUPED, sliding_window=3, partial_rotary_factor=0.75
    ),
    "4_heads_1_kv_head_no_window_half_turned_tied": dict(
        LLAMA_GROUPED, num_key_value_heads=1, partial_rotary_factor=0.5, tie_word_embeddings=True
    ),
}
NEEDS = {
    "4_heads_2_kv_heads_window_3_three_quarters_turned": pytest.mark.skipif(
        not (HAS_PARTIAL_ROTARY and _hf_counts_the_window_as_we_do()),
        reason=f"transformers {transformers.__version__}'s Phi-3 turns whole heads, or counts sliding_window "
        "otherwise than transformers 5 and the package",
    ),
    "4_heads_1_kv_head_no_window_half_turned_tied": pytest.mark.skipif(
        not HAS_PARTIAL_ROTARY, reason=f"transformers {transformers.__version__}'s Phi-3 turns whole heads"
    ),
}


def _turning(config, factor: float):
    """A copy of ``config`` whose heads turn ``factor`` of their features, where this release keeps the factor."""
    config = copy.deepcopy(config)
    if getattr(config, "rope_parameters", None) is not None:
        config.rope_parameters = {**config.rope_parameters, "partial_rotary_factor": factor}
    else:
        config.partial_rotary_factor = factor
    return config


models = families.hf_and_ours_fixture(transformers.Phi3Config, transformers.Phi3ForCausalLM, SHAPES, NEEDS)


def test_from_hf_builds_phi3_with_its_fused_projections_under_hfs_names(models):
    hf, ours = families.assert_from_hf_builds(models, Phi3ForCausalLM)
    config, layer = hf.config, ours.model.layers[0]
    head_dim = config.hidden_size // config.num_attention_heads
    # ((H + 2K) D, E): the queries', keys' and values' rows in one matrix; (2F, E): the gate's and the up rows.
    rows = (config.num_attention_heads + 2 * config.num_key_value_heads) * head_dim
    assert layer.self_attn.qkv_proj.weight.shape == (rows, config.hidden_size)
    assert layer.mlp.gate_up_proj.weight.shape == (2 * config.intermediate_size, config.hidden_size)
    assert not any(name in dict(layer.named_modules()) for name in ("self_attn.q_proj", "mlp.gate_proj"))
    assert all(linear.bias is None for linear in ours.modules() if isinstance(linear, torch.nn.Linear))


class TestGenerationCacheLossAndBadInputs(families.DecoderFamilyTests):
    """Phi-3's logits, ``generate()`` ids (greedy, sampled, beam), cache, loss and refusals, as every decoder's."""

    @pytest.mark.parametrize("decoding", list(families.DECODINGS))
    def test_generate_gives_hfs_ids(self, models, decoding, monkeypatch):
        # Over the static cache, generate()'s default path, which the fused projections write through.
        steps = families.count_static_cache_steps(monkeypatch)
        families.assert_generate_gives_hfs_ids(*models, decoding)
        assert steps[0] > 0, "generate() did not run over the static cache"


@torch.no_grad()
def test_attention_and_hidden_states_equal_hfs_in_every_layer(models):
    hf, ours = models
    input_ids, attention_mask = families.right_padded_batch(hf.config.vocab_size)
    families.assert_encoder_equals_hf(hf.model, ours.model, input_ids, attention_mask, families.ATOL, padded_rows=False)


def test_the_static_cache_writes_the_dynamic_caches_ids_in_beam_search(models, monkeypatch):
    # Beam search, whose beams take over their parents' cached positions at every step (tests/parts/
    # test_static_cache.py runs every decoding over every family's static cache, Phi-3's included).
    _, ours = models
    input_ids, attention_mask = families.generation_prompts(models[0], ours.config.vocab_size)
    static, dynamic, steps = families.generate_both_ways(
        ours, ours, input_ids, attention_mask, 6, families.DECODINGS["beam"], families.SEED, monkeypatch
    )
    assert steps > 0 and torch.equal(static, dynamic), f"static {static.tolist()}\ndynamic {dynamic.tolist()}"


@torch.no_grad()
def test_only_the_first_r_features_of_a_head_turn(models):
    hf, ours = models
    head_dim = hf.config.hidden_size // hf.config.num_attention_heads
    rotated = rotary_dim_of(hf.config)
    cos, _ = ours.model.rotary_emb(torch.arange(4)[None])
    assert cos.shape == (1, 4, rotated) and rotated < head_dim
    # Not vacuous: the same weights turning whole heads compute other logits.
    input_ids = torch.tensor([[3, 4, 5, 6, 7]])
    whole = Phi3ForCausalLM(_turning(hf.config, 1.0)).eval()
    whole.load_state_dict(ours.state_dict())
    assert (whole(input_ids).logits - ours(input_ids).logits).abs().max() > 1e-3


@torch.no_grad()
def test_the_fused_layers_cut_into_rows_are_llamas_separate_ones(randomize):
    # qkv_proj is q_proj, k_proj and v_proj stacked by rows; gate_up_proj is gate_proj then up_proj: a Phi-3 that
    # turns whole heads, without a window, is a Llama with its weights cut apart.
    config = dict(LLAMA_GROUPED, pad_token_id=0, rms_norm_eps=1e-5)  # the two configs' defaults differ
    torch.manual_seed(0)
    phi3 = randomize(Phi3ForCausalLM(transformers.Phi3Config(**config)))
    llama = LlamaForCausalLM(transformers.LlamaConfig(**config)).eval()
    sizes = [config["hidden_size"], *2 * [config["hidden_size"] // 2]]  # H D, then K D twice (K = H / 2)
    state = {}
    for name, tensor in phi3.state_dict().items():
        if name.endswith("qkv_proj.weight"):
            for part, rows in zip(("q_proj", "k_proj", "v_proj"), tensor.split(sizes), strict=True):
                state[name.replace("qkv_proj", part)] = rows
        elif name.endswith("gate_up_proj.weight"):
            for part, rows in zip(("gate_proj", "up_proj"), tensor.chunk(2), strict=True):
                state[name.replace("gate_up_proj", part)] = rows
        else:
            state[name] = tensor
    llama.load_state_dict(state)
    input_ids, attention_mask = families.right_padded_batch(config["vocab_size"])
    families.assert_close_at_real_positions(
        llama(input_ids, attention_mask=attention_mask).logits,
        phi3(input_ids, attention_mask=attention_mask).logits,
        attention_mask,
        families.ATOL,
        "logits",
    )


def test_resid_pdrop_drops_each_sublayers_output_in_training_only(randomize):
    config = transformers.Phi3Config(**LLAMA_GROUPED, resid_pdrop=0.5, pad_token_id=0)
    torch.manual_seed(0)
    ours = randomize(Phi3ForCausalLM(config))
    input_ids = torch.tensor([[3, 4, 5, 6]])
    with torch.no_grad():
        evaluated = ours(input_ids).logits
        assert torch.equal(ours(input_ids).logits, evaluated)  # no dropout in evaluation
        ours.train()
        torch.manual_seed(1)
        trained = ours(input_ids).logits
    assert (trained - evaluated).abs().max() > 1e-3
    layer = ours.model.layers[0]
    assert [sublayer.dropout.p for sublayer in layer.sublayers()] == [0.5, 0.5]


def test_phi3_mini_counts_transformers_parameters_on_the_meta_device():
    # transformers' Phi3Config defaults are Phi-3-mini-4k-instruct's: E 3072, F 8192, 32 layers of 32 heads, V 32064.
    config = transformers.Phi3Config()
    with torch.device("meta"):
        ours = Phi3ForCausalLM(config)
        hf = transformers.Phi3ForCausalLM(config)
    count = sum(parameter.numel() for parameter in ours.parameters())
    assert count == sum(parameter.numel() for parameter in hf.parameters())
    assert round(count / 1e9, 1) == 3.8  # the report's "3.8B parameters"


def _longrope() -> transformers.Phi3Config:
    """A valid Phi-3 config of the 128k models' kind: rotations scaled by ``longrope`` (``su`` in 4.x)."""
    factors = [1.0, 1.5, 2.0, 2.5]  # one per pair of a head of 8
    scaling = {"short_factor": factors, "long_factor": factors}
    sizes = dict(LLAMA_GROUPED, max_position_embeddings=64, original_max_position_embeddings=16)
    if hasattr(transformers.Phi3Config(), "rope_parameters"):
        return transformers.Phi3Config(**sizes, rope_parameters={"rope_type": "longrope", **scaling})
    return transformers.Phi3Config(**sizes, rope_scaling={"type": "su", **scaling})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        pytest.param(
            _longrope, r"Phi3Config.rope_scaling=.* rope_type '(longrope|su)' \(only None and 'default'", id="longrope"
        ),
        pytest.param(
            lambda: transformers.Phi3Config(hidden_size=24, num_attention_heads=4, partial_rotary_factor=0.5),
            r"Phi3Config.partial_rotary_factor=0.5 turns 3 of a head's 6 features: .* must be an even number",
            id="odd_R",
        ),
        pytest.param(
            lambda: transformers.Phi3Config(hidden_size=24, num_attention_heads=4, partial_rotary_factor=1.5),
            r"Phi3Config.partial_rotary_factor must be a number in \(0, 1\]",
            id="factor_above_1",
        ),
    ],
)
def test_what_is_not_built_is_refused_naming_the_field(config, message):
    with pytest.raises(ValueError, match=message):
        check_phi3_config(config())


def test_other_configs_are_refused_and_llama_still_turns_whole_heads():
    with pytest.raises(TypeError, match="Phi3Config"):
        check_phi3_config(transformers.MistralConfig())
    llama = _turning(transformers.LlamaConfig(hidden_size=32, num_attention_heads=4), 0.5)
    with pytest.raises(ValueError, match=r"LlamaConfig.rope_scaling partial_rotary_factor=0.5 is not supported"):
        check_llama_config(llama)
