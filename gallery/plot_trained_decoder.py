r"""
A trained decoder writes
========================

SmolLM2-135M-Instruct, a Llama of 135 million parameters read from its
4-bit GGUF file by the package (``lt.load_decoder()``), continues a prompt:
its next-token distribution as a bar chart, then a greedy continuation and
a few sampled ones, and how many tokens a second it writes here.
"""

# %%
# Set-up
# ------
# The device is chosen once: CUDA when it is available, else the CPU.  The
# model is the package's own ``LlamaForCausalLM``, in float32, its weights
# verified by SHA-256 before they are read.
import os
import time

import matplotlib.pyplot as plt
import torch

import literate_transformer as lt
from literate_transformer.visualize import plot_next_tokens, show

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cpu":
    # One CPU thread, as the site's build runs the examples: small models run no slower, and timings are steady.
    torch.set_num_threads(1)
heavy = os.environ.get("LT_GALLERY_SCALE", "") in ("gpu", "large")
new_tokens = 64 if heavy else 20

tokenizer, model = lt.load_decoder()
model = model.to(device)
parameters = sum(parameter.numel() for parameter in model.parameters())
print(f"{parameters:,} parameters, {model.config.num_hidden_layers} layers, on {device}")

# %%
# The next token
# --------------
# One forward pass gives a score for each of the 49,152 tokens of the
# vocabulary; their softmax is the distribution the next token is drawn from.
prompt = "Once upon a time, there was a little"
inputs = tokenizer(prompt, return_tensors="pt").to(device)
with torch.no_grad():
    scores = model(inputs["input_ids"]).logits[0, -1].cpu()
plot_next_tokens(
    scores,
    tokenizer.decode,
    {"as the model gives it": {}, "temperature 0.7": {"temperature": 0.7}, "top-p 0.9": {"top_p": 0.9}},
    title=repr(prompt),
    figure=plt.figure(figsize=(9, 3.6), layout="constrained"),
)
show()

# %%
# Greedy and sampled continuations
# --------------------------------
# Greedy decoding appends the most likely token every step; sampling draws
# it (``transformers``' defaults apply: top-k 50).  Each sampled line starts
# from another seed.
start = time.perf_counter()
greedy = model.generate(inputs["input_ids"], inputs["attention_mask"], max_new_tokens=new_tokens)
seconds = time.perf_counter() - start
written = greedy.shape[1] - inputs["input_ids"].shape[1]
print(f"greedy : {tokenizer.decode(greedy[0, inputs['input_ids'].shape[1] :])!r}")
for seed in range(2):
    torch.manual_seed(seed)
    sampled = model.generate(
        inputs["input_ids"], inputs["attention_mask"], max_new_tokens=new_tokens, do_sample=True, temperature=0.8
    )
    print(f"seed {seed}: {tokenizer.decode(sampled[0, inputs['input_ids'].shape[1] :])!r}")
print(f"greedy decoding wrote {written} tokens in {seconds:.2f} s: {written / seconds:.1f} tokens/s on {device}")
