r"""Time a training step of the package's Llama against transformers.LlamaForCausalLM, in one process, round-robin.

What is compared
----------------
A small Llama of the size a CPU pretrains in minutes (by default 4 layers,
width 256, 4 heads of 64, a vocabulary of 4096), random weights, float32
on the CPU (or with ``--device cuda`` on a GPU):

* ``transformers``: :class:`transformers.LlamaForCausalLM` built from the
  config as a user builds it (its default attention, SDPA);
* ``ours``: the package's :class:`~literate_transformer.models.llama.LlamaForCausalLM`
  with the same weights (``lt.from_hf``), as :func:`literate_transformer.train` runs it.

One training step is what :func:`literate_transformer.train` does each step:
``model(input_ids, labels=input_ids).loss`` (the next-token loss), the
backward pass, gradient clipping to 1, one :class:`torch.optim.AdamW` step
(each model its own optimizer, the same settings) and the gradients cleared.
Both models start from the same weights and take the same batch (a fixed
batch of random ids, ``--batch-size`` windows of ``--sequence-length``
tokens) at every step, so that they stay the same model: the first step's
losses are compared, and the last step's.

How it is timed
---------------
Everything runs in one process.  Each model takes ``--warmup`` steps first
(the allocator, the kernels' choices, AdamW's state), then ``--repeats``
rounds call both, the order rotated by one each round, so that a burst of
load from another process hits both alike.  On CUDA each step ends with
``torch.cuda.synchronize()``.  The reported time is the median over rounds;
tokens per second are ``B x T`` over it, and the ratio is ours over
``transformers``'.

Output
------
``training-<device>.json`` (every number, the date, versions, machine and
load) and ``training-<device>.md`` (the table) in ``--output-dir`` (default
``docs/benchmarks``); the table is also printed.

Usage::

    python benchmarks/bench_train.py                             # B=8 x T=128 and B=8 x T=256, CPU
    python benchmarks/bench_train.py --shapes 8x128 --repeats 10
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

from literate_transformer.core.checkpoints import use_offline_environment

# Offline and quiet before transformers is imported (the package's one definition).
use_offline_environment()

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
# The timing helpers and the run's facts, as the BERT benchmark records them.
from bench_bert import (  # noqa: E402
    _load_average,
    _machine,
    _summary,
    _sync,
    _time_rotated,
    run_description,
    versions,
    write_results,
)

#: What the package aims for (measured and reported, never asserted): a training step at least as fast as
#: transformers', at every shape.
TARGET_RATIO = 1.0
#: The optimizer both models step with (nanoGPT's betas and decay) and the clipping both apply.
OPTIMIZER = dict(lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
MAX_GRAD_NORM = 1.0


def llama_config(layers: int, width: int, heads: int, vocab_size: int, positions: int):
    """The benchmark's Llama: ``heads`` heads of ``width / heads``, SwiGLU of ``8/3`` the width (rounded to 64),
    a tied head, as the small Llamas (SmolLM2) are built."""
    import transformers

    intermediate = 64 * round(8 * width / 3 / 64)
    return transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=width,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=positions,
        tie_word_embeddings=True,
    )


def build_models(config, device: str) -> dict[str, torch.nn.Module]:
    """``transformers``' Llama with random weights and the package's copy of it, both in training mode."""
    import transformers

    import literate_transformer as lt

    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(config).to(device)
    ours = lt.from_hf(hf).to(device)
    return {"transformers": hf.train(), "ours": ours.train()}


def training_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor) -> torch.Tensor:
    """One step as :func:`literate_transformer.train` takes it: the loss, backward, clipping, AdamW, gradients cleared."""
    loss = model(batch, labels=batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def time_shape(models: dict, batch_size: int, length: int, device: str, warmup: int, repeats: int) -> dict:
    """Round-robin step times of both models at one shape, each from the same weights with its own AdamW."""
    states = {name: {key: value.clone() for key, value in model.state_dict().items()} for name, model in models.items()}
    generator = torch.Generator().manual_seed(batch_size * 100_003 + length)
    vocab_size = models["ours"].config.vocab_size
    batch = torch.randint(vocab_size, (batch_size, length), generator=generator).to(device)
    optimizers = {name: torch.optim.AdamW(model.parameters(), **OPTIMIZER) for name, model in models.items()}
    losses: dict[str, list[float]] = {name: [] for name in models}

    def step(name: str) -> Callable[[], None]:
        def run() -> None:
            losses[name].append(float(training_step(models[name], optimizers[name], batch)))

        return run

    calls = {name: step(name) for name in models}
    for call in calls.values():
        for _ in range(warmup):
            call()
    _sync(device)
    times = _time_rotated(calls, repeats, device)
    # Back to the shared starting weights for the next shape.
    for name, model in models.items():
        model.load_state_dict(states[name])
    paths = {}
    for name in models:
        summary = _summary(times[name])
        paths[name] = {**summary, "tokens_per_s": batch_size * length / summary["median_s"]}
    for name in models:
        paths[name]["vs_transformers"] = paths[name]["tokens_per_s"] / paths["transformers"]["tokens_per_s"]
    return {
        "batch_size": batch_size,
        "sequence_length": length,
        "paths": paths,
        "first_loss": {name: values[0] for name, values in losses.items()},
        "last_loss": {name: values[-1] for name, values in losses.items()},
        "first_loss_difference": abs(losses["ours"][0] - losses["transformers"][0]),
        "last_loss_difference": abs(losses["ours"][-1] - losses["transformers"][-1]),
    }


def evaluate_targets(shapes: list[dict]) -> list[dict]:
    """The target's verdict: the worst shape's ratio of ours to transformers' tokens per second."""
    worst = min(shape["paths"]["ours"]["vs_transformers"] for shape in shapes)
    return [{"name": "ours / transformers, training tokens/s", "target": TARGET_RATIO, "measured": worst,
             "met": worst >= TARGET_RATIO}]  # fmt: skip


def markdown_table(results: dict) -> str:
    """The results as a Markdown table (step times in ms)."""
    lines = [
        "| B | T | transformers ms | ours ms | transformers tokens/s | ours tokens/s | ours / transformers |"
        " first loss, ours - theirs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for shape in results["shapes"]:
        theirs, ours = shape["paths"]["transformers"], shape["paths"]["ours"]
        lines.append(
            f"| {shape['batch_size']} | {shape['sequence_length']} | {theirs['median_s'] * 1e3:.1f} "
            f"| {ours['median_s'] * 1e3:.1f} | {theirs['tokens_per_s']:,.0f} | {ours['tokens_per_s']:,.0f} "
            f"| {ours['vs_transformers']:.3f} | {shape['first_loss_difference']:.1e} |"
        )
    model = results["model"]
    lines += [
        "",
        f"model: {model['num_hidden_layers']} layers, width {model['hidden_size']}, {model['num_attention_heads']} "
        f"heads, feed-forward {model['intermediate_size']}, vocabulary {model['vocab_size']}, "
        f"{model['parameters']:,} parameters (tied head)",
        "",
        "| target | wanted | measured | met |",
        "|---|---|---|---|",
    ]
    for target in results["targets"]:
        lines.append(
            f"| {target['name']} | {target['target']} | {target['measured']:.3f} | {'yes' if target['met'] else 'no'} |"
        )
    return "\n".join(lines)


def _shape(text: str) -> tuple[int, int]:
    batch_size, _, length = text.partition("x")
    return int(batch_size), int(length)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--shapes", type=_shape, nargs="+", default=None, help="BxT; default 8x128 8x256")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "docs" / "benchmarks")
    parser.add_argument("--note", default="", help="free text stored in the results (e.g. what else was running)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    shapes = args.shapes or [(8, 128), (8, 256)]
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if device == "cuda":
        # float32 means float32: no TF32 in the matrix multiplies, on either side.
        torch.backends.cuda.matmul.allow_tf32 = False
    started = time.perf_counter()
    load_before = _load_average()
    config = llama_config(args.layers, args.width, args.heads, args.vocab_size, max(length for _, length in shapes))
    models = build_models(config, device)
    print(f"training steps on {device} (float32), {torch.get_num_threads()} threads, load {load_before}", flush=True)
    measured = []
    for batch_size, length in shapes:
        shape = time_shape(models, batch_size, length, device, args.warmup, args.repeats)
        measured.append(shape)
        print(
            f"B={batch_size:<3d} T={length:<4d} x{args.repeats}: "
            + ", ".join(f"{name} {path['median_s'] * 1e3:.1f} ms" for name, path in shape["paths"].items())
            + f", ours / transformers {shape['paths']['ours']['vs_transformers']:.3f}",
            flush=True,
        )
        gc.collect()
    results = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device,
        "dtype": "float32",
        "versions": versions(),
        "machine": _machine(device),
        "load_average": {"before": load_before, "after": _load_average()},
        "note": args.note,
        "model": {
            "num_hidden_layers": config.num_hidden_layers,
            "hidden_size": config.hidden_size,
            "intermediate_size": config.intermediate_size,
            "num_attention_heads": config.num_attention_heads,
            "vocab_size": config.vocab_size,
            "parameters": sum(parameter.numel() for parameter in models["ours"].parameters()),
            "transformers_attention": models["transformers"].config._attn_implementation,
        },
        "settings": {
            "step": "loss (labels=input_ids), backward, clip_grad_norm_ 1.0, AdamW, zero_grad",
            "optimizer": {**OPTIMIZER, "betas": list(OPTIMIZER["betas"])},
            "warmup": args.warmup,
            "repeats": args.repeats,
            "order": "round-robin, rotated by one model each repetition",
        },
        "shapes": measured,
        "wall_time_s": None,
    }
    results["targets"] = evaluate_targets(measured)
    results["wall_time_s"] = round(time.perf_counter() - started, 1)
    header = f"A training step of a small Llama, {device} float32, {run_description(results)}"
    write_results(args.output_dir / f"training-{device}", results, header, markdown_table(results))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
