/*
 * The trained decoder's weights, from the 4- and 8-bit blocks of its GGUF file to the float32 numbers
 * onnxruntime multiplies by.
 *
 * The graph (decoder.onnx) names each matrix as float32 numbers in a file it does not hold,
 * decoder.weights; decoder.blocks holds what the GGUF file holds, and decoder.json's
 * weights.table says where (lt_site.export_decoder writes all three). Each entry of the table:
 *
 *   name, kind       the graph's name of the weight; "Q4_1", "Q4_0", "Q8_0", "F16" or "F32";
 *   shape [A, B]     its float32 array, row by row (a matrix as W^T, inputs first, for MatMul);
 *   block_axis       0: its blocks of 32 run down its columns (weight (a, b) has scale (a >> 5, b)),
 *                    1: along its rows (weight (a, b) has scale (a, b >> 5));
 *   levels, scales, minimums, or data: [offset, length] of each part in decoder.blocks
 *                    (levels in the order of the floats: four bits, two to a byte, the first in the
 *                    low four bits, or one signed byte; scales and minimums float16);
 *   weights          [offset, length] of its numbers in decoder.weights.
 *
 * Each weight is, in float32,
 *   Q8_0: w = d q          Q4_0: w = d (q - 8)          Q4_1: w = d q + m,
 * d q and then + m, as the package's literate_transformer.core.gguf.dequantize computes them, so
 * that the page multiplies by the package's weights, bit for bit (tests/test_export_decoder.py
 * runs this file with node against them). The product is exact, in JavaScript's doubles and in
 * float32 alike (an 11-bit scale times a level of at most 8 bits needs 19 of float32's 24 bits);
 * the sum is rounded once, when it is stored into the Float32Array, as float32's addition rounds it.
 *
 * The page's worker (prompt-worker.js) runs it; node (the tests) requires it.
 */
(function (root) {
  "use strict";

  const BLOCK = 32;

  // Every float16 as a float32, once: a table of all 65,536 (exact: float32 holds every float16).
  const HALVES = (() => {
    const table = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) {
      const sign = h & 0x8000 ? -1 : 1;
      const exponent = (h >> 10) & 0x1f;
      const fraction = h & 0x3ff;
      table[h] =
        exponent === 0
          ? sign * fraction * 2 ** -24
          : exponent === 31
            ? fraction
              ? NaN
              : sign * Infinity
            : sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
    }
    return table;
  })();

  const BYTES = { F32: 4, F16: 2 };

  function part(entry, key, blocks, expected) {
    const span = entry[key];
    if (!Array.isArray(span) || span.length !== 2) throw new Error(`${entry.name} has no ${key} in the table`);
    const [offset, length] = span;
    if (offset < 0 || offset + length > blocks.byteLength || length !== expected) {
      const where = `${length} bytes at ${offset}`;
      throw new Error(`${entry.name}'s ${key} (${where}) is not ${expected} bytes inside the blocks`);
    }
    return [blocks.byteOffset + offset, length];
  }

  /**
   * One weight's float32 numbers, written into out.
   * @param {object} entry  an entry of decoder.json's weights.table
   * @param {Uint8Array} blocks  decoder.blocks
   * @param {Float32Array} out  A * B numbers
   */
  function dequantize(entry, blocks, out) {
    const [A, B] = entry.shape;
    const count = A * B;
    const kind = entry.kind;
    if (out.length !== count) throw new Error(`${entry.name}: ${out.length} numbers given for ${count}`);
    if (kind === "F32" || kind === "F16") {
      const [offset] = part(entry, "data", blocks, count * BYTES[kind]);
      // Copied first: a typed array's view must start on a multiple of its element's size in its buffer.
      const raw = blocks.buffer.slice(offset, offset + count * BYTES[kind]);
      if (kind === "F32") out.set(new Float32Array(raw));
      else {
        const halves = new Uint16Array(raw);
        for (let i = 0; i < count; i++) out[i] = HALVES[halves[i]];
      }
      return out;
    }
    if (!(kind === "Q8_0" || kind === "Q4_0" || kind === "Q4_1")) throw new Error(`${entry.name} is ${kind}`);
    if ((entry.block_axis === 0 ? A : B) % BLOCK) throw new Error(`${entry.name}: ${entry.shape} is not in blocks`);
    const four = kind !== "Q8_0";
    const [levelsAt] = part(entry, "levels", blocks, four ? Math.ceil(count / 2) : count);
    const levels = four
      ? new Uint8Array(blocks.buffer, levelsAt, Math.ceil(count / 2))
      : new Int8Array(blocks.buffer, levelsAt, count);
    const halves = (key) => {
      const [at, length] = part(entry, key, blocks, (count / BLOCK) * 2);
      return new Uint16Array(blocks.buffer.slice(at, at + length));
    };
    const scales = halves("scales");
    const minimums = kind === "Q4_1" ? halves("minimums") : null;
    const zero = kind === "Q4_0" ? 8 : 0;
    // Level i: the low four bits of byte i >> 1 for even i, the high four for odd i; or byte i.
    const level = four ? (i) => (i & 1 ? levels[i >> 1] >> 4 : levels[i >> 1] & 15) : (i) => levels[i];

    if (entry.block_axis === 0) {
      // Down the columns: 32 rows share a row of B scales (and minimums), turned into floats once.
      const d = new Float32Array(B);
      const m = new Float32Array(B);
      for (let a = 0; a < A; a++) {
        if ((a & 31) === 0) {
          const start = (a >> 5) * B;
          for (let b = 0; b < B; b++) {
            d[b] = HALVES[scales[start + b]];
            if (minimums) m[b] = HALVES[minimums[start + b]];
          }
        }
        const row = a * B;
        if (minimums) for (let b = 0; b < B; b++) out[row + b] = d[b] * level(row + b) + m[b];
        else for (let b = 0; b < B; b++) out[row + b] = d[b] * (level(row + b) - zero);
      }
    } else {
      // Along the rows: each run of 32 numbers has its own scale (and minimum).
      for (let k = 0; k < count / BLOCK; k++) {
        const d = HALVES[scales[k]];
        const first = k * BLOCK;
        if (minimums) {
          const m = HALVES[minimums[k]];
          for (let i = first; i < first + BLOCK; i++) out[i] = d * level(i) + m;
        } else {
          for (let i = first; i < first + BLOCK; i++) out[i] = d * (level(i) - zero);
        }
      }
    }
    return out;
  }

  /**
   * The whole float32 file the graph names (decoder.weights), made from the blocks, weight by weight.
   * @param {object} weights  decoder.json's weights: {bytes, table}
   * @param {Uint8Array} blocks  decoder.blocks
   * @param {function} onProgress  called after each weight with (bytes written, bytes in all, the weight's name)
   * @returns {Uint8Array} decoder.weights
   */
  function weightsFile(weights, blocks, onProgress = () => {}) {
    const file = new Float32Array(weights.bytes / 4);
    let written = 0;
    for (const entry of weights.table) {
      const [offset, length] = entry.weights;
      if (offset % 4 || length !== entry.shape[0] * entry.shape[1] * 4 || offset + length > weights.bytes) {
        throw new Error(`${entry.name}: its numbers (${length} bytes at ${offset}) do not fit decoder.weights`);
      }
      dequantize(entry, blocks, file.subarray(offset / 4, (offset + length) / 4));
      written += length;
      onProgress(written, weights.bytes, entry.name);
    }
    return new Uint8Array(file.buffer);
  }

  const Blocks = { dequantize, weightsFile, HALVES };
  // The worker (and a page) gets a global; node (the tests) gets a module.
  if (typeof module !== "undefined" && module.exports) module.exports = Blocks;
  else root.Blocks = Blocks;
})(typeof self !== "undefined" ? self : globalThis);
