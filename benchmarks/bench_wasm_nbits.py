r"""Time ``MatMulNBits`` in the site's onnxruntime-web (WebAssembly, one thread) against a float32 ``MatMul``.

The prompt page runs the trained decoder in the reader's browser with the
vendored ``onnxruntime-web`` (``docs/_static/vendor/onnxruntime-web``).  Its
WebAssembly build registers ``onnxruntime``'s contrib operators,
``MatMulNBits`` among them; whether the page can multiply the file's blocks
as they are (:mod:`literate_transformer.onnx_export`) instead of making
float32 weights from them depends on how fast that operator runs there.
This script writes three pairs of one-operator graphs with SmolLM2's sizes
(``576 -> 1536``, an ``up_proj``; ``576 -> 49152``, the head): random 4-bit
blocks (``accuracy_level`` 4 and 1) and 8-bit blocks against float32
weights, and times each in Node.js with the vendored runtime, its
WebAssembly file decompressed from the ``.xz`` the site serves.

Output: ``wasm-nbits.json`` and ``wasm-nbits.md`` in ``--output-dir`` (default ``docs/benchmarks``).

Usage::

    python benchmarks/bench_wasm_nbits.py          # needs node on PATH
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "docs" / "_static" / "vendor" / "onnxruntime-web"
#: (name, K, N, kind, bits, accuracy_level): the graphs timed.
GRAPHS = (
    ("up_proj float32 MatMul", 576, 1536, "float", 0, 0),
    ("up_proj MatMulNBits 4-bit, int8 activations", 576, 1536, "nbits", 4, 4),
    ("up_proj MatMulNBits 4-bit, float32 activations", 576, 1536, "nbits", 4, 1),
    ("head float32 MatMul", 576, 49152, "float", 0, 0),
    ("head MatMulNBits 8-bit, int8 activations", 576, 49152, "nbits", 8, 4),
)
SCRIPT = r"""
const ort = require(process.argv[2] + '/ort.wasm.min.js');
ort.env.wasm.numThreads = 1;
ort.env.wasm.wasmPaths = process.argv[2] + '/';
const fs = require('fs');
(async () => {
  const found = {};
  for (const [name, file, K, calls] of JSON.parse(process.argv[3])) {
    const session = await ort.InferenceSession.create(new Uint8Array(fs.readFileSync(file)));
    const x = new ort.Tensor('float32', new Float32Array(K).fill(0.5), [1, K]);
    for (let i = 0; i < 3; i++) await session.run({x});
    const times = [];
    for (let round = 0; round < 5; round++) {
      const start = performance.now();
      for (let i = 0; i < calls; i++) await session.run({x});
      times.push((performance.now() - start) / calls * 1000);
    }
    found[name] = Math.min(...times);
  }
  console.log(JSON.stringify(found));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def graph(K: int, N: int, kind: str, bits: int, accuracy_level: int) -> bytes:
    """One operator, ``x (1, K) -> y (1, N)``: a float32 ``MatMul`` or a ``MatMulNBits`` of random blocks."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])]
    if kind == "float":
        weights = [numpy_helper.from_array(rng.standard_normal((K, N), dtype=np.float32), "W")]
        node = helper.make_node("MatMul", ["x", "W"], ["y"])
    else:
        blobs = rng.integers(0, 256, (N, K // 32, 32 * bits // 8), dtype=np.uint8)
        scales = rng.random((N, K // 32), dtype=np.float32) * 0.01
        weights = [numpy_helper.from_array(blobs, "B"), numpy_helper.from_array(scales, "scales")]
        node = helper.make_node("MatMulNBits", ["x", "B", "scales"], ["y"], domain="com.microsoft", K=K, N=N,
                                bits=bits, block_size=32, accuracy_level=accuracy_level)  # fmt: skip
    model = helper.make_model(
        helper.make_graph([node], "one_multiply", inputs, outputs, weights),
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
    )
    model.ir_version = 10
    return model.SerializeToString()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--output-dir", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args(argv)
    node = shutil.which("node")
    if node is None:
        raise SystemExit("node is not on PATH: this benchmark runs onnxruntime-web in Node.js")
    with tempfile.TemporaryDirectory() as folder:
        runtime = Path(folder)
        for name in ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs"):
            shutil.copy(VENDOR / name, runtime / name)
        wasm = lzma.decompress((VENDOR / "ort-wasm-simd-threaded.wasm.xz").read_bytes())
        (runtime / "ort-wasm-simd-threaded.wasm").write_bytes(wasm)
        jobs = []
        for index, (name, K, N, kind, bits, level) in enumerate(GRAPHS):
            path = runtime / f"graph{index}.onnx"
            path.write_bytes(graph(K, N, kind, bits, level))
            jobs.append([name, str(path), K, 20 if N > 10_000 else 200])
        (runtime / "time.js").write_text(SCRIPT)
        done = subprocess.run([node, str(runtime / "time.js"), str(runtime), json.dumps(jobs)], check=True,
                              capture_output=True, text=True)  # fmt: skip
        microseconds = json.loads(done.stdout.strip().splitlines()[-1])
    version = (VENDOR / "README.txt").read_text().split(" (", 1)[0]
    results = {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "runtime": version,
        "node": subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip(),
        "threads": 1,
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "microseconds": microseconds,
    }
    rows = ["| one multiply, batch 1 | µs (best of 5 rounds) |", "|---|---|"]
    rows += [f"| {name} | {value:.0f} |" for name, value in microseconds.items()]
    header = f"{results['date']}, {version}, Node.js {results['node']}, one thread, load {results['load_average']}"
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "wasm-nbits.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.output_dir / "wasm-nbits.md").write_text(header + "\n\n" + "\n".join(rows) + "\n")
    print(header + "\n\n" + "\n".join(rows))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
