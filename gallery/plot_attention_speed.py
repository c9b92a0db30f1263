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
one each time, so background load hits them alike), and the median is
reported.  On a GPU (with ``LT_GALLERY_SCALE=gpu``) the run uses bf16 and
longer sequences and reports TFLOP/s.  The numbers are from the machine that
built this page; ``benchmarks/bench_bert.py`` times the whole model.
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

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
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


names = list(implementations)
medians = {name: [] for name in names}
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
        summary = ", ".join(f"{medians[name][-1] * 1e3:8.2f} ms" for name in names)
        print(f"T = {length:5d}: {summary}")

# %%
# The plot
# --------
# Left: median time per call.  Right: achieved FLOP/s (TFLOP/s on a GPU,
# GFLOP/s on a CPU), the work divided by the time.
unit, unit_name = (1e12, "TFLOP/s") if device == "cuda" else (1e9, "GFLOP/s")
fig, (ax_time, ax_rate) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
for name in names:
    ax_time.plot(lengths, [t * 1e3 for t in medians[name]], marker="o", label=name)
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
plt.show()

# %%
# Speed-ups at the longest length
# -------------------------------
longest = {name: medians[name][-1] for name in names}
book_time = longest["book: one AttentionHead per head"]
for name, seconds in longest.items():
    print(f"{name:44s} {book_time / seconds:5.2f}x the book's speed at T = {lengths[-1]}")
