"""Chapter 16's figures draw what the package computes: the tiled loop's running values, the split, the timings."""

from __future__ import annotations

import math

import pytest
import torch
import transformers

import literate_transformer as lt
from literate_transformer.fast.flash import flash_attention
from literate_transformer.figures.fast import (
    AttentionTimings,
    MachineRates,
    MultiplyTimings,
    StepProfile,
    _native_stderr_silenced,
    _owners,
    machine_description,
    measure_machine_rates,
    memory_caches,
    plot_attention_timings,
    plot_decoding_budget,
    plot_decoding_rates,
    plot_generation_timings,
    plot_online_softmax,
    plot_tensor_parallel_split,
    profile_decoding_step,
    time_attention_kernels,
    time_generation,
    time_step_multiplies,
)
from literate_transformer.models.bert import BertLayer
from literate_transformer.models.llama import LlamaForCausalLM


@pytest.fixture
def head():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(3, 10, 4, generator=generator).unbind(0)  # one head: T = S = 10, D = 4


def test_the_history_holds_each_tiles_running_values_and_the_last_gives_the_output(head):
    query, key, value = (tensor[None, None] for tensor in head)
    history = []
    output = flash_attention(query, key, value, block_size=4, history=history)
    assert len(history) == math.ceil(10 / 4)
    running_max, running_sum, accumulator = history[-1]
    torch.testing.assert_close(running_max[..., 0], (query @ key.transpose(-2, -1) / 2).amax(dim=-1))
    torch.testing.assert_close(accumulator / running_sum, output)
    with pytest.raises(TypeError, match="history"):
        flash_attention(query, key, value, history=())


def test_the_online_softmax_figure_draws_the_kernels_running_values(head):
    query, key, value = head
    figure = plot_online_softmax(query, key, value, block_size=4, queries=range(2, 5))
    maximum, total, size, distance = figure.subfigs[1].axes
    scores = query @ key.T / 2
    # One line per query followed (and the eager stars); each line has a point per tile, the last the row's max.
    lines = [line for line in maximum.get_lines() if line.get_label().startswith("query")]
    assert [line.get_label() for line in lines] == ["query 2", "query 3", "query 4"]
    for line, row in zip(lines, range(2, 5), strict=True):
        assert list(line.get_xdata()) == [1, 2, 3]
        assert line.get_ydata()[-1] == pytest.approx(scores[row].max().item(), abs=1e-6)
    assert distance.get_yscale() == "log" and all(line.get_ydata()[-1] < 1e-5 for line in distance.get_lines())
    assert "largest difference from eager" in figure.subfigs[1]._suptitle.get_text()
    assert total.get_title().startswith("running sum") and size.get_title().startswith("accumulator")
    with pytest.raises(ValueError, match="queries"):
        plot_online_softmax(query, key, value, block_size=4, queries=range(8, 12))
    with pytest.raises(TypeError, match="queries"):
        plot_online_softmax(query, key, value, block_size=4, queries=[2, 3])
    with pytest.raises(ValueError, match="block_size"):
        plot_online_softmax(query, key, value, block_size=0, queries=range(2))


def test_the_split_keeps_rows_of_the_column_parallel_weights_and_columns_of_the_row_parallel_ones():
    torch.manual_seed(0)
    layer = BertLayer(lt.TransformerConfig(hidden_size=8, num_attention_heads=2, intermediate_size=16)).eval()
    whole = layer.attention.self.query.weight.detach()
    owners = _owners(whole, [whole[4:], whole[:4]], "rows")
    assert owners[:4].eq(1).all() and owners[4:].eq(0).all()
    columns = _owners(whole, [whole[:, :4], whole[:, 4:]], "columns")
    assert columns[:, :4].eq(0).all() and columns[:, 4:].eq(1).all()
    figure = plot_tensor_parallel_split(layer, world_size=2)
    titles = [ax.get_title() for ax in figure.axes]
    assert (
        sum("keeps rows" in title for title in titles) == 4 and sum("keeps columns" in title for title in titles) == 2
    )
    assert [text.get_text() for text in figure.legends[0].get_texts()] == ["process 0", "process 1"]
    with pytest.raises(TypeError, match="layer"):
        plot_tensor_parallel_split(layer.attention)
    with pytest.raises(ValueError, match="world_size"):
        plot_tensor_parallel_split(layer, world_size=3)


def test_the_attention_timings_are_positive_and_plotted_as_measured():
    timings = time_attention_kernels([8, 16], num_heads=1, head_dim=4, repeats=1, block_size=4)
    assert isinstance(timings, AttentionTimings) and set(timings.seconds) == {"eager", "sdpa", "tiled"}
    assert all(value > 0 for values in timings.seconds.values() for value in values)
    ax = plot_attention_timings(timings).axes[0]
    assert len(ax.get_lines()) == 3 and ax.get_xscale() == "log"
    for line, seconds in zip(ax.get_lines(), timings.seconds.values(), strict=True):
        assert list(line.get_xdata()) == [8, 16]
        assert list(line.get_ydata()) == pytest.approx([1000 * value for value in seconds])
    assert timings.machine in ax.get_title()
    with pytest.raises(TypeError, match="lengths"):
        time_attention_kernels(128)
    with pytest.raises(TypeError, match="timings"):
        plot_attention_timings(timings.seconds)


def test_generation_with_and_without_the_cache_writes_the_same_tokens_and_is_plotted_as_measured():
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0
    )
    model = lt.GPT2LMHeadModel(config)
    timings = time_generation(model, torch.tensor([[3, 5, 7]]), max_new_tokens=4, repeats=1)
    assert timings.same_tokens and timings.prompt_length == 3
    assert timings.model == "GPT2LMHeadModel, 1 layer of width 16"
    assert len(timings.with_cache) == len(timings.without_cache) == 4
    assert all(value > 0 for value in timings.with_cache + timings.without_cache)
    ax = plot_generation_timings(timings).axes[0]
    with_cache, without = ax.get_lines()
    assert list(with_cache.get_ydata()) == pytest.approx([1000 * value for value in timings.with_cache])
    assert list(without.get_ydata()) == pytest.approx([1000 * value for value in timings.without_cache])
    assert with_cache.get_label().startswith("with the cache") and "tokens/s" in without.get_label()
    with pytest.raises(ValueError, match="prompt"):
        time_generation(model, torch.tensor([[3], [5]]), max_new_tokens=2)


def test_the_machine_is_named_with_torchs_version_and_the_dtype():
    description = machine_description(torch.bfloat16)
    assert torch.__version__ in description and description.endswith("bfloat16") and "cores" in description
    with pytest.raises(TypeError, match="dtype"):
        machine_description("float32")


def tiny_llama(tie_word_embeddings: bool = False) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=40,
        hidden_size=24,
        intermediate_size=40,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=tie_word_embeddings,
    )
    return LlamaForCausalLM(config)


def test_a_decoding_step_is_profiled_both_ways_with_the_same_seven_multiplies_a_layer():
    model = tiny_llama().train()
    steps = profile_decoding_step(model, context=5, repeats=1)
    assert model.training, "the model is left in the mode it was in"
    assert set(steps) == {"eager", "static cache"}
    # Seven projections a layer and the head, both ways: the static cache runs the model's own forward.
    assert steps["eager"].matmul_calls == steps["static cache"].matmul_calls == 7 * 2 + 1
    assert steps["static cache"].operators_called < steps["eager"].operators_called
    for step in steps.values():
        assert isinstance(step, StepProfile) and step.seconds > 0
        assert 0 < step.matmul_seconds <= step.operator_seconds
        assert step.top and all(seconds >= 0 and calls > 0 for _, seconds, calls in step.top)
    with pytest.raises(TypeError, match="static cache"):
        profile_decoding_step(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="context"):
        profile_decoding_step(model, context=0)


def test_the_profilers_lines_on_the_error_stream_are_silenced_and_the_stream_restored(capfd):
    import os

    with _native_stderr_silenced():
        os.write(2, b"from native code\n")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_the_machines_rates_are_positive_and_named():
    rates = measure_machine_rates(megabytes=1, size=16, repeats=1)
    assert isinstance(rates, MachineRates) and rates.streaming_bytes_per_s > 0 and rates.matmul_flops_per_s > 0
    assert rates.machine == machine_description(torch.float32)
    with pytest.raises(ValueError, match="megabytes"):
        measure_machine_rates(megabytes=0)


def test_the_multiplies_are_every_linear_weight_once_the_tied_head_the_token_tables_place():
    model = tiny_llama(tie_word_embeddings=True)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    timings = time_step_multiplies(model, batch_sizes=(1, 2), repeats=1)
    matrices = [parameter for parameter in model.parameters() if parameter.dim() == 2]
    assert timings.weight_numbers == sum(matrix.numel() for matrix in matrices)
    assert timings.weight_bytes == 4 * timings.weight_numbers and timings.batch_sizes == (1, 2)
    assert len(timings.seconds) == 2 and all(seconds > 0 for seconds in timings.seconds)
    with pytest.raises(TypeError, match="batch_sizes"):
        time_step_multiplies(model, batch_sizes=4)
    with pytest.raises(ValueError, match="no linear layer"):
        time_step_multiplies(torch.nn.LayerNorm(3))


def test_the_budget_sets_each_step_against_reading_and_arithmetic_and_draws_the_roofline():
    rates = MachineRates(streaming_bytes_per_s=10e9, matmul_flops_per_s=100e9, machine="a test machine")
    steps = {
        "eager": StepProfile(0.050, 0.045, 0.040, 15, 900, [("aten::mm", 0.040, 15)]),
        "static cache": StepProfile(0.042, 0.044, 0.040, 9, 600, [("aten::mm", 0.040, 9)]),
    }
    multiplies = MultiplyTimings((1, 8), [0.040, 0.050], 100_000_000, 400_000_000, "a test machine")
    figure = plot_decoding_budget(400_000_000, 2e8, rates, steps, multiplies)
    bars, roofline = figure.axes
    widths = [patch.get_width() for patch in bars.patches]
    # Reading 400 MB at 10 GB/s: 40 ms; 200 MFLOP at 100 GFLOP/s: 2 ms; the multiplies alone: 40 ms.
    assert widths[:3] == pytest.approx([40.0, 2.0, 40.0])
    # Each step: its multiplies, its other operators, the rest (none where the operators took longer).
    assert widths[3:6] == pytest.approx([40.0, 5.0, 5.0]) and widths[6:9] == pytest.approx([40.0, 4.0, 0.0])
    # Each measured bar says the rate at which it read the weights: 400 MB in 40 ms is 10 GB/s.
    texts = {text.get_text(): text.get_position()[0] for text in bars.texts}
    assert " 40.0 ms: 10.0 GB/s read" in texts and " 50.0 ms: 8.0 GB/s read" in texts
    # A step's label sits past its bar, which its operators may make longer than the step.
    assert texts[" 42.0 ms: 9.5 GB/s read"] == pytest.approx(44.0)
    points = next(line for line in roofline.get_lines() if line.get_label() == "the multiplies, measured")
    assert list(points.get_xdata()) == pytest.approx([0.5, 4.0])  # B / 2 operations per byte
    assert list(points.get_ydata()) == pytest.approx([2 * 1e8 / 0.040 / 1e9, 2 * 8e8 / 0.050 / 1e9])
    assert "a test machine" in figure.get_suptitle()
    with pytest.raises(TypeError, match="rates"):
        plot_decoding_budget(400_000_000, 2e8, (10e9, 100e9), steps, multiplies)
    with pytest.raises(TypeError, match="steps"):
        plot_decoding_budget(400_000_000, 2e8, rates, {}, multiplies)


def test_the_caches_are_read_from_linuxs_description_of_the_processor(tmp_path):
    for index, (level, kind, size) in enumerate(
        [("1", "Data", "32K"), ("1", "Instruction", "32K"), ("2", "Unified", "1024K"), ("3", "Unified", "32M")]
    ):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (folder / name).write_text(value + "\n")
    assert memory_caches(tmp_path) == {"L1d": 32 * 2**10, "L1i": 32 * 2**10, "L2": 2**20, "L3": 32 * 2**20}
    # Another system: nothing to read, nothing guessed.
    assert memory_caches(tmp_path / "absent") == {}


def test_the_decoding_rates_are_drawn_against_their_byte_floors_with_the_rate_each_read_at():
    rates = {"float32": 25.0, "4-bit": 50.0}
    figure = plot_decoding_rates(
        rates, {"float32": 400_000_000, "4-bit": 100_000_000}, {"float32 floor": 40.0, "4-bit floor": 160.0}
    )
    (ax,) = figure.axes
    assert [patch.get_width() for patch in ax.patches] == [25.0, 50.0]
    texts = [text.get_text() for text in ax.texts]
    # 25 tokens/s of 400 MB each: 10 GB/s; 50 tokens/s of 100 MB: 5 GB/s.
    assert texts == [" 25.0 tokens/s: 10.0 GB/s read", " 50.0 tokens/s: 5.0 GB/s read"]
    floors = [line.get_xdata()[0] for line in ax.get_lines()]
    assert floors == [40.0, 160.0]
    assert [label.get_text() for label in ax.get_yticklabels()] == ["float32", "4-bit"]
    with pytest.raises(ValueError, match="bytes_per_token must give"):
        plot_decoding_rates(rates, {"float32": 1}, {})
    with pytest.raises(ValueError, match="'4-bit': a rate, a floor or a byte count must be a positive number"):
        plot_decoding_rates(rates, {"float32": 1, "4-bit": 0}, {})
