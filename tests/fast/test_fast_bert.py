"""The fast BERT computes what BertModel computes: fused Q, K, V, packed tokens, the same numbers.

Tolerance: float32, absolute 1e-5 (the package's), on the real tokens (the
fast model leaves zeros at padding positions, which no reader of its output
looks at).
"""

from __future__ import annotations

import pytest
import torch

from literate_transformer.fast.bert import (
    FastBertModel,
    PackedBatch,
    Workspace,
    activate_in_place,
    linear,
    linear_activation,
    linear_add,
    onednn_applies,
)
from literate_transformer.models.bert import BertModel

ATOL = 1e-5


def _mask(lengths: list[int], length: int) -> torch.Tensor:
    return (torch.arange(length)[None, :] < torch.tensor(lengths)[:, None]).long()


@pytest.fixture(scope="module")
def checkpoint():
    bert = BertModel.from_pretrained().eval()
    return bert, FastBertModel.from_bert(bert)


@pytest.mark.parametrize("lengths", [[9, 4, 1, 7], [9, 9, 9, 9]], ids=["padded", "unpadded"])
def test_fast_bert_equals_the_checkpoints_bert_on_the_real_tokens(checkpoint, lengths):
    bert, fast = checkpoint
    input_ids = torch.randint(1000, bert.config.vocab_size, (len(lengths), 9))
    mask = _mask(lengths, 9)
    with torch.inference_mode():
        expected = bert(input_ids, attention_mask=mask).last_hidden_state
        actual = fast(input_ids, lengths=lengths)
    torch.testing.assert_close(actual[mask.bool()], expected[mask.bool()], atol=ATOL, rtol=0)
    assert torch.equal(actual[~mask.bool()], torch.zeros_like(actual[~mask.bool()]))


def test_without_lengths_every_token_is_real(tiny_config):
    bert = BertModel(tiny_config()).eval()
    input_ids = torch.randint(0, bert.config.vocab_size, (3, 6))
    with torch.inference_mode():
        torch.testing.assert_close(
            FastBertModel.from_bert(bert)(input_ids), bert(input_ids).last_hidden_state, atol=ATOL, rtol=0
        )


def test_the_fused_projection_is_query_key_and_value_stacked(tiny_config):
    bert = BertModel(tiny_config()).eval()
    fused = FastBertModel.from_bert(bert).layer[0].query_key_value
    hidden = torch.randn(5, bert.config.hidden_size)
    attention = bert.encoder.layer[0].attention.self
    expected = torch.cat([attention.query(hidden), attention.key(hidden), attention.value(hidden)], dim=-1)
    torch.testing.assert_close(fused(hidden), expected, atol=ATOL, rtol=0)


def test_the_fast_model_is_made_where_and_in_the_dtype_the_model_is(tiny_config):
    # A GPU model's fast model runs on its GPU: no weight of it is left on the CPU or in float32.
    bert = BertModel(tiny_config()).eval().to(torch.float64)
    fast = FastBertModel.from_bert(bert)
    assert {parameter.dtype for parameter in fast.parameters()} == {torch.float64}
    input_ids = torch.randint(0, bert.config.vocab_size, (2, 5))
    with torch.inference_mode():
        torch.testing.assert_close(fast(input_ids), bert(input_ids).last_hidden_state, atol=1e-12, rtol=0)
    on_meta = FastBertModel.from_bert(BertModel(tiny_config()).to("meta"))
    assert {parameter.device.type for parameter in on_meta.parameters()} == {"meta"}


def test_every_layer_writes_over_one_workspace_and_computes_what_it_computes_alone(tiny_config):
    bert = BertModel(tiny_config(num_hidden_layers=2)).eval()
    first, second = FastBertModel.from_bert(bert).layer
    hidden = torch.randn(7, bert.config.hidden_size)
    workspace = Workspace.for_layer(hidden, first)
    arguments = (None, None, (1, 7))
    with torch.inference_mode():
        # Each layer alone, with buffers of its own.
        between_alone = first(hidden, *arguments, Workspace.for_layer(hidden, first))
        alone = second(between_alone, *arguments, Workspace.for_layer(hidden, second))
        between = first(hidden, *arguments, workspace)
        shared = second(between, *arguments, workspace)
        # The buffers hold the second layer's intermediates: it wrote over the first layer's.
        expected_mixed = second.query_key_value(between)
    assert torch.equal(shared, alone)
    torch.testing.assert_close(workspace.mixed, expected_mixed, atol=ATOL, rtol=0)
    assert workspace.intermediate.shape == (7, bert.config.intermediate_size)
    assert shared.data_ptr() not in {
        buffer.data_ptr() for buffer in (workspace.mixed, workspace.intermediate, workspace.summed)
    }


@pytest.mark.parametrize(
    ("activation", "in_place"),
    [(torch.nn.GELU(), True), (torch.nn.GELU(approximate="tanh"), True), (torch.nn.ReLU(), False)],
    ids=["gelu", "gelu-tanh", "relu"],
)
def test_the_activation_runs_in_place_where_pytorch_has_the_form(activation, in_place):
    hidden = torch.randn(4, 6)
    expected = activation(hidden.clone())
    result = activate_in_place(activation, hidden)
    assert torch.equal(result, expected)
    assert (result.data_ptr() == hidden.data_ptr()) is in_place


def test_a_workspace_that_does_not_fit_is_refused_by_name(tiny_config):
    bert = BertModel(tiny_config()).eval()
    layer = FastBertModel.from_bert(bert).layer[0]
    hidden = torch.randn(7, bert.config.hidden_size)
    too_short = Workspace.for_layer(hidden[:5], layer)
    with pytest.raises(ValueError, match=r"workspace.mixed must be a torch.float32 tensor of shape \(7, "):
        layer(hidden, None, None, (1, 7), too_short)
    halves = Workspace.for_layer(hidden.half(), layer)
    with pytest.raises(ValueError, match="workspace.mixed must be a torch.float32 tensor"):
        layer(hidden, None, None, (1, 7), halves)
    with pytest.raises(TypeError, match="workspace must be a Workspace or None, got dict"):
        layer(hidden, None, None, (1, 7), {"mixed": None})


needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="PyTorch built without oneDNN")


@needs_onednn
@pytest.mark.parametrize(
    "activation", [torch.nn.GELU(), torch.nn.GELU(approximate="tanh"), torch.nn.ReLU()], ids=["gelu", "tanh", "relu"]
)
def test_the_fused_linear_steps_compute_what_torch_computes(activation):
    layer = torch.nn.Linear(6, 5)
    hidden, residual = torch.randn(4, 6), torch.randn(4, 5)
    with torch.inference_mode():
        expected = torch.nn.functional.linear(hidden, layer.weight, layer.bias)
        torch.testing.assert_close(linear(hidden, layer), expected, atol=ATOL, rtol=0)
        torch.testing.assert_close(
            linear_activation(hidden, layer, activation), activation(expected), atol=ATOL, rtol=0
        )
        torch.testing.assert_close(linear_add(hidden, layer, residual), residual + expected, atol=ATOL, rtol=0)


@needs_onednn
def test_onednn_runs_on_float32_cpu_inference_only():
    hidden = torch.randn(3, 4)
    with torch.inference_mode():
        assert onednn_applies(hidden)
        assert not onednn_applies(hidden.double())
    assert not onednn_applies(hidden)  # a gradient may be wanted: oneDNN's operator has no backward
    with torch.no_grad():
        assert onednn_applies(hidden)


@needs_onednn
@pytest.mark.parametrize("lengths", [[7, 3, 5], [7, 7, 7]], ids=["padded", "unpadded"])
def test_the_fused_layer_computes_what_the_addmm_layer_computes(tiny_config, lengths):
    bert = BertModel(tiny_config()).eval()
    layer = FastBertModel.from_bert(bert).layer[0]
    batch = PackedBatch(lengths)
    hidden = torch.randn(batch.num_tokens, bert.config.hidden_size)
    arguments = (batch.index, batch.key_mask, (batch.batch_size, batch.max_length))
    with torch.inference_mode():
        fused = layer(hidden, *arguments)
        with_addmm = layer(hidden, *arguments, Workspace.for_layer(hidden, layer))
        torch.testing.assert_close(layer.forward_fused(hidden, *arguments), fused, atol=0, rtol=0)
    torch.testing.assert_close(fused, with_addmm, atol=ATOL, rtol=0)


def test_the_compiled_fast_path_computes_what_the_eager_one_computes(tiny_config):
    # Traced as torch.compile traces it, the oneDNN operators called as they are, their fake kernels giving
    # the shapes (the AOT tracing without Inductor's generated kernels, whose C++ build would take the
    # suite's time; the benchmark runs Inductor).
    bert = BertModel(tiny_config()).eval()
    input_ids = torch.randint(0, bert.config.vocab_size, (3, 6))
    with torch.inference_mode():
        eager = FastBertModel.from_bert(bert)(input_ids, lengths=[6, 2, 4])
        compiled = FastBertModel.from_bert(bert).compile(backend="aot_eager")(input_ids, lengths=[6, 2, 4])
    torch.testing.assert_close(compiled, eager, atol=ATOL, rtol=0)


def test_compile_refuses_a_backend_torch_does_not_know(tiny_config):
    fast = FastBertModel.from_bert(BertModel(tiny_config()).eval())
    with pytest.raises(ValueError, match=r"backend must be one of \[.*'inductor'.*\], got 'nope'"):
        fast.compile(backend="nope")
    with pytest.raises(TypeError, match="backend must be a string such as 'inductor', got int"):
        fast.compile(backend=3)


def test_the_fused_linear_steps_refuse_bad_input_by_name():
    layer, hidden = torch.nn.Linear(6, 5), torch.randn(4, 6)
    with pytest.raises(TypeError, match="hidden must be a torch.Tensor, got list"):
        linear([[1.0] * 6], layer)
    with pytest.raises(TypeError, match="layer must be a torch.nn.Linear, got GELU"):
        linear_activation(hidden, torch.nn.GELU(), torch.nn.GELU())
    with pytest.raises(ValueError, match="layer must have a bias"):
        linear(hidden, torch.nn.Linear(6, 5, bias=False))
    with pytest.raises(ValueError, match=r"hidden must end in the layer's input width 6, got shape \(4, 7\)"):
        linear(torch.randn(4, 7), layer)
    with pytest.raises(TypeError, match="residual must be a torch.Tensor, got float"):
        linear_add(hidden, layer, 1.0)
    with pytest.raises(ValueError, match=r"residual must have the output's shape \(4, 5\), got \(4, 6\)"):
        linear_add(hidden, layer, torch.randn(4, 6))


def test_linear_activation_refuses_what_is_not_a_module():
    with pytest.raises(TypeError, match="activation must be a torch.nn.Module such as nn.GELU\\(\\), got str"):
        linear_activation(torch.randn(2, 3), torch.nn.Linear(3, 2), "gelu")


def test_activate_in_place_refuses_what_is_not_a_module_or_a_tensor():
    with pytest.raises(TypeError, match="activation must be a torch.nn.Module"):
        activate_in_place("gelu", torch.randn(2, 3))
    with pytest.raises(TypeError, match="hidden must be a torch.Tensor, got list"):
        activate_in_place(torch.nn.GELU(), [1.0, 2.0])


def test_a_packed_batch_knows_where_each_real_token_sits():
    batch = PackedBatch([3, 1, 2], max_length=3)
    assert batch.num_tokens == 6
    assert batch.index.tolist() == [0, 1, 2, 3, 6, 7]
    assert batch.position_ids.tolist() == [0, 1, 2, 0, 0, 1]
    hidden_keys = batch.key_mask[:, 0, 0] < 0
    assert hidden_keys.tolist() == [[False, False, False], [False, True, True], [False, False, True]]
    assert PackedBatch([4, 4]).index is None and PackedBatch([4, 4]).key_mask is None


@pytest.mark.parametrize(
    ("lengths", "error", "match"),
    [
        ([3], ValueError, "one entry per sequence"),
        ([3, 7], ValueError, r"lengths must be ints in \[1, 4\]"),
        ([3, 0], ValueError, "lengths"),
        ("34", TypeError, "lengths must be a sequence"),
    ],
)
def test_bad_lengths_are_refused_by_name(tiny_config, lengths, error, match):
    fast = FastBertModel.from_bert(BertModel(tiny_config()).eval())
    with pytest.raises(error, match=match):
        fast(torch.zeros(2, 4, dtype=torch.long), lengths=lengths)


def test_only_a_bert_encoder_can_be_made_fast(tiny_config):
    with pytest.raises(TypeError, match="bert must be a literate_transformer BertModel"):
        FastBertModel.from_bert(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="is_decoder"):
        FastBertModel.from_bert(BertModel(tiny_config(is_decoder=True)))


def test_a_bert_whose_masks_are_its_own_is_refused_not_run_with_the_padding_mask(tiny_config):
    class BandedBert(BertModel):
        def attention_masks(self, attention_mask, length, past_length=0, dtype=None, device=None):
            return {"full": None}

    with pytest.raises(ValueError, match="BandedBert.*attention_masks"):
        FastBertModel.from_bert(BandedBert(tiny_config()))
    # The control: BERT's own hook is taken.
    assert isinstance(FastBertModel.from_bert(BertModel(tiny_config())), FastBertModel)


@torch.no_grad()
def test_the_fast_model_takes_what_a_tokenizer_gives_bert_and_computes_its_numbers(tokenizer):
    bert = BertModel.from_pretrained()
    fast = FastBertModel.from_bert(bert)
    batch = tokenizer(["time flies like an arrow", "a pair", "of sentences"], padding=True, return_tensors="pt")
    batch["token_type_ids"][1, 2:4] = 1  # a second segment in one row, so that the segments matter
    expected = bert(**batch).last_hidden_state
    real = batch["attention_mask"].bool()
    actual = fast(**batch)
    torch.testing.assert_close(actual[real], expected[real], atol=ATOL, rtol=0)
    # The same as the lengths given as plain ints; the segments are read, not assumed to be 0.
    lengths = batch["attention_mask"].sum(dim=1).tolist()
    by_lengths = fast(batch["input_ids"], token_type_ids=batch["token_type_ids"], lengths=lengths)
    torch.testing.assert_close(by_lengths, actual, atol=0, rtol=0)
    assert (fast(batch["input_ids"], lengths=lengths)[1] - actual[1]).abs().max() > 1e-3


def test_the_fast_model_refuses_a_left_padded_mask_both_mask_and_lengths_and_foreign_segments(tiny_config):
    fast = FastBertModel.from_bert(BertModel(tiny_config()).eval())
    ids = torch.ones(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="attention_mask must be right-padded"):
        fast(ids, torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]))
    with pytest.raises(ValueError, match="attention_mask must be right-padded"):
        fast(ids, torch.tensor([[1, 0, 1, 1], [1, 1, 1, 1]]))
    with pytest.raises(ValueError, match="either as attention_mask or as lengths, not both"):
        fast(ids, torch.ones(2, 4, dtype=torch.long), lengths=[4, 4])
    with pytest.raises(ValueError, match="token_type_ids must be in"):
        fast(ids, token_type_ids=torch.full((2, 4), 7))
