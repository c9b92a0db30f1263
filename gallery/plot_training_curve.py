r"""
Training the encoder-decoder
============================

The decoder of this package is trained on a task with unlimited, free data:
**reverse a sequence of digits** (``3 1 4 1 5`` becomes ``5 1 4 1 3``).
:func:`literate_transformer.book.training.train_reversal` builds a small
:class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`, trains it
with teacher forcing and cross-entropy, and every ``eval_every`` steps decodes
a held-out set greedily and counts the sequences it reverses exactly.  This
example draws both curves.

The run stops as soon as the held-out exact match reaches the target of
:func:`~literate_transformer.book.training.train_reversal` (printed below),
or after its maximum number of steps; the plot's title says how long it took
on the machine that built this page.  ``LT_GALLERY_SCALE=gpu`` (or ``large``)
evaluates on a larger held-out set and allows more steps.
"""

# %%
# Train
# -----
import inspect
import math
import os

import matplotlib.pyplot as plt
import torch

from literate_transformer.book.training import train_reversal
from literate_transformer.visualize import show

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cpu":
    # One CPU thread, as the site's build runs the examples: small models run no slower, and timings are steady.
    torch.set_num_threads(1)
large = os.environ.get("LT_GALLERY_SCALE", "cpu") in ("gpu", "large")

if large:
    result = train_reversal(steps=1200, eval_every=50, eval_size=2000, device=device)
else:
    result = train_reversal(device=device)
target = inspect.signature(train_reversal).parameters["target_accuracy"].default
print(f"target: {target:.1%} held-out exact match")
print(f"held-out exact match {result.accuracy:.1%} after {result.steps} steps in {result.seconds:.1f} s")

# %%
# The curves
# ----------
# On the log scale the loss falls along a nearly straight line: the printed
# rates, fitted to each quarter of the run, say by how much it shrinks every
# 25 steps.  Exact match (the whole sequence right) only rises once the
# per-token error is small, since one wrong digit spoils a sequence.
fig, ax_loss = plt.subplots(figsize=(8, 4), layout="constrained")
ax_loss.plot(range(1, len(result.losses) + 1), result.losses, color="C0", linewidth=1, label="training loss")
ax_loss.set_yscale("log")
ax_loss.set_xlabel("step")
ax_loss.set_ylabel("cross-entropy (log scale)", color="C0")
ax_accuracy = ax_loss.twinx()
steps, accuracies = zip(*result.evaluations, strict=True)
ax_accuracy.plot(steps, accuracies, color="C1", marker="o", label="held-out exact match")
ax_accuracy.set_ylim(0, 1)
ax_accuracy.set_ylabel("held-out exact match", color="C1")
ax_loss.set_title(
    f"Reversing digits: {result.steps} steps, {result.accuracy:.0%} exact match ({result.seconds:.0f} s on {device})"
)
show()

log_loss = torch.log(torch.tensor(result.losses))
quarter = len(log_loss) // 4
for k in range(4):
    segment = log_loss[k * quarter : (k + 1) * quarter]
    x = torch.arange(len(segment), dtype=torch.float32)
    slope = ((x - x.mean()) * (segment - segment.mean())).sum() / ((x - x.mean()) ** 2).sum()
    print(
        f"steps {k * quarter + 1}-{(k + 1) * quarter}: loss divided by {math.exp(-25 * slope.item()):.2f} every 25 steps"
    )
