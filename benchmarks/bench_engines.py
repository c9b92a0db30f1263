r"""The trained decoder's engines side by side at batch 1: transformers, the package's paths, onnxruntime, llama.cpp.

What is compared
----------------
SmolLM2-135M-Instruct writing ``--new-tokens`` tokens greedily after each of
``--prompts`` (user messages wrapped in its chat template), one sequence at a
time, in one process:

* ``transformers fp32``: :class:`transformers.LlamaForCausalLM` holding the
  package's float32 weights, its ``generate(do_sample=False)``;
* ``package fp32 compiled``: the package's ``generate()`` over its static
  cache, the one-token step compiled (``model.compile()``);
* ``package int4 compiled``: the same over the file's 4-bit blocks
  (``load_decoder(weights="int4")``, :mod:`literate_transformer.parts.int4`);
* ``onnxruntime``: ``load_decoder(engine="onnxruntime")``, the step graph of
  :mod:`literate_transformer.onnx_export` over the file's blocks, 8-bit
  activations;
* ``llama.cpp``: ``llama-cpp-python`` on the very same GGUF file, greedy
  (the argmax of its logits after each ``eval``), where ``--llama-cpp``
  (or the environment variable ``LT_LLAMA_CPP_VENV``) names a virtual
  environment that has it, or it is importable here.  Its site-packages is
  appended to ``sys.path``: it runs in this process, in the same rounds.

No engine stops early (the end-of-sequence id is switched off everywhere).

How it is timed
---------------
After a warm-up call of each engine on each prompt (compiling, for the
compiled paths; the warm-up's ids are the ones compared), ``--repeats``
rounds call every engine on every prompt, the order of the engines rotated
by one each round, once for the prompt alone (the *prefill*: a call that
writes one token) and once for the whole answer.  An engine's time is the
median over rounds and prompts; *tokens/s* is the new tokens over the whole
call, *decode tokens/s* the tokens after the first over the whole call less
the prefill.  The threads are ``--threads`` for every engine
(``torch.set_num_threads``, onnxruntime's ``intra_op_num_threads``,
llama.cpp's ``n_threads``).  Then the same calls are timed once more on one
thread, in CPU time (:func:`time.process_time`): what each engine costs the
processor, whatever else the machine runs.

What is compared besides time
-----------------------------
Each engine's ids against the package's float32 ids and against llama.cpp's
(how many leading tokens agree, per prompt).  The onnxruntime engine rounds
its activations to 8 bits: fed the float32 ids (teacher forcing,
:meth:`~literate_transformer.onnx_export.OnnxDecoder.forced_logits`), its
scores are compared with the float32 model's at every step (largest
difference, steps with the same best token), and where its greedy ids part
from float32's the step is shown with the float32 margin between the two
tokens.

The read limits
---------------
A step at batch 1 reads every weight once; the bytes each format's step
reads, over the best rate at which the machine streams memory (a float32 sum
larger than its caches), bound its tokens per second.

Output
------
``engines-cpu.json`` and ``engines-cpu.md`` in ``--output-dir`` (default ``docs/benchmarks``).

Usage::

    python benchmarks/bench_engines.py --llama-cpp /path/to/venv-with-llama-cpp-python
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from literate_transformer.core.checkpoints import use_offline_environment

use_offline_environment()

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_bert import _load_average, _machine, versions, write_results  # noqa: E402
from bench_generate import leading_agreement, streaming_rate, weight_bytes  # noqa: E402

#: User messages, each wrapped in the chat template (the system message SmolLM2's template adds comes first).
PROMPTS = (
    "What is the capital of France?",
    "Write a short poem about the sea.",
    "Explain in one paragraph why the sky is blue.",
)
#: The engines, in the table's order.
ENGINES = ("transformers fp32", "package fp32 compiled", "package int4 compiled", "onnxruntime", "llama.cpp")
#: The environment variable naming a virtual environment with llama-cpp-python.
LLAMA_CPP_ENV = "LT_LLAMA_CPP_VENV"


def _site_packages(venv: Path) -> Path:
    """The site-packages of a virtual environment of this Python version."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    found = venv / "lib" / version / "site-packages"
    if not found.is_dir():
        raise FileNotFoundError(f"--llama-cpp {venv}: no {found.relative_to(venv)} (a venv of {version} is needed)")
    return found


def import_llama_cpp(venv: str | None) -> tuple[object | None, str]:
    """``llama_cpp.Llama`` (from ``venv``'s site-packages, appended to ``sys.path``), or ``None`` and why not."""
    if venv:
        sys.path.append(str(_site_packages(Path(venv))))
    try:
        from llama_cpp import Llama, __version__
    except ImportError as error:
        return None, f"skipped: llama-cpp-python is not importable ({error}); name a venv with --llama-cpp"
    return Llama, f"llama-cpp-python {__version__}"


class LlamaCpp:
    """llama.cpp on the GGUF file, greedy: the argmax of the last position's logits after each ``eval``."""

    def __init__(self, Llama: type, path: str, threads: int, context: int) -> None:
        self.llm = Llama(model_path=path, n_ctx=context, n_batch=context, n_threads=threads,
                         n_threads_batch=threads, verbose=False)  # fmt: skip
        self.vocab = self.llm.n_vocab()

    def _last(self) -> np.ndarray:
        return np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.vocab,))

    def forced_logits(self, prompt: list[int], forced: list[int]) -> torch.Tensor:
        """Teacher forcing, one token a step as it decodes: the scores after the prompt and each forced token."""
        self.llm.reset()
        self.llm.eval(prompt)
        scores = [self._last().copy()]
        for token in forced[:-1]:
            self.llm.eval([token])
            scores.append(self._last().copy())
        return torch.from_numpy(np.stack(scores))

    def generate(self, prompt: list[int], new_tokens: int) -> list[int]:
        self.llm.reset()
        self.llm.eval(prompt)
        written = [int(np.argmax(self._last()))]
        while len(written) < new_tokens:
            self.llm.eval([written[-1]])
            written.append(int(np.argmax(self._last())))
        return written


def load_engines(Llama: object | None, threads: int, context: int) -> dict:
    """Every engine, on the same file, the end-of-sequence id switched off."""
    import transformers

    from literate_transformer.core.checkpoints import resolve_decoder
    from literate_transformer.trained import load_decoder

    tokenizer, ours = load_decoder()
    int4 = load_decoder(weights="int4")[1]
    hf = transformers.LlamaForCausalLM.from_pretrained(
        None, config=copy.deepcopy(ours.config), state_dict=ours.state_dict()
    ).eval()
    onnx = load_decoder(engine="onnxruntime")[1]
    for model in (ours, int4, onnx):
        model.config.eos_token_id = None
    hf.generation_config.eos_token_id = None
    hf.generation_config.pad_token_id = ours.config.pad_token_id
    engines = {
        "tokenizer": tokenizer,
        "fp32": ours,
        "transformers fp32": hf,
        "package fp32 compiled": copy.copy(ours).compile(),
        "package int4 compiled": copy.copy(int4).compile(),
        "onnxruntime": onnx,
        "int4": int4,
    }
    if Llama is not None:
        engines["llama.cpp"] = LlamaCpp(Llama, str(resolve_decoder()), threads, context)
    return engines


def calls_for(engines: dict, prompt: torch.Tensor, new_tokens: int) -> dict[str, Callable[[], list[int]]]:
    """Each engine's greedy call on one prompt ``(1, P)``: ``new_tokens`` ids, as a list."""
    mask = torch.ones_like(prompt)
    length = prompt.shape[1]

    def torch_call(model: object) -> Callable[[int], list[int]]:
        return lambda count: model.generate(prompt, mask, count)[0, length:].tolist()

    calls = {
        "transformers fp32": lambda count: (
            engines["transformers fp32"]
            .generate(prompt, attention_mask=mask, max_new_tokens=count, do_sample=False)[0, length:]
            .tolist()
        ),
        "package fp32 compiled": torch_call(engines["package fp32 compiled"]),
        "package int4 compiled": torch_call(engines["package int4 compiled"]),
        "onnxruntime": torch_call(engines["onnxruntime"]),
    }
    if "llama.cpp" in engines:
        llama = engines["llama.cpp"]
        ids = prompt[0].tolist()
        calls["llama.cpp"] = lambda count: llama.generate(ids, count)
    return calls


def set_threads(engines: dict, threads: int, Llama: object | None, context: int) -> None:
    """Every engine on ``threads`` threads (a new onnxruntime session and llama.cpp context for them)."""
    from literate_transformer.onnx_export import OnnxDecoder

    torch.set_num_threads(threads)
    onnx = engines["onnxruntime"]
    engines["onnxruntime"] = OnnxDecoder(onnx.proto_bytes, onnx.config, threads)
    if "llama.cpp" in engines:
        from literate_transformer.core.checkpoints import resolve_decoder

        engines["llama.cpp"] = LlamaCpp(Llama, str(resolve_decoder()), threads, context)


def time_rounds(prompts: list[torch.Tensor], engines: dict, new_tokens: int, repeats: int, clock: Callable) -> dict:
    """Every engine on every prompt, the order of the engines rotated each round: prefill and whole-call times."""
    calls = [calls_for(engines, prompt, new_tokens) for prompt in prompts]
    names = list(calls[0])
    prefill = {name: [] for name in names}
    whole = {name: [] for name in names}
    for repetition in range(repeats):
        shift = repetition % len(names)
        for name in names[shift:] + names[:shift]:
            for per_prompt in calls:
                start = clock()
                per_prompt[name](1)
                prefill[name].append(clock() - start)
                start = clock()
                per_prompt[name](new_tokens)
                whole[name].append(clock() - start)
    return {name: {"prefill_s": prefill[name], "whole_s": whole[name]} for name in names}


def teacher_forced(engines: dict, name: str, prompt: torch.Tensor, float32_ids: list[int]) -> dict:
    """An engine (onnxruntime, or llama.cpp, the control) fed the float32 ids: its scores against the float32
    model's, step by step."""
    sequence = torch.cat([prompt, torch.tensor([float32_ids])], dim=1)
    with torch.inference_mode():
        expected = engines["fp32"](sequence).logits[0, prompt.shape[1] - 1 : -1]
    if name == "llama.cpp":
        got = engines[name].forced_logits(prompt[0].tolist(), float32_ids)
    else:
        got = engines[name].forced_logits(sequence, prompt.shape[1])
    difference = (got - expected).abs()
    same = got.argmax(-1) == expected.argmax(-1)
    return {
        "steps": int(same.numel()),
        "steps_with_the_same_best_token": int(same.sum()),
        "largest_difference": float(difference.max()),
        "mean_difference": float(difference.mean()),
        "score_spread": float((expected.max(-1).values - expected.min(-1).values).mean()),
    }


def first_parting(engines: dict, prompt: torch.Tensor, float32_ids: list[int], ids: list[int]) -> dict | None:
    """Where ``ids`` part from the float32 ids: the step, both tokens and the float32 model's scores of them."""
    step = leading_agreement(ids, float32_ids)
    if step == len(float32_ids):
        return None
    sequence = torch.cat([prompt, torch.tensor([float32_ids[:step]], dtype=torch.long)], dim=1)
    with torch.inference_mode():
        scores = engines["fp32"](sequence).logits[0, -1]
    ours, theirs = float32_ids[step], ids[step]
    return {
        "step": step,
        "float32_token": ours,
        "other_token": theirs,
        "float32_scores": [float(scores[ours]), float(scores[theirs])],
        "float32_margin": float(scores[ours] - scores[theirs]),
    }


def read_limits(engines: dict, rate: float) -> dict:
    """Each format's bytes a step reads, and the tokens per second that reading them at ``rate`` allows."""
    from literate_transformer.core.checkpoints import resolve_decoder
    from literate_transformer.core.gguf import read_gguf
    from literate_transformer.parts.int4 import packed_bytes

    onnx = _onnx_weight_bytes(engines["onnxruntime"].proto_bytes)
    gguf = read_gguf(resolve_decoder())
    # llama.cpp's step reads every tensor but the token table's rows it does not look up: the tied table once.
    file_bytes = sum(info.nbytes for info in gguf.tensors.values())
    found = {
        "float32 weights (transformers, package fp32)": weight_bytes(engines["fp32"]),
        "int4 packed, bfloat16 scales and zeros (package int4)": packed_bytes(engines["int4"]),
        "MatMulNBits blocks, float32 scales and offsets (onnxruntime)": onnx,
        "the GGUF file's blocks (llama.cpp)": file_bytes,
    }
    return {name: {"bytes": size, "tokens_per_s": rate / size} for name, size in found.items()}


def _onnx_weight_bytes(proto_bytes: bytes) -> int:
    """The bytes of the graph's weights a step reads: every initializer but the rotary tables (one row each) and
    the token table's levels (gathered a row at a time; the head reads the same numbers as its blobs)."""
    import onnx

    model = onnx.load_from_string(proto_bytes)
    skipped = ("rotary.", "model.embed_tokens.levels")
    return sum(len(tensor.raw_data) for tensor in model.graph.initializer if not tensor.name.startswith(skipped))


def summarize(times: dict, new_tokens: int) -> dict:
    """Medians over rounds and prompts: prefill ms, tokens/s of the whole call and of the steps after the first."""
    prefill, whole = statistics.median(times["prefill_s"]), statistics.median(times["whole_s"])
    return {
        "prefill_ms": 1e3 * prefill,
        "whole_s": whole,
        "tokens_per_s": new_tokens / whole,
        # (Not a number where the whole call took no longer than its prefill: too few tokens to tell.)
        "decode_tokens_per_s": (new_tokens - 1) / (whole - prefill) if whole > prefill else float("nan"),
    }


def markdown_table(results: dict) -> str:
    """The table: one row per engine."""
    rows = [
        "| engine | tokens/s | decode tokens/s | prefill ms | × llama.cpp (decode) | × transformers | "
        "tokens/s, 1 thread, CPU time | ids = fp32 (leading tokens) | ids = llama.cpp (leading tokens) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in results["engines"].items():
        versus = entry.get("vs_llama_cpp_decode")
        rows.append(
            f"| {name} | {entry['tokens_per_s']:.1f} | {entry['decode_tokens_per_s']:.1f} | {entry['prefill_ms']:.1f} | "
            f"{'' if versus is None else f'{versus:.2f}'} | {entry['vs_transformers']:.2f} | "
            f"{entry.get('cpu_tokens_per_s', float('nan')):.1f} | "
            f"{'/'.join(str(n) for n in entry['agree_fp32'])} | "
            f"{'/'.join(str(n) for n in entry.get('agree_llama_cpp', [])) or 'n/a'} |"
        )
    rows += ["", "| format a step reads | MB | tokens/s the read allows |", "|---|---|---|"]
    for name, limit in results["read_limits"].items():
        rows.append(f"| {name} | {limit['bytes'] / 1e6:.1f} | {limit['tokens_per_s']:.0f} |")
    rows += ["", "| fed the fp32 ids, per prompt | steps with fp32's best token | largest score difference | "
             "mean score difference | first greedy step apart from fp32 (fp32 margin there) |", "|---|---|---|---|---|"]  # fmt: skip
    for name, forced in results["teacher_forced"].items():
        partings = results["partings"][name]
        rows.append(
            f"| {name} | " + " / ".join(f"{f['steps_with_the_same_best_token']}/{f['steps']}" for f in forced)
            + " | " + " / ".join(f"{f['largest_difference']:.3f}" for f in forced)
            + " | " + " / ".join(f"{f['mean_difference']:.4f}" for f in forced)
            + " | " + " / ".join("none" if p is None else f"{p['step']} ({p['float32_margin']:.3f})" for p in partings)
            + " |"
        )  # fmt: skip
    return "\n".join(rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds, after the warm-up")
    parser.add_argument("--threads", type=int, default=2, help="threads of every engine in the timed rounds")
    parser.add_argument("--llama-cpp", default=os.environ.get(LLAMA_CPP_ENV), help="a venv with llama-cpp-python")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "docs" / "benchmarks")
    parser.add_argument("--note", default="", help="free text stored in the results (e.g. what else was running)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    started = time.perf_counter()
    load_before = _load_average()
    torch.set_num_threads(args.threads)
    Llama, llama_note = import_llama_cpp(args.llama_cpp)
    context = 512
    engines = load_engines(Llama, args.threads, context)
    tokenizer = engines["tokenizer"]
    prompts = [
        torch.tensor(
            [
                tokenizer.apply_chat_template(
                    [{"role": "user", "content": text}], add_generation_prompt=True, return_dict=True
                )["input_ids"]
            ]
        )  # fmt: skip
        for text in PROMPTS
    ]
    # The warm-up: compiles, and its ids are the ones compared.
    ids: dict[str, list[list[int]]] = {}
    for prompt in prompts:
        for name, call in calls_for(engines, prompt, args.new_tokens).items():
            start = time.perf_counter()
            ids.setdefault(name, []).append(call(args.new_tokens))
            call(1)
            print(f"  warm-up {name}: {time.perf_counter() - start:.1f} s", flush=True)
    float32_ids = [engines["fp32"].generate(prompt, max_new_tokens=args.new_tokens)[0, prompt.shape[1] :].tolist()
                   for prompt in prompts]  # fmt: skip
    times = time_rounds(prompts, engines, args.new_tokens, args.repeats, time.perf_counter)
    results_engines = {}
    for name in times:
        entry = summarize(times[name], args.new_tokens)
        entry["agree_fp32"] = [leading_agreement(a, b) for a, b in zip(ids[name], float32_ids, strict=True)]
        if "llama.cpp" in ids:
            entry["agree_llama_cpp"] = [
                leading_agreement(a, b) for a, b in zip(ids[name], ids["llama.cpp"], strict=True)
            ]
        results_engines[name] = entry
    for entry in results_engines.values():
        entry["vs_transformers"] = entry["tokens_per_s"] / results_engines["transformers fp32"]["tokens_per_s"]
        if "llama.cpp" in results_engines:
            llama = results_engines["llama.cpp"]
            entry["vs_llama_cpp"] = entry["tokens_per_s"] / llama["tokens_per_s"]
            entry["vs_llama_cpp_decode"] = entry["decode_tokens_per_s"] / llama["decode_tokens_per_s"]
    # The same calls on one thread, in CPU time: one round, every prompt.
    set_threads(engines, 1, Llama, context)
    for prompt in prompts:
        for call in calls_for(engines, prompt, args.new_tokens).values():
            call(args.new_tokens)  # a warm-up on one thread
    cpu = time_rounds(prompts, engines, args.new_tokens, 1, time.process_time)
    for name, measured in cpu.items():
        summary = summarize(measured, args.new_tokens)
        results_engines[name]["cpu_tokens_per_s"] = summary["tokens_per_s"]
        results_engines[name]["cpu_decode_tokens_per_s"] = summary["decode_tokens_per_s"]
        results_engines[name]["cpu_prefill_ms"] = summary["prefill_ms"]
    if "llama.cpp" in results_engines:
        llama_cpu = results_engines["llama.cpp"]["cpu_decode_tokens_per_s"]
        for entry in results_engines.values():
            entry["cpu_vs_llama_cpp_decode"] = entry["cpu_decode_tokens_per_s"] / llama_cpu
    # The engines whose activations are rounded to 8 bits: onnxruntime, and llama.cpp as its control.
    rounded = [name for name in ("onnxruntime", "llama.cpp") if name in engines]
    forced = {name: [teacher_forced(engines, name, p, f) for p, f in zip(prompts, float32_ids, strict=True)]
              for name in rounded}  # fmt: skip
    partings = {
        name: [first_parting(engines, p, f, o) for p, f, o in zip(prompts, float32_ids, ids[name], strict=True)]
        for name in rounded
    }
    gc.collect()
    rate = streaming_rate()
    results = {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "versions": {**versions(), **_engine_versions()},
        "machine": _machine("cpu"),
        "llama_cpp": llama_note,
        "threads": args.threads,
        "new_tokens": args.new_tokens,
        "repeats": args.repeats,
        "prompts": list(PROMPTS),
        "prompt_lengths": [int(prompt.shape[1]) for prompt in prompts],
        "engines": results_engines,
        "teacher_forced": forced,
        "partings": partings,
        "streaming_bytes_per_s": rate,
        "read_limits": read_limits(engines, rate),
        "note": args.note,
    }
    results["load_average"] = {"before": load_before, "after": _load_average()}
    results["wall_time_s"] = round(time.perf_counter() - started, 1)
    header = (
        f"{results['date']}, {args.threads} threads (CPU time on 1), {args.new_tokens} new tokens after chat prompts "
        f"of {results['prompt_lengths']} tokens, load {load_before} -> {results['load_average']['after']}; "
        f"{llama_note}"
    )
    write_results(args.output_dir / "engines-cpu", results, header, markdown_table(results))
    return results


def _engine_versions() -> dict:
    import onnxruntime

    found = {"onnxruntime": onnxruntime.__version__}
    try:
        from llama_cpp import __version__

        found["llama-cpp-python"] = __version__
    except ImportError:
        pass
    return found


if __name__ == "__main__":
    main(sys.argv[1:])
