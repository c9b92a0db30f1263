"""The onnxruntime engine: the decoder's step graph over a GGUF file's own blocks, proved on a tiny file.

A tiny Llama is written as llama.cpp writes it (``gguf_files.py``: the token
table Q8_0, the matrices Q4_1, one Q4_0 and one Q8_0 among them), read by
the package (the float32 reference) and exported by
:mod:`literate_transformer.onnx_export`.  With float32 activations
(``accuracy_level=1``) the graph computes what the package computes, up to
the order of float32 sums; with 8-bit activations (the default) it rounds
them, and the tests bound what that costs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from gguf_files import TINY_LLAMA, byte_level_vocabulary, write_llama_gguf

from literate_transformer.core.gguf import dequantize, read_gguf
from literate_transformer.trained import _llama_tensors, blocks_from_gguf, llama_config_from_gguf, load_decoder

pytest.importorskip("onnxruntime", reason="the onnxruntime engine needs onnxruntime")
pytest.importorskip("onnx", reason="the onnxruntime engine needs onnx")

from literate_transformer.onnx_export import OnnxDecoder, nbits_of, stack_nbits  # noqa: E402

TINY = dict(TINY_LLAMA, max_position_embeddings=64, rope_theta=500.0, bos_token_id=0, eos_token_id=1, pad_token_id=1)
#: Every format the engine multiplies: the table Q8_0, most matrices Q4_1, the values Q4_0, the down projection Q8_0.
MIXED = {"attn_v.weight": "Q4_0", "ffn_down.weight": "Q8_0"}
#: Left-padded prompts of three lengths (ids of the tiny vocabulary).
PROMPTS = torch.tensor([[0, 0, 0, 5, 17, 99, 200], [0, 40, 41, 42, 43, 44, 45], [0, 0, 0, 0, 0, 260, 7]])
MASK = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1]])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, randomize):
    """The tiny file; the package's float32 model of it; the engine with float32 and with 8-bit activations."""
    pytest.importorskip("gguf", reason="gguf-py (llama.cpp's package, which writes the small files) is missing")
    tokens, _ = byte_level_vocabulary()
    reference = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=len(tokens), **TINY))
    randomize(reference)
    path = write_llama_gguf(tmp_path_factory.mktemp("onnx_engine") / "tiny.gguf", reference, MIXED)
    tokenizer, ours = load_decoder(path)
    _, engine = load_decoder(path, engine="onnxruntime")
    gguf = read_gguf(path)
    config = llama_config_from_gguf(gguf)
    blocks = blocks_from_gguf(gguf, config)
    vectors = {
        target: gguf.tensor(name) for name, target, _ in _llama_tensors(gguf, config) if target.endswith("norm.weight")
    }
    exact = OnnxDecoder.from_blocks(config, blocks, vectors, accuracy_level=1)
    return {"path": path, "tokenizer": tokenizer, "ours": ours, "engine": engine, "exact": exact, "blocks": blocks}


# ---------------------------------------------------------------------------
# The mapping of the blocks
# ---------------------------------------------------------------------------
def test_q4_1_blocks_become_matmulnbits_levels_and_offsets_equal_to_the_dequantized_weights(tiny):
    matrix = tiny["blocks"]["model.layers.0.self_attn.q_proj.weight"]
    assert matrix.kind == "Q4_1"
    nbits = nbits_of(matrix)
    dequantized = dequantize(matrix.rows.reshape(-1), "Q4_1", (matrix.rows.shape[0], matrix.columns)).double()
    mapped = torch.from_numpy(nbits.weights(np.float64))
    # d (q - 8) + c with c = m + 8 d rounded once to float32, against fl(d q + m): float32's rounding of each.
    offsets = torch.from_numpy(nbits.offsets).double().repeat_interleave(32, dim=1)
    bound = 2.0**-24 * (offsets.abs() + dequantized.abs())
    assert nbits.bits == 4 and nbits.offsets is not None
    assert bool(((mapped - dequantized).abs() <= bound).all())
    # A level moved by one would be off by d, far beyond the bound.
    assert float(bound.max()) < float(torch.from_numpy(nbits.scales).min()) / 100


@pytest.mark.parametrize(
    ("name", "kind"), [("model.embed_tokens.weight", "Q8_0"), ("model.layers.1.self_attn.v_proj.weight", "Q4_0")]
)
def test_q8_0_and_q4_0_blocks_are_matmulnbits_with_its_default_zero_point_exactly(tiny, name, kind):
    matrix = tiny["blocks"][name]
    assert matrix.kind == kind
    nbits = nbits_of(matrix)
    dequantized = dequantize(matrix.rows.reshape(-1), kind, (matrix.rows.shape[0], matrix.columns))
    assert nbits.offsets is None and nbits.zero == (128 if kind == "Q8_0" else 8)
    assert torch.equal(torch.from_numpy(nbits.weights(np.float32)), dequantized)


def test_stacked_matrices_keep_each_ones_rows_and_a_4_bit_beside_an_8_bit_is_refused(tiny):
    blocks = tiny["blocks"]
    query, key = (nbits_of(blocks[f"model.layers.0.self_attn.{kind}_proj.weight"]) for kind in ("q", "k"))
    stacked = stack_nbits([query, key], "query_key")
    assert np.array_equal(stacked.weights(), np.concatenate([query.weights(), key.weights()]))
    down = nbits_of(blocks["model.layers.0.mlp.down_proj.weight"])
    with pytest.raises(ValueError, match="same bits and columns"):
        stack_nbits([query, down], "mixed")


def test_a_block_format_the_engine_does_not_multiply_is_refused_naming_the_tensor(tiny):
    matrix = tiny["blocks"]["model.layers.0.self_attn.q_proj.weight"]
    with pytest.raises(ValueError, match="'blk.0.attn_q.weight' is Q5_0"):
        nbits_of(type(matrix)("blk.0.attn_q.weight", "Q5_0", matrix.rows, matrix.columns))


# ---------------------------------------------------------------------------
# The graph against the package
# ---------------------------------------------------------------------------
def test_with_float32_activations_the_graphs_next_token_logits_are_the_packages_within_1e_4(tiny):
    with torch.no_grad():
        expected = tiny["ours"](PROMPTS, attention_mask=MASK).logits[:, -1]
    got = tiny["exact"](PROMPTS, MASK)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


def test_with_float32_activations_every_teacher_forced_step_is_the_packages_within_1e_4(tiny):
    sequence = tiny["ours"].generate(PROMPTS[1:2], max_new_tokens=12)
    with torch.no_grad():
        expected = tiny["ours"](sequence).logits[0, PROMPTS.shape[1] - 1 : -1]
    got = tiny["exact"].forced_logits(sequence, PROMPTS.shape[1])
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


def test_with_8_bit_activations_the_logits_stay_within_a_twentieth_of_their_spread(tiny):
    with torch.no_grad():
        expected = tiny["ours"](PROMPTS, attention_mask=MASK).logits[:, -1]
    got = tiny["engine"](PROMPTS, MASK)
    spread = float(expected.max() - expected.min())
    error = float((got - expected).abs().max())
    # Rounding every activation to 8 bits per block moves the scores, a little: not as float32's reordering does.
    assert 1e-4 < error < spread / 20


def test_greedy_ids_on_a_padded_batch_are_the_packages(tiny):
    expected = tiny["ours"].generate(PROMPTS, MASK, max_new_tokens=16)
    assert torch.equal(tiny["exact"].generate(PROMPTS, MASK, max_new_tokens=16), expected)


def test_with_8_bit_activations_teacher_forced_best_tokens_are_the_packages_at_nine_steps_in_ten(tiny):
    # Fed the package's own ids, the engine's best token is the package's except at near ties.
    same = steps = 0
    for row in range(PROMPTS.shape[0]):
        prompt = PROMPTS[row : row + 1, MASK[row].bool()]
        sequence = tiny["ours"].generate(prompt, max_new_tokens=16)
        with torch.no_grad():
            expected = tiny["ours"](sequence).logits[0, prompt.shape[1] - 1 : -1]
        got = tiny["engine"].forced_logits(sequence, prompt.shape[1])
        same, steps = same + int((got.argmax(-1) == expected.argmax(-1)).sum()), steps + expected.shape[0]
    assert steps >= 3 and same >= 0.9 * steps


def test_sampling_under_a_seed_draws_the_packages_ids(tiny):
    options = dict(max_new_tokens=12, do_sample=True, temperature=0.8, top_k=20, top_p=0.9)
    torch.manual_seed(7)
    expected = tiny["ours"].generate(PROMPTS, MASK, **options)
    torch.manual_seed(7)
    assert torch.equal(tiny["exact"].generate(PROMPTS, MASK, **options), expected)


def test_max_length_and_the_chat_templates_output_are_taken_as_the_package_takes_them(tiny):
    tokenizer = tiny["tokenizer"]
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "the cat"}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    expected = tiny["ours"].generate(**chat, max_length=chat["input_ids"].shape[1] + 5)
    assert torch.equal(tiny["exact"].generate(**chat, max_length=chat["input_ids"].shape[1] + 5), expected)


# ---------------------------------------------------------------------------
# What the engine refuses, by name
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"num_beams": 2}, "num_beams=2: the onnxruntime engine does not do beam search"),
        ({"use_cache": False}, "use_cache=False"),
        ({"cache_implementation": "dynamic"}, "cache_implementation='dynamic'"),
        ({"temperature": 0.0, "do_sample": True}, "temperature must be a number > 0"),
    ],
)
def test_what_the_engine_cannot_do_is_refused_by_name(tiny, options, named):
    with pytest.raises(ValueError, match=named):
        tiny["engine"].generate(PROMPTS, MASK, max_new_tokens=2, **options)


def test_prompts_padded_on_the_right_are_refused_naming_the_attention_mask(tiny):
    with pytest.raises(ValueError, match="attention_mask: row 0 .* right padding is refused"):
        tiny["engine"].generate(PROMPTS, MASK.flip(1), max_new_tokens=2)


def test_a_row_without_a_real_token_is_refused_naming_it(tiny):
    mask = MASK.clone()
    mask[2] = 0
    with pytest.raises(ValueError, match="attention_mask: row 2 holds no real token"):
        tiny["engine"].generate(PROMPTS, mask, max_new_tokens=2)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"engine": "tensorflow"}, "engine must be one of"),
        ({"engine": "onnxruntime", "weights": "int4"}, "weights='int4' chooses the torch engine's weights"),
    ],
)
def test_load_decoder_refuses_an_unknown_engine_and_int4_weights_beside_onnxruntime(tiny, options, named):
    with pytest.raises(ValueError, match=named):
        load_decoder(tiny["path"], **options)
