r"""
How fast is each way of writing attention?
==========================================

The same attention sub-layer (queries, keys and values, the weights, the
weighted sum of values and the output projection :math:`W^O`) can be written
three ways in this package:

* **the book's heads**: :class:`literate_transformer.book.attention.MultiHeadAttention` keeps
  one small :class:`~literate_transformer.book.attention.AttentionHead` per head, each with
  its own ``q``, ``k`` and ``v`` layers, so it runs :math:`3H` small matrix
  multiplies for the projections;
* **BERT's fused projections**: :class:`literate_transformer.models.bert.BertSelfAttention`
  with ``attn_implementation="eager"`` projects all heads at once (three
  :math:`E \times E` multiplies), then computes the weights step by step;
* **fused projections + SDPA**: the same module with
  ``attn_implementation="sdpa"`` hands the weights-times-values part to
  :func:`torch.nn.functional.scaled_dot_product_attention`, which never
  stores the ``(B, H, T, S)`` weight tensor when it can avoid it.

All three hold the *same* weights (the pretrained checkpoint's first layer,
split into heads with :func:`~literate_transformer.interop.bert_attention_to_book`),
so they compute the same function; this example checks that, then times them
across sequence lengths.

Timing method: for every length, each implementation is warmed up, then
timed round-robin (each repetition calls all three, in an order rotated by
one each time, so background load hits them alike); the median is reported
with the spread of the repetitions, from the fastest to the slowest.  On a
GPU (with ``LT_GALLERY_SCALE=gpu``) the run uses bf16 and longer sequences
and reports TFLOP/s.

The numbers are from the machine that built this page, which may be busy
with other work, and they come from a handful of repetitions: where the
spreads of two implementations overlap, their order at that length is noise,
and the example says so.  For careful numbers (the whole model, more
repetitions, in one process), see :doc:`/benchmarks`, made by
``benchmarks/bench_bert.py``.
"""

# %%
# Set-up
# ------
import os
import statistics
import time

import matplotlib.pyplot as plt
import torch

import literate_transformer as lt
from literate_transformer.visualize import show

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cpu":
    # One CPU thread, as the site's build runs the examples: small models run no slower, and timings are steady.
    torch.set_num_threads(1)
large = os.environ.get("LT_GALLERY_SCALE", "cpu") in ("gpu", "large")
on_gpu = large and device == "cuda"
dtype = torch.bfloat16 if on_gpu else torch.float32

if on_gpu:
    lengths, batch_size, repeats = [128, 256, 512, 1024, 2048, 4096], 4, 20
elif large:
    lengths, batch_size, repeats = [32, 64, 128, 256, 512, 1024, 2048], 4, 9
else:
    lengths, batch_size, repeats = [32, 64, 128, 256, 512], 2, 5

# %%
# Three modules, one set of weights
# ---------------------------------
# ``attention.self`` is BERT's fused attention and ``attention.output.dense``
# its :math:`W^O`; the SDPA model is a second copy of the checkpoint with the
# other ``attn_implementation``.
eager_model = lt.BertModel.from_pretrained(attn_implementation="eager").to(device=device, dtype=dtype)
sdpa_model = lt.BertModel.from_pretrained(attn_implementation="sdpa").to(device=device, dtype=dtype)
fused = eager_model.encoder.layer[0].attention
fused_sdpa = sdpa_model.encoder.layer[0].attention
# The split copy is built on the CPU in fp32: move it next to the others.
book = lt.interop.bert_attention_to_book(fused).to(device=device, dtype=dtype)

implementations = {
    "book: one AttentionHead per head": lambda x: book(x).hidden_states,
    "BERT: fused projections (eager)": lambda x: fused.output.dense(fused.self(x)[0]),
    "BERT: fused + scaled_dot_product_attention": lambda x: fused_sdpa.output.dense(fused_sdpa.self(x)[0]),
}

config = eager_model.config
with torch.inference_mode():
    x = torch.randn(batch_size, 16, config.hidden_size, device=device, dtype=dtype)  # (B, T, E)
    outputs = {name: run(x).float() for name, run in implementations.items()}
reference = outputs["book: one AttentionHead per head"]
for name, output in outputs.items():
    print(f"{name:44s} max |difference| from the book's: {(output - reference).abs().max():.1e}")


# %%
# Timing
# ------
# FLOPs of one call (matrix multiplies only, 2 per multiply-add): the four
# :math:`E \times E` projections, :math:`8 B T E^2`, plus
# :math:`Q K^\top` and the weighted sum, :math:`4 B T^2 E`.
def attention_flops(batch: int, length: int, hidden: int) -> int:
    return 8 * batch * length * hidden**2 + 4 * batch * length**2 * hidden


def synchronize() -> None:
    if device == "cuda":
        torch.cuda.synchronize()


# %%
# At each length, one warm-up call of each implementation, then ``repeats``
# rounds that call all three, in an order that rotates from round to round
# (so that none always runs first); each call is timed alone, the device
# synchronised around it.
names = list(implementations)
medians = {name: [] for name in names}
spreads = {name: [] for name in names}  # (fastest, slowest) repetition
print("median time of a call [fastest-slowest of the repetitions], for each implementation:")
print("T        " + ", ".join(names))
with torch.inference_mode():
    for length in lengths:
        x = torch.randn(batch_size, length, config.hidden_size, device=device, dtype=dtype)  # (B, T, E)
        for run in implementations.values():  # warm-up
            run(x)
        times = {name: [] for name in names}
        for repetition in range(repeats):
            shift = repetition % len(names)
            for name in names[shift:] + names[:shift]:
                synchronize()
                start = time.perf_counter()
                implementations[name](x)
                synchronize()
                times[name].append(time.perf_counter() - start)
        for name in names:
            medians[name].append(statistics.median(times[name]))
            spreads[name].append((min(times[name]), max(times[name])))
        summary = ", ".join(
            f"{medians[name][-1] * 1e3:7.2f} ms [{spreads[name][-1][0] * 1e3:.2f}-{spreads[name][-1][1] * 1e3:.2f}]"
            for name in names
        )
        print(f"T = {length:5d}: {summary}")


# %%
# Signal or noise?
# ----------------
# At each length, two implementations are told apart only when their spreads
# do not overlap: the slowest repetition of one is faster than the fastest of
# the other.  Otherwise their order at that length is noise.
def resolved(a: str, b: str, index: int) -> bool:
    (low_a, high_a), (low_b, high_b) = spreads[a][index], spreads[b][index]
    return high_a < low_b or high_b < low_a


short = dict(zip(names, ("book", "fused", "fused+SDPA"), strict=True))
for index, length in enumerate(lengths):
    pairs = [(a, b) for k, a in enumerate(names) for b in names[k + 1 :]]
    verdicts = []
    for a, b in pairs:
        if resolved(a, b, index):
            faster, slower = (a, b) if medians[a][index] < medians[b][index] else (b, a)
            verdicts.append(f"{short[faster]} faster than {short[slower]}")
        else:
            verdicts.append(f"{short[a]} vs {short[b]}: noise")
    print(f"T = {length:5d}: " + "; ".join(verdicts))

# %%
# The plot
# --------
# Left: median time per call, the shaded band from the fastest to the slowest
# repetition.  Right: achieved FLOP/s (TFLOP/s on a GPU, GFLOP/s on a CPU),
# the work divided by the median time.
unit, unit_name = (1e12, "TFLOP/s") if device == "cuda" else (1e9, "GFLOP/s")
fig, (ax_time, ax_rate) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
for name in names:
    ax_time.plot(lengths, [t * 1e3 for t in medians[name]], marker="o", label=name)
    ax_time.fill_between(
        lengths, [low * 1e3 for low, _ in spreads[name]], [high * 1e3 for _, high in spreads[name]], alpha=0.2
    )
    rates = [
        attention_flops(batch_size, n, config.hidden_size) / t / unit
        for n, t in zip(lengths, medians[name], strict=True)
    ]
    ax_rate.plot(lengths, rates, marker="o", label=name)
for ax in (ax_time, ax_rate):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length T")
ax_time.set_yscale("log")
ax_time.set_ylabel("median time per call (ms)")
ax_rate.set_ylabel(f"achieved {unit_name}")
ax_time.legend(fontsize=8)
fig.suptitle(
    f"One attention sub-layer, batch {batch_size}, hidden size {config.hidden_size}, "
    f"{config.num_attention_heads} heads, {str(dtype).removeprefix('torch.')} on {device}"
)
show()

# %%
# Speed-ups at the longest length
# -------------------------------
book = "book: one AttentionHead per head"
for name in names:
    ratio = medians[book][-1] / medians[name][-1]
    note = "" if name == book or resolved(name, book, -1) else " (within the noise)"
    print(f"{name:44s} {ratio:5.2f}x the book's speed at T = {lengths[-1]}{note}")
