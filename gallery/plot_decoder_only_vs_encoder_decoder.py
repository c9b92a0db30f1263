r"""
Decoder-only against encoder-decoder
====================================

Two of the three branches of :doc:`/chapters/12_meet_the_transformers`
learn the same task here, from scratch, with (nearly) the same number of
parameters: **reverse a sequence of digits** (``3 1 4 1 5`` becomes
``5 1 4 1 3``, the task of :mod:`literate_transformer.book.training`).

* The **encoder-decoder**
  (:class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`)
  reads the source with its encoder and writes the target with its decoder,
  which looks at the source through cross-attention.
* The **decoder-only** model (the package's
  :class:`~literate_transformer.models.gpt2.GPT2LMHeadModel`, configured
  small) reads one sequence, ``source [BOS] target [EOS]``, left to right,
  and is trained only on the target part: the source is the prompt it
  continues.

Both see the same batches, with the same optimiser and schedule, and both
are scored the same way: the loss is the cross-entropy of the target tokens
(``[EOS]`` included), and every ``eval_every`` steps each writes held-out
targets by greedy decoding and counts the sequences it gets exactly right.

``LT_GALLERY_SCALE=gpu`` (or ``large``) trains for longer and evaluates on a
larger held-out set.
"""

# %%
# Set-up
# ------
import math
import os
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from transformers import GPT2Config

import literate_transformer as lt
from literate_transformer.book import training
from literate_transformer.models.gpt2 import Conv1D
from literate_transformer.parts.positions import position_ids
from literate_transformer.visualize import show

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
large = os.environ.get("LT_GALLERY_SCALE", "cpu") in ("gpu", "large")
if device == "cpu":
    # Models this small are trained faster by one CPU thread than split between several.
    torch.set_num_threads(1)
steps, eval_every, eval_size = (1500, 100, 2000) if large else (300, 50, 200)
max_length, batch_size = 8, 64

# %%
# Two models of (nearly) equal size
# ---------------------------------
# The encoder-decoder is the training demo's: one encoder layer and one
# decoder layer of width 64.  The decoder-only model gets two layers of the
# same width (a decoder layer without cross-attention is smaller than one
# with it), and the feed-forward width that brings its parameter count
# closest to the encoder-decoder's.  Its sequence holds the source, the
# separator and the target: ``2 * max_length + 1`` positions.  Both start
# from the same initialisation rule (HuggingFace's, ``initializer_range``).


def count(model: torch.nn.Module) -> int:
    return sum(parameter.numel() for parameter in model.parameters())


encoder_decoder_config = training.reversal_config(max_length=max_length)
encoder_decoder = lt.EncoderDecoderTransformer(encoder_decoder_config)


def decoder_only_config(intermediate_size: int) -> GPT2Config:
    """GPT-2's config with the encoder-decoder's width, heads, vocabulary and (no) dropout, under GPT-2's names."""
    shared = encoder_decoder_config
    return GPT2Config(
        vocab_size=shared.vocab_size,
        n_embd=shared.hidden_size,
        n_layer=2,
        n_head=shared.num_attention_heads,
        n_inner=intermediate_size,
        n_positions=2 * max_length + 1,
        activation_function=shared.hidden_act,
        layer_norm_epsilon=shared.layer_norm_eps,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=training.BOS_TOKEN_ID,
        eos_token_id=training.EOS_TOKEN_ID,
        pad_token_id=training.PAD_TOKEN_ID,
    )


# %%
# One initialisation rule for both
# --------------------------------
# PyTorch's defaults draw embeddings from N(0, 1); a head tied to such a
# table starts with logits of spread about sqrt(E) and a loss far above
# log(V).  Both models start from HuggingFace's rule instead.


@torch.no_grad()
def initialise(model: torch.nn.Module, std: float) -> torch.nn.Module:
    """HuggingFace's initialisation of GPT-2 and BART, for both models: weights N(0, std), biases 0, norms 1."""
    for module in model.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Embedding, Conv1D)):
            module.weight.normal_(0.0, std)
        if isinstance(module, (torch.nn.Linear, Conv1D)) and module.bias is not None:
            module.bias.zero_()
        if isinstance(module, torch.nn.LayerNorm):
            module.weight.fill_(1.0)
            module.bias.zero_()
    return model


# %%
# The decoder-only model's feed-forward width is the one (in steps of 8) that
# brings its parameter count closest to the encoder-decoder's.
intermediate_size = min(
    range(16, 513, 8),
    key=lambda size: abs(count(lt.GPT2LMHeadModel(decoder_only_config(size))) - count(encoder_decoder)),
)
torch.manual_seed(0)
encoder_decoder = initialise(encoder_decoder, encoder_decoder_config.initializer_range)
decoder_only = initialise(
    lt.GPT2LMHeadModel(decoder_only_config(intermediate_size)), encoder_decoder_config.initializer_range
)
print(
    f"encoder-decoder: {count(encoder_decoder):,} parameters "
    f"({encoder_decoder_config.num_hidden_layers} + {encoder_decoder_config.num_hidden_layers} layers, "
    f"feed-forward {encoder_decoder_config.intermediate_size})"
)
print(
    f"decoder-only:    {count(decoder_only):,} parameters "
    f"({decoder_only.config.num_hidden_layers} layers, feed-forward {intermediate_size})"
)

# %%
# One sequence for the decoder-only model
# ---------------------------------------
# A batch of the reversal task holds right-padded sources and ``[BOS]``
# followed by the target.  The decoder-only model reads them as one
# sequence: the source, moved to the right so that the padding comes first
# (as for generation), then ``[BOS]`` and the target.  Positions count the
# real tokens only, and the labels are the target's: the source and the
# separator carry the label ``-100``, which the loss ignores.


def left_padded(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Move each row's real tokens to the end: (B, S) right-padded -> left-padded."""
    order = torch.argsort(mask, dim=1, stable=True)  # padding (0) first, then the tokens in their order
    return ids.gather(1, order), mask.gather(1, order)


def as_one_sequence(batch: training.ReversalBatch):
    source, source_mask = left_padded(batch.input_ids, batch.attention_mask)
    input_ids = torch.cat([source, batch.decoder_input_ids], dim=1)
    attention_mask = torch.cat([source_mask, batch.decoder_attention_mask], dim=1)
    ignored = torch.full_like(source, training.IGNORE_INDEX)
    labels = torch.cat([ignored, batch.labels], dim=1)
    return input_ids, attention_mask, labels


example = training.make_reversal_batch(2, 3, 5, torch.Generator().manual_seed(0))
input_ids, attention_mask, labels = as_one_sequence(example)
# The positions the model gives the tokens (padding keeps its index; no real token reads it).
positions = position_ids(attention_mask, attention_mask.shape[1])
for name, tensor in zip(
    ("input_ids", "attention_mask", "positions", "labels"), (input_ids, attention_mask, positions, labels), strict=True
):
    print(f"{name:15}", tensor[1].tolist())

# %%
# Training both the same way
# --------------------------
# The loss of each model on a batch, and its held-out exact match: every
# token of the target, ``[EOS]`` included, written by greedy decoding
# (:meth:`~literate_transformer.models.gpt2.GPT2LMHeadModel.generate`
# continues the left-padded ``source [BOS]`` prompt).


def loss_of(model, batch: training.ReversalBatch) -> torch.Tensor:
    if model is encoder_decoder:
        logits = model(batch.input_ids, batch.decoder_input_ids, batch.attention_mask, batch.decoder_attention_mask)
        labels = batch.labels
        logits = logits.logits
    else:
        input_ids, attention_mask, labels = as_one_sequence(batch)
        logits = model(input_ids, attention_mask=attention_mask).logits
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=training.IGNORE_INDEX)


@torch.no_grad()
def exact_match(model, batch: training.ReversalBatch) -> float:
    if model is encoder_decoder:
        return training.exact_match(model, batch)
    source, source_mask = left_padded(batch.input_ids, batch.attention_mask)
    separator = torch.full_like(source[:, :1], training.BOS_TOKEN_ID)
    prompt = torch.cat([source, separator], dim=1)
    prompt_mask = torch.cat([source_mask, torch.ones_like(separator)], dim=1)
    target_length = batch.labels.shape[1]
    written = model.generate(prompt, prompt_mask, max_new_tokens=target_length)[:, prompt.shape[1] :].cpu()
    padded = torch.full_like(batch.labels, training.PAD_TOKEN_ID)
    padded[:, : written.shape[1]] = written
    real = batch.labels != training.IGNORE_INDEX
    return ((padded == batch.labels) | ~real).all(dim=1).float().mean().item()


# %%
# Both models are trained by one loop: AdamW, a learning rate that warms up
# over 50 steps and then decays linearly to 0, gradient clipping, the same
# batches (one seeded generator each time), and an evaluation on one
# held-out set every ``eval_every`` steps.


held_out = training.make_reversal_batch(eval_size, 3, max_length, torch.Generator().manual_seed(1), True)
held_out = training.ReversalBatch(*(tensor.to(device) for tensor in held_out))
warmup = 50


def learning_rate_factor(step: int) -> float:
    return (step + 1) / warmup if step < warmup else max(0.0, (steps - step) / (steps - warmup))


# %%
# The loop itself; it stops the run if a loss is not finite.


def train(model, name: str) -> dict[str, list]:
    torch.manual_seed(0)
    data = torch.Generator().manual_seed(0)  # the same batches for both models
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, learning_rate_factor)
    history = {"loss": [], "evaluations": []}
    start = time.perf_counter()
    for step in range(1, steps + 1):
        model.train()
        batch = training.make_reversal_batch(batch_size, 3, max_length, data)
        loss = loss_of(model, training.ReversalBatch(*(tensor.to(device) for tensor in batch)))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        history["loss"].append(loss.item())
        if step % eval_every == 0:
            model.eval()
            history["evaluations"].append((step, exact_match(model, held_out)))
    seconds = time.perf_counter() - start
    final = history["evaluations"][-1][1]
    print(f"{name:15} final loss {history['loss'][-1]:.3f}, held-out exact match {final:.1%} ({seconds:.1f} s)")
    if not math.isfinite(history["loss"][-1]):
        raise RuntimeError(f"{name} diverged")
    return history


# %%
histories = {
    "encoder-decoder": train(encoder_decoder, "encoder-decoder"),
    "decoder-only": train(decoder_only, "decoder-only"),
}

# %%
# The curves
# ----------
# Left, the training loss of every step; right, the held-out exact match of
# every evaluation.  They describe one run: this task, these sizes, this
# number of steps, one seed; the lines printed below the plot say when (and
# whether) each model reached 99% held-out exact match in it.
fig, (ax_loss, ax_match) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
for (name, history), color in zip(histories.items(), ("C0", "C1"), strict=True):
    ax_loss.plot(range(1, steps + 1), history["loss"], color=color, linewidth=1, label=name)
    evaluated_steps, matches = zip(*history["evaluations"], strict=True)
    ax_match.plot(evaluated_steps, matches, color=color, marker="o", label=name)
ax_loss.set_yscale("log")
ax_loss.set_xlabel("step")
ax_loss.set_ylabel("cross-entropy of the target tokens (log scale)")
ax_loss.legend()
ax_match.set_ylim(0, 1)
ax_match.set_xlabel("step")
ax_match.set_ylabel(f"held-out exact match ({eval_size} sequences)")
ax_match.legend()
fig.suptitle(
    f"Reversing digits at equal size: {count(encoder_decoder):,} vs {count(decoder_only):,} parameters, "
    f"same batches ({device})"
)
show()

for name, history in histories.items():
    reached = [step for step, match in history["evaluations"] if match >= 0.99]
    when = f"first at step {reached[0]}" if reached else f"not within {steps} steps"
    print(f"{name:15} held-out exact match >= 99%: {when}")

# %%
# What the race says
# ------------------
# At equal size, on the same batches and schedule, what differs between the
# two models is how they read their input: the encoder-decoder reads the
# whole source in both directions before it writes; the decoder-only model
# reads the source left to right, as a prompt, in the same causal stack that
# then writes the target.  The verdict below, computed from this run, says
# which of the two learned the task faster here: which reached 99% held-out
# exact match first (or, if neither did, which ended higher).  One run, one
# seed and one small task make it an observation about this setting, not a
# ranking of the branches; ``LT_GALLERY_SCALE=gpu`` trains five times longer
# and shows whether the slower model catches up.
first_at = {
    name: next((step for step, match in history["evaluations"] if match >= 0.99), None)
    for name, history in histories.items()
}
final = {name: history["evaluations"][-1][1] for name, history in histories.items()}
finishers = {name: step for name, step in first_at.items() if step is not None}
if finishers:
    faster = min(finishers, key=finishers.get)
    other = next(name for name in histories if name != faster)
    against = (
        f"the {other} at step {finishers[other]}"
        if other in finishers
        else f"the {other} not at all ({final[other]:.1%})"
    )
    print(f"verdict: the {faster} reached 99% first, at step {finishers[faster]}; {against}")
else:
    leader = max(final, key=final.get)
    print(f"verdict: neither reached 99% in {steps} steps; the {leader} ended higher ({final[leader]:.1%})")
