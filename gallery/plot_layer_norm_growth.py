r"""
Pre-LN and post-LN: the size of the residual stream
===================================================

Each encoder layer adds the output of its sub-layers to a running sum, the
*residual stream*.  Where the layer norm sits decides what happens to that
sum as layers are stacked:

* **post-LN** (BERT, the 2017 paper): :math:`x \leftarrow \operatorname{LN}(x + f(x))`.
  The stream is normalised after every sub-layer, so its scale is reset each
  time;
* **pre-LN** (the book's encoder): :math:`x \leftarrow x + f(\operatorname{LN}(x))`.
  Only the sub-layer's *input* is normalised; the stream itself is a sum that
  keeps growing with depth (which is why pre-LN models usually end with
  one final layer norm).

This example stacks randomly initialised
:class:`literate_transformer.book.encoder.TransformerEncoderLayer` layers of both kinds and
measures the root-mean-square (RMS) of the stream after each layer, then
does the same for the pretrained (post-LN) checkpoint.

Set ``LT_GALLERY_SCALE=gpu`` (or ``large``) for a deeper, wider stack.
"""

# %%
# Set-up
# ------
import os

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

depth = 96 if large else 24
config = lt.TransformerConfig(
    vocab_size=100,
    hidden_size=256 if large else 64,
    num_hidden_layers=depth,
    num_attention_heads=8 if large else 4,
    intermediate_size=1024 if large else 256,
    hidden_dropout_prob=0.0,  # no dropout: we measure the network, not the noise
    attention_probs_dropout_prob=0.0,
)


# %%
# The size of a vector
# --------------------
def rms(x: torch.Tensor) -> float:
    """Root-mean-square of all entries: the typical size of one feature."""
    return x.float().pow(2).mean().sqrt().item()


# %%
# A random-initialised deep stack
# -------------------------------
# The same random input (already of unit scale, like the output of the
# embeddings' layer norm) goes through ``depth`` layers of each kind.
hidden = torch.randn(4, 32, config.hidden_size, device=device)  # (B, T, E)
growth = {}
for norm_first, name in ((True, "pre-LN (the book)"), (False, "post-LN (BERT)")):
    torch.manual_seed(1)  # the same weights for both arrangements
    layers = [lt.TransformerEncoderLayer(config, norm_first=norm_first).to(device).eval() for _ in range(depth)]
    stream = hidden
    sizes = [rms(stream)]
    with torch.inference_mode():
        for layer in layers:
            stream = layer(stream).hidden_states
            sizes.append(rms(stream))
    growth[name] = sizes
    print(
        f"{name:18s}: RMS {sizes[0]:.2f} at the input, {sizes[depth // 2]:.2f} after {depth // 2} layers, "
        f"{sizes[-1]:.2f} after {depth}"
    )

# %%
# The pretrained checkpoint
# -------------------------
# BERT is post-LN: ``output_hidden_states=True`` returns the embeddings and
# each layer's output, and every one of them just came out of a layer norm.
tokenizer = lt.load_tokenizer()
model = lt.BertModel.from_pretrained().to(device)
inputs = tokenizer("time flies like an arrow", return_tensors="pt").to(device)
with torch.inference_mode():
    states = model(**inputs, output_hidden_states=True).hidden_states
checkpoint_sizes = [rms(state) for state in states]
# Layers are numbered from 0, as the chapters number them: states[i + 1] is layer i's output.
print("checkpoint RMS, the embeddings then each layer's output:", ", ".join(f"{size:.2f}" for size in checkpoint_sizes))

fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
for name, sizes in growth.items():
    axes[0].plot(range(depth + 1), sizes, marker=".", label=name)
axes[0].set_xlabel("layers applied")
axes[0].set_ylabel("RMS of the residual stream")
axes[0].set_title(f"random init, hidden size {config.hidden_size}")
axes[0].legend()
axes[1].plot(range(len(checkpoint_sizes)), checkpoint_sizes, marker="o", color="C1")
axes[1].set_xlabel("layers applied (0: the embeddings)")
axes[1].set_ylabel("RMS of the hidden state")
axes[1].set_ylim(bottom=0)
axes[1].set_title(f"pretrained checkpoint (post-LN, {model.config.num_hidden_layers} layers)")
show()
