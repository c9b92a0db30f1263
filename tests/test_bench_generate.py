"""The generation benchmark: the bytes a step reads, the agreement it reports, and its target's verdict."""

from __future__ import annotations

import copy

import bench_generate as bench
import pytest
import torch
import transformers
from shapes import LLAMA_GROUPED

from literate_transformer.models.llama import LlamaForCausalLM


@pytest.mark.parametrize("tied", [True, False])
def test_a_step_reads_every_parameter_once_a_tied_head_counted_once(tied):
    model = LlamaForCausalLM(transformers.LlamaConfig(**LLAMA_GROUPED, tie_word_embeddings=tied))
    table = model.model.embed_tokens.weight.numel()
    counted = sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))
    assert bench.weight_bytes(model) == 4 * (counted - table if tied else counted)
    # The multiplies alone: every 2-D weight once, the head included (tied or not), the token table not twice.
    assert bench.multiplies_alone_s(model, batch_size=2, repeats=1) > 0


def test_agreement_counts_the_tokens_before_the_first_difference():
    assert bench.leading_agreement([5, 6, 7, 8], [5, 6, 9, 8]) == 2
    assert bench.leading_agreement([5, 6], [5, 6]) == 2
    assert bench.leading_agreement([4], [5]) == 0


def _shape(batch_size: int, speedups: dict[str, float], same: bool = True) -> dict:
    paths = {"transformers": {"vs_transformers": 1.0, "ids_equal_transformers": True}}
    for name, speedup in speedups.items():
        paths[name] = {"vs_transformers": speedup, "ids_equal_transformers": same}
    return {"batch_size": batch_size, "paths": paths}


def test_the_target_reads_batch_one_at_its_worst_prompt_and_wants_the_same_ids():
    shapes = [_shape(1, {"ours static": 3.4}), _shape(1, {"ours static": 3.1}), _shape(8, {"ours static": 1.2})]
    (static,) = bench.evaluate_targets(shapes)
    assert static["measured"] == pytest.approx(3.1) and static["met"]
    # Fast enough with other ids is not met; a compiled path gets its own verdict.
    shapes = [_shape(1, {"ours static": 3.5, "ours compiled": 2.0}, same=False)]
    static, compiled = bench.evaluate_targets(shapes)
    assert not static["met"] and compiled["measured"] == pytest.approx(2.0) and not compiled["met"]


def test_the_table_shows_each_path_its_ratio_and_its_agreement():
    entry = dict(tokens_per_s=30.0, vs_transformers=1.5, ids_equal_transformers=True)
    other = dict(tokens_per_s=90.0, vs_transformers=4.5, ids_equal_transformers=False)
    other["tokens_agreeing_with_transformers"] = 7
    shape = {
        "batch_size": 1,
        "prompt_length": 32,
        "paths": {"transformers": {**entry, "tokens_per_s": 20.0, "vs_transformers": 1.0}, "ours static": entry},
        "limits": {"streaming_tokens_per_s": 45.0, "multiplies_alone_tokens_per_s": 41.0},
    }
    shape["paths"]["llama.cpp"] = other
    results = {"shapes": [shape], "weight_bytes": 538e6, "streaming_gb_per_s": 24.0, "targets": []}
    table = bench.markdown_table(results)
    assert (
        "| 1 | 32 | 20.0 (1.00x, same ids) | 30.0 (1.50x, same ids) | 90.0 (4.50x, 7 ids agree) | 45.0 | 41.0 |"
        in table
    )


def test_the_4_bit_bytes_count_every_packed_multiply_and_the_head_at_5_bits_a_weight():
    from literate_transformer.core.gguf import quantize
    from literate_transformer.parts.int4 import BlockRows, PackedLinear, levels_of

    raw = quantize(torch.randn(32, 64), "Q4_1")
    matrix = BlockRows("w", "Q4_1", raw.view(32, -1), 64)
    model = torch.nn.ModuleList([PackedLinear.from_levels(levels_of(matrix)) for _ in range(9)])
    # Nine matrices of 32 x 64 weights, each 4 bits and its group's bfloat16 scale and zero: 5 bits a weight.
    assert bench.int4_weight_bytes(model) == 9 * 32 * 64 * 5 // 8


@torch.no_grad()
def test_teacher_forcing_feeds_both_models_the_same_ids_and_compares_every_steps_scores():
    config = transformers.LlamaConfig(**LLAMA_GROUPED)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    sequences = torch.randint(3, config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(1))
    same = bench.teacher_forced_differences(model, model, sequences, prompt_length=4)
    assert same["steps"] == 3 and same["largest"] == 0.0 and same["steps_with_the_same_best_token"] == 3
    other = copy.deepcopy(model)
    other.lm_head.weight.mul_(1.5)
    changed = bench.teacher_forced_differences(model, other, sequences, prompt_length=4)
    assert len(changed["largest_per_step"]) == len(changed["mean_per_step"]) == 3
    assert changed["largest"] > changed["mean"] > 0


def test_the_table_shows_the_4_bit_paths_agreement_with_float32_and_their_teacher_forced_scores():
    entry = dict(tokens_per_s=30.0, vs_transformers=1.5, ids_equal_transformers=True)
    int4 = dict(tokens_per_s=60.0, vs_transformers=3.0, ids_equal_transformers=False)
    int4.update(tokens_agreeing_with_transformers=5, tokens_agreeing_with_float32=5)
    forced = {"largest": 0.4, "mean": 0.05, "steps_with_the_same_best_token": 127, "steps": 128}
    shape = {
        "batch_size": 1,
        "prompt_length": 32,
        "paths": {"transformers": {**entry, "tokens_per_s": 20.0, "vs_transformers": 1.0}, "ours int4": int4},
        "limits": {"streaming_tokens_per_s": 45.0, "multiplies_alone_tokens_per_s": 41.0},
        "int4_teacher_forced": forced,
    }
    results = {"shapes": [shape], "weight_bytes": 538e6, "int4_weight_bytes": 102e6, "streaming_gb_per_s": 24.0}
    table = bench.markdown_table(results)
    assert "| 1 | 32 | 20.0 (1.00x, same ids) | 60.0 (3.00x, 5 ids agree, 5 as float32) | 45.0 | 41.0 |" in table
    assert "| B=1, prompt 32 | 0.400 | 0.0500 | 127 of 128 steps |" in table
    assert "4-bit weights 102 MB" in table and "a streaming limit of 235.3 tokens/s at batch 1" in table
