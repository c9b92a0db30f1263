r"""
Training a language model on Python's documentation
===================================================

Chapter 19 trains a byte-level BPE tokenizer and a small Llama on Python's
own reference documentation (``pydoc_data.topics``, shipped with every
Python) with :func:`~literate_transformer.pretraining.causal_lm.train`, and
reads the held-out loss against two baselines that need no network: the
unigram entropy of the held-out tokens and a bigram model whose smoothing
is chosen on a slice of the training text.  This example runs the same
recipe at a size chosen by ``LT_GALLERY_SCALE``:

* by default, a model small enough that every build of the site trains it
  in seconds on one CPU thread;
* with ``LT_GALLERY_SCALE=gpu`` (or ``large``), a wider and deeper model
  with a larger vocabulary and longer windows, trained for thousands of
  steps (meant for a GPU), with a warmup, as larger models are usually
  trained.

It prints the final losses beside the baselines and a sample, and draws the
run: the losses against the steps, then the learning rate, the gradient
norm before clipping and the size of each step.  The corpus is small (about
half a million characters), and the large run reads it dozens of times
over: a model that starts to memorise it shows it as a training loss that
keeps falling while the held-out loss stops, which is why the run prints
the lowest held-out loss and the step that reached it.
"""

# %%
# The text, the tokenizer and the baselines
# -----------------------------------------
# The held-out text is whole topics of the documentation (the first of every
# ten, in the order of their names); the tokenizer and the bigram model are
# trained on the rest.  The bigram's smoothing ``k`` is chosen on the last
# tenth of the training tokens, never on the held-out ones.
import math
import os

import matplotlib.pyplot as plt
import torch
import transformers

import literate_transformer as lt
from literate_transformer.fast.corpus import python_doc_text
from literate_transformer.figures import training as figures
from literate_transformer.pretraining.causal_lm import bigram_loss, unigram_entropy
from literate_transformer.visualize import show

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cpu":
    # One CPU thread, as the site's build runs the examples: small models run no slower, and timings are steady.
    torch.set_num_threads(1)
large = os.environ.get("LT_GALLERY_SCALE", "cpu") in ("gpu", "large")

if large:
    size = dict(vocab_size=1024, hidden_size=256, intermediate_size=704, num_hidden_layers=4, num_attention_heads=4)
    run = dict(steps=2000, batch_size=32, sequence_length=128, learning_rate=2e-3, warmup_steps=100, eval_every=100)
else:
    size = dict(vocab_size=512, hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4)
    run = dict(steps=120, batch_size=16, sequence_length=64, learning_rate=1e-2, warmup_steps=0, eval_every=40)

# %%
# The package's byte-level BPE tokenizer learns its merges from the training
# pages; the two baselines are scored on the held-out tokens.
train_text, val_text = python_doc_text("train"), python_doc_text("validation")
tokenizer = lt.bpe.train(train_text, vocab_size=size["vocab_size"])
train_ids = torch.tensor(tokenizer.encode(train_text))
val_ids = torch.tensor(tokenizer.encode(val_text))
V = tokenizer.vocab_size

fit, tune = train_ids[: len(train_ids) * 9 // 10], train_ids[len(train_ids) * 9 // 10 :]
k = min([0.003, 0.01, 0.03, 0.1, 0.3, 1.0], key=lambda k: bigram_loss(fit, tune, V, k))
baselines = {
    "unigram entropy of the held-out tokens": unigram_entropy(val_ids),
    f"bigram, add-{k}": bigram_loss(train_ids, val_ids, V, k),
}
print(f"{len(train_ids):,} training and {len(val_ids):,} held-out tokens, vocabulary {V:,}")

# %%
# The model and the run
# ---------------------
# The package's Llama, built from a ``transformers`` config, its head tied
# to the token table.  The small model starts from PyTorch's initialisation,
# as in the chapter, where it beat ``transformers``' in a short run (its
# untrained loss is about E nats, the model sure that its input token comes
# again); the large one from ``transformers``' (every matrix and table drawn
# with a standard deviation of 0.02, GPT-2's choice), whose untrained loss
# is about ln V.  At the default size the run lasts seconds and its held-out
# loss stays above the bigram's; the chapter's run, a minute long, goes
# below it.
config = transformers.LlamaConfig(
    **size,
    max_position_embeddings=run["sequence_length"],
    tie_word_embeddings=True,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
torch.manual_seed(0)
model = lt.from_hf(transformers.LlamaForCausalLM(config)) if large else lt.LlamaForCausalLM(config)
model = model.to(device)
print(f"{sum(p.numel() for p in model.parameters()):,} parameters on {device}")

history = lt.train(
    model, train_ids, **run, weight_decay=0.1, max_grad_norm=1.0, validation_tokens=val_ids, eval_batches=8
)
train_final = sum(history.train_loss[-20:]) / len(history.train_loss[-20:])
best = min(range(len(history.val_loss)), key=history.val_loss.__getitem__)
passes = history.tokens / len(train_ids)
print(f"{history.tokens:,} tokens ({passes:.1f} passes over the training text) in {history.seconds:.0f} s")
print(f"training loss, mean of the last 20 steps: {train_final:.3f}")
print(f"held-out loss: {history.val_loss[0]:.3f} at the start, {history.val_loss[-1]:.3f} at the end, "
      f"lowest {history.val_loss[best]:.3f} after step {history.val_steps[best]}")  # fmt: skip
for name, value in baselines.items():
    print(f"{name}: {value:.3f}")

# %%
# The losses
# ----------
# The training loss of every step (faint), its running mean, the held-out
# loss at the checkpoints, and the baselines.
figures.plot_losses(
    history, baselines, top=max(8.0, 1.3 * math.log(V)), figure=plt.figure(figsize=(8, 4), layout="constrained")
)
show()

# %%
# The optimizer
# -------------
# The learning rate of each step, the gradients' norm before clipping beside
# the threshold, and how far each step moved the weights.
figures.plot_optimizer(history, max_grad_norm=1.0, figure=plt.figure(figsize=(11, 3.4), layout="constrained"))
show()

# %%
# A sample
# --------
# The trained model continues a prompt, sampling at temperature 0.8.
prompt = torch.tensor([tokenizer.encode("The value of")], device=device)
torch.manual_seed(0)
written = model.generate(prompt, max_new_tokens=60, do_sample=True, temperature=0.8)
print(repr(tokenizer.decode(written[0].tolist())))
