"""BertModel equals transformers.BertModel on random weights of several shapes; its inputs are validated.

Tolerance: fp32, absolute 1e-5 on real (non-padding) tokens.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from shapes import BERT

from literate_transformer import TransformerConfig
from literate_transformer.core.masks import padding_mask, to_additive
from literate_transformer.models.bert import BertAttention, BertLayer, BertModel, BertSelfAttention

ATOL = 1e-5
# The NaN checks also run on a GPU when there is one (fused SDPA kernels differ there).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# Shapes other than the checkpoint's: odd head counts, other epsilons,
# more segment types, other activations, a padding id that is not 0.
COMPARED = ["2_heads_gelu_pad_1", "3_heads_relu", "5_heads_gelu_new"]


def random_hf_bert(implementation: str = "eager", seed: int = 0, **fields) -> transformers.BertModel:
    """A randomly initialised HuggingFace BertModel, every parameter perturbed (layer norms included)."""
    torch.manual_seed(seed)
    config = transformers.BertConfig(**fields, attn_implementation=implementation)
    model = transformers.BertModel(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model


def hf_copy(model: transformers.BertModel, implementation: str) -> transformers.BertModel:
    """The same weights under another attention implementation."""
    other = random_hf_bert(implementation, **{k: getattr(model.config, k) for k in BERT.fields})
    other.load_state_dict(model.state_dict())
    return other


def batch(config: transformers.BertConfig, seed: int = 1):
    """Two sequences, the second one padded, with random segment ids."""
    generator = torch.Generator().manual_seed(seed)
    length = min(9, config.max_position_embeddings)
    input_ids = torch.randint(2, config.vocab_size, (2, length), generator=generator)
    attention_mask = torch.ones(2, length, dtype=torch.long)
    attention_mask[1, length - 3 :] = 0
    input_ids[1, length - 3 :] = config.pad_token_id
    token_type_ids = torch.randint(0, config.type_vocab_size, (2, length), generator=generator)
    return input_ids, attention_mask, token_type_ids


@pytest.fixture(params=COMPARED, scope="module")
def hf_eager(request):
    return random_hf_bert("eager", **BERT(request.param))


def test_state_dict_keys_and_shapes_are_huggingfaces(hf_eager):
    ours = BertModel(hf_eager.config)
    theirs = {key: tuple(value.shape) for key, value in hf_eager.state_dict().items()}
    assert {key: tuple(value.shape) for key, value in ours.state_dict().items()} == theirs


@torch.no_grad()
def test_eager_matches_hf_eager_hidden_states_attentions_pooler(hf_eager):
    ours = BertModel.from_hf(hf_eager)
    input_ids, attention_mask, token_type_ids = batch(hf_eager.config)
    real = attention_mask.bool()
    expected = hf_eager(
        input_ids=input_ids,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        output_attentions=True,
        output_hidden_states=True,
    )
    actual = ours(input_ids, attention_mask, token_type_ids, output_attentions=True, output_hidden_states=True)
    torch.testing.assert_close(actual.last_hidden_state[real], expected.last_hidden_state[real], atol=ATOL, rtol=0)
    torch.testing.assert_close(actual.pooler_output, expected.pooler_output, atol=ATOL, rtol=0)
    assert len(actual.hidden_states) == len(expected.hidden_states) == hf_eager.config.num_hidden_layers + 1
    for ours_layer, hf_layer in zip(actual.hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(ours_layer[real], hf_layer[real], atol=ATOL, rtol=0)
    assert len(actual.attentions) == hf_eager.config.num_hidden_layers
    for ours_probs, hf_probs in zip(actual.attentions, expected.attentions, strict=True):
        torch.testing.assert_close(ours_probs, hf_probs, atol=ATOL, rtol=0)
    assert actual.cross_attentions is None


@torch.no_grad()
def test_sdpa_matches_hf_sdpa(hf_eager):
    hf_sdpa = hf_copy(hf_eager, "sdpa")
    ours = BertModel.from_hf(hf_sdpa)
    assert ours.config.attn_implementation == "sdpa"
    input_ids, attention_mask, token_type_ids = batch(hf_eager.config)
    real = attention_mask.bool()
    expected = hf_sdpa(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    actual = ours(input_ids, attention_mask, token_type_ids)
    torch.testing.assert_close(actual.last_hidden_state[real], expected.last_hidden_state[real], atol=ATOL, rtol=0)
    torch.testing.assert_close(actual.pooler_output, expected.pooler_output, atol=ATOL, rtol=0)


@torch.no_grad()
@pytest.mark.parametrize("padded", [False, True], ids=["no_padding", "padding"])
def test_sdpa_path_equals_eager_path(hf_eager, padded):
    eager = BertModel.from_hf(hf_eager)
    sdpa = BertModel.from_hf(hf_eager, attn_implementation="sdpa")
    input_ids, attention_mask, token_type_ids = batch(hf_eager.config)
    if not padded:
        attention_mask = torch.ones_like(attention_mask)
    real = attention_mask.bool()
    expected = eager(input_ids, attention_mask, token_type_ids)
    actual = sdpa(input_ids, attention_mask, token_type_ids)
    torch.testing.assert_close(actual.last_hidden_state[real], expected.last_hidden_state[real], atol=ATOL, rtol=0)


@torch.no_grad()
def test_sdpa_falls_back_to_eager_for_output_attentions():
    hf = random_hf_bert(**BERT("5_heads_gelu_new"))
    eager = BertModel.from_hf(hf)
    sdpa = BertModel.from_hf(hf, attn_implementation="sdpa")
    input_ids, attention_mask, _ = batch(hf.config)
    expected = eager(input_ids, attention_mask, output_attentions=True).attentions
    actual = sdpa(input_ids, attention_mask, output_attentions=True).attentions
    assert len(actual) == len(expected)
    for ours_probs, eager_probs in zip(actual, expected, strict=True):
        torch.testing.assert_close(ours_probs, eager_probs, atol=ATOL, rtol=0)


def test_no_mask_is_built_without_an_attention_mask():
    # Neither path then spends a pass over the (B, H, T, S) scores adding zeros.
    model = BertModel(TransformerConfig(**BERT("3_heads_relu"), attn_implementation="sdpa"))
    assert model.attention_masks(None, 5, 0, torch.float32)["full"] is None
    # A mask of ones is kept (finding out that it hides nothing would read it back to the host): all zeros.
    ones = torch.ones(2, 5, dtype=torch.long)
    assert model.attention_masks(ones, 5, 0, torch.float32)["full"].abs().max() == 0
    padded = ones.clone()
    padded[0, -1] = 0
    mask = model.attention_masks(padded, 5, 0, torch.float32)["full"]
    assert mask.shape == (2, 1, 1, 5) and mask.dtype == torch.float32
    assert mask[0, 0, 0, -1] == torch.finfo(torch.float32).min and mask[1].abs().max() == 0
    # A decoder's mask is causal even without padding.
    decoder = BertModel(TransformerConfig(**BERT("3_heads_relu"), is_decoder=True))
    causal = decoder.attention_masks(None, 5, 0, torch.float32)["full"]
    assert causal.shape == (5, 5) and (causal.triu(1) < 0).sum() == 10 and causal.tril().abs().max() == 0


def test_gradients_match_hf_for_every_parameter_and_the_input():
    hf = random_hf_bert(**BERT("5_heads_gelu_new"))
    ours = BertModel.from_hf(hf)
    input_ids, attention_mask, token_type_ids = batch(hf.config)
    real = attention_mask[..., None].float()
    weights = torch.randn(hf.config.hidden_size)

    def loss(last_hidden_state, pooler_output):
        return (last_hidden_state * real * weights).sum() + pooler_output.sum()

    ours_out = ours(input_ids, attention_mask, token_type_ids)
    loss(ours_out.last_hidden_state, ours_out.pooler_output).backward()
    hf_out = hf(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    loss(hf_out.last_hidden_state, hf_out.pooler_output).backward()
    hf_parameters = dict(hf.named_parameters())
    for name, parameter in ours.named_parameters():
        assert parameter.grad is not None, name
        torch.testing.assert_close(parameter.grad, hf_parameters[name].grad, atol=ATOL, rtol=1e-4, msg=name)

    # Gradient with respect to the encoder's input (the embeddings).
    hidden = torch.randn(2, input_ids.shape[1], hf.config.hidden_size)
    additive = to_additive(padding_mask(attention_mask))
    ours_input = hidden.clone().requires_grad_(True)
    hf_input = hidden.clone().requires_grad_(True)
    (ours.encoder(ours_input, additive).last_hidden_state * real * weights).sum().backward()
    (hf.encoder(hf_input, attention_mask=additive).last_hidden_state * real * weights).sum().backward()
    torch.testing.assert_close(ours_input.grad, hf_input.grad, atol=ATOL, rtol=1e-4)


@torch.no_grad()
def test_head_mask_zero_equals_zeroing_that_heads_values():
    fields = BERT("5_heads_gelu_new")
    model = BertModel(TransformerConfig(**fields)).eval()
    input_ids, attention_mask, _ = batch(transformers.BertConfig(**fields))
    head_mask = torch.ones(fields["num_hidden_layers"], fields["num_attention_heads"])
    head_mask[0, 2] = 0.0
    masked = model(input_ids, attention_mask, head_mask=head_mask).last_hidden_state
    unmasked = model(input_ids, attention_mask).last_hidden_state
    # Head 2 of layer 0 contributes nothing when its values are zero.
    value = model.encoder.layer[0].attention.self.value
    size = model.config.head_size
    value.weight[2 * size : 3 * size] = 0.0
    value.bias[2 * size : 3 * size] = 0.0
    expected = model(input_ids, attention_mask).last_hidden_state
    real = attention_mask.bool()
    torch.testing.assert_close(masked[real], expected[real], atol=ATOL, rtol=0)
    assert (masked - unmasked).abs().max() > 1e-3


@torch.no_grad()
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_fully_masked_rows_give_no_nan(dtype, implementation):
    config = TransformerConfig(**BERT("3_heads_relu"), attn_implementation=implementation)
    model = BertModel(config).eval().to(DEVICE, dtype)
    input_ids = torch.randint(2, config.vocab_size, (2, 6), device=DEVICE)
    attention_mask = torch.ones(2, 6, dtype=torch.long, device=DEVICE)
    attention_mask[1] = 0  # an example that is padding only: every key of its rows is masked
    output = model(input_ids, attention_mask, output_hidden_states=True)
    for tensor in (*output.hidden_states, output.pooler_output):
        assert torch.isfinite(tensor).all()
    if implementation == "eager":
        probs = model(input_ids, attention_mask, output_attentions=True).attentions[0]
        assert torch.isfinite(probs).all()
        # A fully masked row spreads its weight evenly instead of producing NaN.
        torch.testing.assert_close(probs[1].float(), torch.full_like(probs[1].float(), 1 / 6), atol=1e-3, rtol=0)


@torch.no_grad()
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fully_masked_row_with_very_negative_scores_gives_no_nan(dtype):
    # Every score is about -280: adding finfo(float16).min to it overflows to -inf,
    # so a plain "scores + mask" (BERT's classic code) would give NaN in float16.
    config = TransformerConfig(**BERT("3_heads_relu"))
    attention = BertSelfAttention(config).eval()
    attention.query.weight.zero_()
    attention.key.weight.zero_()
    attention.query.bias.fill_(10.0)
    attention.key.bias.fill_(-10.0)
    attention.to(DEVICE, dtype)
    mask = to_additive(padding_mask(torch.zeros(2, 5, dtype=torch.long, device=DEVICE)), dtype=dtype)
    hidden_states = torch.randn(2, 5, config.hidden_size, dtype=dtype, device=DEVICE)
    context, probs = attention(hidden_states, mask, output_attentions=True)
    assert torch.isfinite(context).all() and torch.isfinite(probs).all()


@torch.no_grad()
def test_position_ids_and_token_type_ids_change_the_output_like_hf():
    hf = random_hf_bert(**BERT("3_heads_relu"))
    ours = BertModel.from_hf(hf)
    input_ids, attention_mask, token_type_ids = batch(hf.config)
    position_ids = torch.arange(input_ids.shape[1]).flip(0)[None]
    expected = hf(input_ids=input_ids, token_type_ids=token_type_ids, position_ids=position_ids).last_hidden_state
    actual = ours(input_ids, token_type_ids=token_type_ids, position_ids=position_ids).last_hidden_state
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)
    assert (actual - ours(input_ids, token_type_ids=token_type_ids).last_hidden_state).abs().max() > 1e-3


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------
TINY = BERT("bad_input")


@pytest.fixture(scope="module")
def tiny():
    return BertModel(TransformerConfig(**TINY)).eval()


IDS = torch.tensor([[1, 2, 3], [4, 5, 6]])


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        (dict(input_ids=IDS.float()), TypeError, "input_ids"),
        (dict(input_ids=[[1, 2, 3]]), TypeError, "input_ids"),
        (dict(input_ids=IDS[0]), ValueError, "input_ids"),
        (dict(input_ids=IDS + 20), ValueError, r"input_ids.*vocab_size=20"),
        (dict(input_ids=torch.ones(1, 7, dtype=torch.long)), ValueError, "max_position_embeddings=6"),
        (dict(input_ids=IDS, attention_mask=torch.ones(2, 4)), ValueError, "attention_mask"),
        (dict(input_ids=IDS, attention_mask=torch.ones(2, 1, 3)), ValueError, "attention_mask"),
        (dict(input_ids=IDS, attention_mask=torch.full((2, 3), 0.5)), ValueError, "attention_mask"),
        (dict(input_ids=IDS, token_type_ids=torch.full((2, 3), 2)), ValueError, r"token_type_ids.*type_vocab_size=2"),
        (dict(input_ids=IDS, token_type_ids=torch.zeros(2, 3)), TypeError, "token_type_ids"),
        (dict(input_ids=IDS, position_ids=torch.tensor([[0, 1, 6]])), ValueError, "position_ids"),
        (dict(input_ids=IDS, position_ids=torch.tensor([[0, 1]])), ValueError, "position_ids"),
        (dict(input_ids=IDS, head_mask=torch.ones(3)), ValueError, "head_mask"),
        (dict(input_ids=IDS, encoder_hidden_states=torch.randn(2, 4, 8)), ValueError, "encoder_hidden_states"),
        (dict(input_ids=IDS, encoder_attention_mask=torch.ones(2, 4)), ValueError, "encoder_attention_mask"),
    ],
)
def test_bad_input_is_refused_by_name(tiny, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        tiny(**kwargs)


def test_cross_attention_needs_a_decoder():
    with pytest.raises(ValueError, match="is_decoder"):
        BertModel(TransformerConfig(**TINY, add_cross_attention=True))


def test_cross_attention_layer_without_encoder_hidden_states_is_refused():
    config = TransformerConfig(**TINY, is_decoder=True, add_cross_attention=True)
    with pytest.raises(ValueError, match="encoder_hidden_states is required"):
        BertLayer(config)(torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match="encoder_hidden_states is required"):
        BertSelfAttention(config, is_cross_attention=True)(torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match="encoder_hidden_states is required"):
        BertModel(config)(IDS)


@pytest.mark.parametrize(
    ("encoder_hidden_states", "encoder_attention_mask", "pattern"),
    [
        (torch.randn(3, 4, 8), None, r"encoder_hidden_states has batch size 3.*input_ids has 2"),
        (torch.randn(2, 4, 6), None, r"encoder_hidden_states.*\(\*, \*, 8\)"),
        (torch.randn(2, 4, 8), torch.ones(2, 5), "encoder_attention_mask"),
    ],
    ids=["batch_size", "hidden_size", "mask_shape"],
)
def test_decoder_refuses_encoder_states_that_do_not_fit(encoder_hidden_states, encoder_attention_mask, pattern):
    model = BertModel(TransformerConfig(**TINY, is_decoder=True, add_cross_attention=True))
    with pytest.raises(ValueError, match=pattern):
        model(IDS, encoder_hidden_states=encoder_hidden_states, encoder_attention_mask=encoder_attention_mask)


def test_bert_attention_to_book_refuses_other_modules():
    from literate_transformer.interop import bert_attention_to_book

    with pytest.raises(TypeError, match="bert_attention"):
        bert_attention_to_book(BertSelfAttention(TransformerConfig(**TINY)))
    assert bert_attention_to_book(BertAttention(TransformerConfig(**TINY))).output_linear.weight.shape == (8, 8)


def test_every_conversion_returns_a_model_in_evaluation_mode_even_from_a_training_one(hf_eager):
    import literate_transformer as lt

    hf_eager.train()
    try:
        for ours in (BertModel.from_hf(hf_eager), lt.from_hf(hf_eager), lt.BertModel.from_hf(hf_eager)):
            assert not ours.training and not any(module.training for module in ours.modules())
    finally:
        hf_eager.eval()
