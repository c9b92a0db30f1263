"""The 4-bit path multiplies by the file's own blocks, and its loops write the ids of the weights it reads.

Three claims, on small random matrices and a tiny random Llama written as
llama.cpp writes it (``tests/gguf_files.py``: every matrix Q4_1, the token
table Q8_0; no download):

* **The multiply.**  A packed matrix times ``x`` is the file's weights,
  dequantized in float32, times ``x`` rounded to bfloat16, within
  ``2^-7 (|x| @ M^T) + 2^-8 |x W^T|``, ``M`` being each weight's block's
  largest magnitude: the first term is the scales and zeros rounded to
  bfloat16 (a relative ``2^-9`` each), the second the output rounded to
  bfloat16.  For Q4_1, Q4_0 and Q8_0 (two 4-bit halves), with rows padded.
* **The plumbing.**  Every linear layer of every layer is swapped in place
  for its blocks, and each, read back through an identity, is the float
  path's weight within the first term: the query and key rows permuted on
  the blocks as on the weights.
* **The loops.**  Greedy, sampled and beam decoding over the 4-bit model
  (its own forward, over the static cache) write the ids of an eager model
  built to compute what it computes: the blocks' weights with bfloat16
  scales, each multiply's input and output rounded to bfloat16, the head in
  float32.

Nothing here compiles and nothing is timed (the benchmark does both).
"""

from __future__ import annotations

import copy

import pytest
import torch
import transformers
from families import generate_both_ways
from gguf_files import TINY_LLAMA, byte_level_vocabulary, write_llama_gguf

from literate_transformer.core.gguf import BLOCK_SIZE, dequantize, quantize, read_gguf
from literate_transformer.models.gpt2 import GPT2LMHeadModel
from literate_transformer.parts.int4 import (
    BlockRows,
    PackedLinear,
    RescoredHead,
    levels_of,
    stack_levels,
    swap_to_int4,
)
from literate_transformer.trained import blocks_from_gguf, load_decoder

NEW_TOKENS = 8
TINY = dict(TINY_LLAMA, bos_token_id=0, eos_token_id=None, pad_token_id=1)


def _matrix(kind: str, rows: int, columns: int, seed: int = 0) -> tuple[BlockRows, torch.Tensor]:
    """Random weights stored as ``kind`` blocks, and those blocks dequantized in float32."""
    weights = torch.randn(rows, columns, generator=torch.Generator().manual_seed(seed)) * 0.3 + 0.05
    raw = quantize(weights, kind)
    return BlockRows("w", kind, raw.view(rows, -1), columns), dequantize(raw, kind, (rows, columns))


def _bound(x: torch.Tensor, weights: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """``2^-7 (|x| @ M^T) + 2^-8 |expected|``, ``M`` each weight's block's largest magnitude."""
    largest = weights.abs().reshape(weights.shape[0], -1, BLOCK_SIZE).amax(-1).repeat_interleave(BLOCK_SIZE, 1)
    return 2**-7 * (x.abs() @ largest.T) + 2**-8 * expected.abs()


@pytest.mark.parametrize(("kind", "rows"), [("Q4_1", 48), ("Q4_1", 40), ("Q4_0", 32), ("Q8_0", 40)])
def test_the_packed_multiply_is_the_dequantized_blocks_times_bfloat16_inputs(kind, rows):
    matrix, weights = _matrix(kind, rows, 96)
    packed = PackedLinear.from_levels(levels_of(matrix))
    x = torch.randn(5, 96)
    rounded = x.to(torch.bfloat16).float()
    expected = rounded @ weights.T
    got = packed(x)
    assert got.dtype == torch.float32 and got.shape == (5, rows)
    assert ((got - expected).abs() <= _bound(rounded, weights, expected)).all()
    # Not vacuous: the float32 inputs themselves give other numbers than their bfloat16 rounding.
    assert not torch.equal(x @ weights.T, expected)
    # The leading dimensions are kept, and a bias is added after the multiply.
    bias = torch.randn(rows)
    with_bias = PackedLinear.from_levels(levels_of(matrix), bias)(x.reshape(5, 1, 96))
    torch.testing.assert_close(with_bias, got.reshape(5, 1, rows) + bias)


def test_the_levels_are_the_blocks_numbers_mapped_not_requantized():
    matrix, weights = _matrix("Q4_1", 16, 64)
    levels = levels_of(matrix)
    assert levels.levels.dtype == torch.int32 and 0 <= levels.levels.min() and levels.levels.max() <= 15
    assert levels.scales.shape == levels.zeros.shape == (16, 2)
    # In float32 (no bfloat16 rounding) the mapping w = (q - 8) s + z is exact: z = m + 8 d.
    exact = (levels.levels.float() - 8) * levels.scales.repeat_interleave(32, 1)
    assert torch.equal(exact + levels.zeros.repeat_interleave(32, 1), weights)
    # Q8_0's two halves read two copies of the input, and their weights sum to the block's.
    halves = levels_of(_matrix("Q8_0", 16, 64)[0])
    assert halves.copies == 2 and halves.levels.shape == (16, 128)


def test_matrices_that_share_an_input_stack_by_rows_and_mixed_formats_are_refused():
    query, key = _matrix("Q4_1", 32, 64, seed=1), _matrix("Q4_0", 16, 64, seed=2)
    stacked = stack_levels([levels_of(query[0]), levels_of(key[0])])
    torch.testing.assert_close(stacked.weights(), torch.cat([query[1], key[1]]), atol=2**-7, rtol=0)
    with pytest.raises(ValueError, match="all be 4-bit or all Q8_0"):
        stack_levels([levels_of(query[0]), levels_of(_matrix("Q8_0", 16, 64)[0])])
    with pytest.raises(ValueError, match="tensor 'w' is F16: the 4-bit path packs the file's Q4_0, Q4_1, Q8_0"):
        levels_of(BlockRows("w", "F16", torch.zeros(4, 128, dtype=torch.uint8), 64))


# ---------------------------------------------------------------------------
# A tiny random Llama, written as llama.cpp writes it
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory, randomize):
    """The tiny file, and the package's two readings of it: float32 and 4-bit."""
    pytest.importorskip("gguf", reason="gguf-py (llama.cpp's package, which writes the small files) is missing")
    tokens, _ = byte_level_vocabulary()
    torch.manual_seed(0)
    reference = randomize(transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=len(tokens), **TINY)))
    path = write_llama_gguf(tmp_path_factory.mktemp("int4") / "tiny.gguf", reference)
    _, float32 = load_decoder(path)
    _, int4 = load_decoder(path, weights="int4")
    return {"path": path, "float32": float32, "int4": int4}


def test_every_linear_layer_is_swapped_for_its_blocks_and_reads_as_the_float_paths_weight(tiny):
    float32, int4 = tiny["float32"], tiny["int4"]
    width = float32.config.hidden_size
    linears = [name for name, module in float32.named_modules() if isinstance(module, torch.nn.Linear)]
    packed = {name: module for name, module in int4.named_modules() if isinstance(module, PackedLinear)}
    # Every linear layer of the layers, in place, under its own name; the head's blocks inside the head.
    assert set(packed) == {name for name in linears if name != "lm_head"} | {"lm_head.packed"}
    assert len(packed) == 7 * float32.config.num_hidden_layers + 1
    for name, multiply in packed.items():
        if name == "lm_head.packed":
            continue
        weight = float32.get_submodule(name).weight
        # An identity's rows through the multiply: the weights, transposed, rounded to bfloat16 on the way out.
        read = multiply(torch.eye(weight.shape[1])).T
        torch.testing.assert_close(read, weight, atol=2**-7 * weight.abs().max().item(), rtol=2**-8)
    # The head (Q8_0, tied to the token table): the same, and its best tokens rescored by the float32 table,
    # which stays tied to the embeddings.
    head = int4.lm_head
    assert isinstance(head, RescoredHead) and head.weight is int4.model.embed_tokens.weight
    read = head.packed(torch.eye(width)).T
    table = float32.model.embed_tokens.weight
    torch.testing.assert_close(read, table, atol=2**-7 * table.abs().max().item(), rtol=2**-8)
    last = torch.randn(2, 1, width)
    scores, exact = head(last), last @ table.T
    best = head.packed(last).topk(head.candidates, dim=-1).indices
    torch.testing.assert_close(scores.gather(-1, best), exact.gather(-1, best), atol=1e-5, rtol=0)


def _emulation(tiny) -> torch.nn.Module:
    """An eager model computing what the 4-bit steps compute: each linear layer's weights are its blocks with
    bfloat16 scales, its input and output rounded to bfloat16; the head (tied to the table) left in float32."""
    model = copy.deepcopy(tiny["float32"])
    blocks = blocks_from_gguf(read_gguf(tiny["path"]), model.config)
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":
            with torch.no_grad():
                module.weight.copy_(levels_of(blocks[f"{name}.weight"]).weights())
            module.register_forward_pre_hook(lambda _, args: (args[0].to(torch.bfloat16).float(),))
            module.register_forward_hook(lambda _, args, output: output.to(torch.bfloat16).float())
    return model


DECODINGS = {
    "greedy": {},
    "sampled": {"do_sample": True, "temperature": 0.8, "top_k": 7},
    "beam": {"num_beams": 3},
}


@pytest.mark.parametrize("decoding", list(DECODINGS))
def test_the_loops_over_the_4_bit_steps_write_the_ids_of_the_weights_they_read(tiny, decoding, monkeypatch):
    int4 = tiny["int4"]
    emulation = _emulation(tiny)
    input_ids = torch.randint(3, int4.config.vocab_size, (2, 5), generator=torch.Generator().manual_seed(4))
    attention_mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    written, expected, steps = generate_both_ways(
        emulation, int4, input_ids, attention_mask, NEW_TOKENS, DECODINGS[decoding], 5, monkeypatch
    )
    assert torch.equal(written, expected), f"{decoding}:\n4-bit {written.tolist()}\neager {expected.tolist()}"
    assert steps >= NEW_TOKENS  # the 4-bit steps ran
    if decoding == "greedy":
        # Not vacuous: the float32 weights write other ids, or the same ids from other scores.
        float32 = tiny["float32"].generate(input_ids, attention_mask, NEW_TOKENS)
        with torch.inference_mode():
            float32_scores = tiny["float32"](written).logits
            int4_scores = emulation(written).logits
        assert not torch.equal(float32, written) or not torch.equal(float32_scores, int4_scores)


# ---------------------------------------------------------------------------
# What is refused
# ---------------------------------------------------------------------------
def test_bad_weights_are_refused_by_name(tiny, tmp_path):
    path = tiny["path"]
    with pytest.raises(ValueError, match=r"weights must be one of \('float32', 'int4'\), got 'int8'"):
        load_decoder(path, weights="int8")
    with pytest.raises(TypeError, match="weights must be a string, one of .* got int"):
        load_decoder(path, weights=4)
    with pytest.raises(FileNotFoundError, match="nowhere.gguf"):
        load_decoder(tmp_path / "nowhere.gguf", weights="int4")
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(ValueError, match="weights='int4' reads a GGUF file's own blocks; .* is a checkpoint folder"):
        load_decoder(folder, weights="int4")


def test_a_matrix_stored_in_floats_is_refused_naming_it(tiny, tmp_path):
    tokens, _ = byte_level_vocabulary()
    reference = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=len(tokens), **TINY))
    path = write_llama_gguf(tmp_path / "f32.gguf", reference, {"attn_k.weight": "F32"})
    with pytest.raises(ValueError, match="tensor 'blk.0.attn_k.weight' is F32: the 4-bit path packs"):
        load_decoder(path, weights="int4")


def test_the_swap_refuses_what_it_cannot_pack_leaving_the_model_as_it_was_and_keeps_a_float_head(tiny):
    model = copy.deepcopy(tiny["float32"])
    blocks = blocks_from_gguf(read_gguf(tiny["path"]), model.config)
    with pytest.raises(TypeError, match="blocks must be a mapping of parameter names to BlockRows, got list"):
        swap_to_int4(model, list(blocks))
    with pytest.raises(ValueError, match="candidates must be a positive int, got 0"):
        swap_to_int4(model, blocks, candidates=0)
    gpt2 = GPT2LMHeadModel(transformers.GPT2Config(vocab_size=20, n_embd=32, n_layer=1, n_head=2))
    with pytest.raises(ValueError, match="GPT2LMHeadModel cannot decode over a static cache"):
        swap_to_int4(gpt2, blocks)
    up = "model.layers.1.mlp.up_proj.weight"
    with pytest.raises(ValueError, match=f"no blocks for {up}: the 4-bit path needs every matrix"):
        swap_to_int4(model, {name: rows for name, rows in blocks.items() if name != up})
    key, query = "model.layers.0.self_attn.k_proj.weight", blocks["model.layers.0.self_attn.q_proj.weight"]
    with pytest.raises(ValueError, match=rf"the blocks of {key} are a \(64, 64\) matrix; the model's is \(32, 64\)"):
        swap_to_int4(model, {**blocks, key: query})
    # Refused before anything was swapped: the model is still the float32 one.
    assert not any(isinstance(module, PackedLinear) for module in model.modules())
    # A table stored in floats is not re-quantized: the head stays the model's own, in float32.
    table = model.lm_head.weight.detach()
    floats = BlockRows("token_embd.weight", "F32", table.contiguous().view(torch.uint8), table.shape[1])
    head = model.lm_head
    assert swap_to_int4(model, {**blocks, "lm_head.weight": floats}).lm_head is head
    assert isinstance(model.model.layers[0].mlp.down_proj, PackedLinear)


def test_packed_bytes_needs_a_model_with_4_bit_weights():
    from literate_transformer.parts.int4 import packed_bytes

    with pytest.raises(ValueError, match=r"model must decode over 4-bit weights .*got Linear"):
        packed_bytes(torch.nn.Linear(2, 2))
