"""Embeddings: BERT's three embeddings, the config's dropout, positions on the right device, the paper's sinusoids."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertEmbeddings

from literate_transformer.book.embeddings import Embeddings
from literate_transformer.parts.positions import SinusoidalPositionalEncoding

ATOL = 1e-5
B, T, E, V, P = 2, 5, 24, 50, 16


@pytest.fixture
def embeddings(tiny_config) -> Embeddings:
    return Embeddings(tiny_config()).eval()


@pytest.fixture
def input_ids() -> torch.Tensor:
    return torch.randint(1, V, (B, T))


def test_dropout_probability_comes_from_config(tiny_config):
    embeddings = Embeddings(tiny_config(hidden_dropout_prob=0.2))
    # Not nn.Dropout()'s default of 0.5.
    assert embeddings.dropout.p == 0.2


def test_embeddings_equal_hf_bert_embeddings(input_ids, tiny_config):
    config = tiny_config(type_vocab_size=3)
    ours = Embeddings(config).eval()
    reference = BertEmbeddings(
        BertConfig(
            **{
                k: getattr(config, k)
                for k in (
                    "vocab_size",
                    "hidden_size",
                    "num_attention_heads",
                    "max_position_embeddings",
                    "type_vocab_size",
                    "layer_norm_eps",
                    "pad_token_id",
                )
            }
        )
    ).eval()
    with torch.no_grad():
        for param in ours.parameters():
            param.normal_()
    names = {
        "word_embeddings": "token_embeddings",
        "position_embeddings": "position_embeddings",
        "token_type_embeddings": "token_type_embeddings",
        "LayerNorm": "layer_norm",
    }
    state = {
        f"{hf}.{leaf}": tensor
        for hf, mine in names.items()
        for leaf, tensor in getattr(ours, mine).state_dict().items()
    }
    missing, unexpected = reference.load_state_dict(state, strict=False)
    assert not unexpected and all(name in ("position_ids", "token_type_ids") for name in missing)
    token_type_ids = torch.randint(0, 3, (B, T))
    expected = reference(input_ids=input_ids, token_type_ids=token_type_ids)
    assert (ours(input_ids, token_type_ids) - expected).abs().max().item() <= ATOL


def test_token_type_embeddings_are_added(embeddings, input_ids):
    zeros = torch.zeros_like(input_ids)
    assert torch.equal(embeddings(input_ids), embeddings(input_ids, zeros))
    second_segment = embeddings(input_ids, torch.ones_like(input_ids))
    assert (second_segment - embeddings(input_ids)).abs().max().item() > 1e-3


def test_position_ids_are_built_on_the_input_device(embeddings, input_ids):
    # Factory calls without an explicit device land on the default device; make that
    # the "meta" device so position ids built without device=input_ids.device would be
    # on the wrong device (as they would be on the CPU for inputs on a GPU).
    with torch.device("meta"):
        output = embeddings(input_ids)
    assert output.device == input_ids.device
    assert torch.isfinite(output).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_embeddings_run_on_cuda(input_ids, tiny_config):
    embeddings = Embeddings(tiny_config()).eval()
    expected = embeddings(input_ids)
    output = embeddings.to("cuda")(input_ids.to("cuda"))
    assert output.device.type == "cuda"
    assert (output.cpu() - expected).abs().max().item() <= ATOL


def test_past_length_offsets_positions(embeddings, input_ids):
    full = embeddings(input_ids)
    # The last two tokens embedded on their own, told that three came before them.
    assert (embeddings(input_ids[:, 3:], past_length=3) - full[:, 3:]).abs().max().item() <= ATOL
    # Without the offset they would sit at positions 0 and 1.
    assert (embeddings(input_ids[:, 3:]) - full[:, 3:]).abs().max().item() > 1e-3


def test_sinusoidal_encoding_matches_the_paper_formula():
    hidden_size = 8
    encoding = SinusoidalPositionalEncoding(hidden_size, max_length=10).encoding
    assert encoding.shape == (10, hidden_size)
    # PE(p, 2i) = sin(p / 10000^(2i/E)), PE(p, 2i+1) = cos(p / 10000^(2i/E)), computed by hand:
    assert encoding[3, 4].item() == pytest.approx(math.sin(3 / 10000 ** (4 / 8)), abs=1e-6)  # i = 2
    assert encoding[3, 5].item() == pytest.approx(math.cos(3 / 10000 ** (4 / 8)), abs=1e-6)
    assert encoding[7, 2].item() == pytest.approx(math.sin(7 / 10000 ** (2 / 8)), abs=1e-6)  # i = 1
    assert encoding[7, 1].item() == pytest.approx(math.cos(7.0), abs=1e-6)  # i = 0
    assert encoding[0].tolist() == [0.0, 1.0] * 4


def test_sinusoidal_encoding_adds_the_rows_from_past_length():
    module = SinusoidalPositionalEncoding(E, max_length=P)
    hidden = torch.randn(B, 3, E)
    assert torch.equal(module(hidden, past_length=4), hidden + module.encoding[4:7])


def test_sinusoidal_encoding_is_not_trained_or_saved():
    module = SinusoidalPositionalEncoding(E, max_length=P)
    assert list(module.parameters()) == [] and module.state_dict() == {}


def test_float_input_ids_are_refused(embeddings):
    with pytest.raises(TypeError, match=r"input_ids must have an int dtype"):
        embeddings(torch.rand(B, T))


def test_out_of_vocabulary_input_ids_are_refused(embeddings):
    with pytest.raises(ValueError, match=r"input_ids must be token ids in \[0, vocab_size=50\), found 50"):
        embeddings(torch.tensor([[1, 50]]))


def test_negative_input_ids_are_refused(embeddings):
    with pytest.raises(ValueError, match=r"input_ids must be token ids in \[0, vocab_size=50\), found -1"):
        embeddings(torch.tensor([[1, -1]]))


def test_too_long_sequence_is_refused(embeddings):
    with pytest.raises(ValueError, match=r"input_ids has 17 tokens, more than max_position_embeddings=16"):
        embeddings(torch.ones(1, P + 1, dtype=torch.long))


def test_too_long_sequence_after_cached_tokens_is_refused(embeddings):
    with pytest.raises(ValueError, match=r"input_ids has 2 tokens after 15 cached ones"):
        embeddings(torch.ones(1, 2, dtype=torch.long), past_length=P - 1)


def test_token_type_ids_out_of_range_are_refused(embeddings, input_ids):
    with pytest.raises(ValueError, match=r"token_type_ids must be in \[0, type_vocab_size=2\), found 2"):
        embeddings(input_ids, torch.full_like(input_ids, 2))


def test_token_type_ids_of_wrong_shape_are_refused(embeddings, input_ids):
    with pytest.raises(ValueError, match=r"token_type_ids must have shape \(2, 5\)"):
        embeddings(input_ids, torch.zeros(B, T + 1, dtype=torch.long))


def test_negative_past_length_is_refused(embeddings, input_ids):
    with pytest.raises(ValueError, match=r"past_length must be a non-negative int"):
        embeddings(input_ids, past_length=-1)


def test_odd_hidden_size_is_refused_by_sinusoidal_encoding():
    with pytest.raises(ValueError, match=r"hidden_size must be a positive even int"):
        SinusoidalPositionalEncoding(7, max_length=P)


def test_sinusoidal_encoding_refuses_positions_beyond_max_length():
    with pytest.raises(
        ValueError, match=r"hidden_states has 3 positions after 14 cached ones, more than max_length=16"
    ):
        SinusoidalPositionalEncoding(E, max_length=P)(torch.randn(B, 3, E), past_length=14)
