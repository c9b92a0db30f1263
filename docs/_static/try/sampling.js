/*
 * The next-token distribution under temperature, top-k and top-p, as transformers computes it.
 *
 * transformers' generate() with do_sample=True applies its logits processors in this
 * order (GenerationMixin._get_logits_processor), each only when it changes something:
 *
 *   1. temperature (TemperatureLogitsWarper), when it is not 1: every score divided by it;
 *   2. top-k (TopKLogitsWarper), when k is not 0: every score below the k-th highest
 *      becomes -infinity (scores equal to the k-th are all kept);
 *   3. top-p (TopPLogitsWarper), when p < 1: the scores sorted from lowest to highest,
 *      their probabilities summed in that order; a token whose running sum is at most
 *      1 - p is removed; the most likely token is always kept.
 *
 * Then the probabilities are the softmax of what is left, and sampling draws from them.
 * Greedy decoding (do_sample=False) applies none of them and takes the highest score.
 * tests/test_sampling_js.py runs this file in node and compares it with those three
 * classes of transformers on random scores.
 */
(function (root) {
  "use strict";

  /** softmax of a Float32Array (or Array), in float64; -Infinity gets 0. */
  function softmax(scores) {
    let max = -Infinity;
    for (const s of scores) if (s > max) max = s;
    const out = new Float64Array(scores.length);
    let sum = 0;
    for (let i = 0; i < scores.length; i++) {
      const e = scores[i] === -Infinity ? 0 : Math.exp(scores[i] - max);
      out[i] = e;
      sum += e;
    }
    for (let i = 0; i < out.length; i++) out[i] /= sum;
    return out;
  }

  /** The index of the highest score (the first of equals, as torch.argmax). */
  function argmax(scores) {
    let best = 0;
    for (let i = 1; i < scores.length; i++) if (scores[i] > scores[best]) best = i;
    return best;
  }

  /** The ids of the n highest scores, highest first. */
  function topIds(scores, n) {
    const ids = [];
    for (let i = 0; i < scores.length; i++) {
      if (ids.length < n || scores[i] > scores[ids[ids.length - 1]]) {
        let at = ids.length < n ? ids.length : n - 1;
        ids[at] = i;
        while (at > 0 && scores[ids[at]] > scores[ids[at - 1]]) {
          [ids[at], ids[at - 1]] = [ids[at - 1], ids[at]];
          at--;
        }
      }
    }
    return ids;
  }

  /**
   * Apply the processors to raw scores.
   *
   * @param {Float32Array} logits  the model's scores for the next token
   * @param {{temperature: number, topK: number, topP: number}} settings
   * @returns {{scores: Float64Array, removedBy: Uint8Array}}  the processed scores (-Infinity where
   *   removed) and, per token, 0 (kept), 1 (removed by top-k) or 2 (removed by top-p)
   */
  function process(logits, { temperature = 1, topK = 0, topP = 1 } = {}) {
    if (!(temperature > 0)) throw new RangeError(`temperature must be a positive number, got ${temperature}`);
    if (!Number.isInteger(topK) || topK < 0) throw new RangeError(`top-k must be an integer >= 0, got ${topK}`);
    if (!(topP > 0 && topP <= 1)) throw new RangeError(`top-p must be in (0, 1], got ${topP}`);
    const n = logits.length;
    const scores = Float64Array.from(logits);
    const removedBy = new Uint8Array(n);
    if (temperature !== 1) for (let i = 0; i < n; i++) scores[i] = Math.fround(logits[i] / temperature);
    if (topK !== 0 && topK < n) {
      const kth = scores[topIds(scores, topK)[topK - 1]];
      for (let i = 0; i < n; i++) {
        if (scores[i] < kth) {
          scores[i] = -Infinity;
          removedBy[i] = 1;
        }
      }
    }
    if (topP < 1) {
      const probabilities = softmax(scores);
      const order = Array.from(scores.keys()).sort((a, b) => scores[a] - scores[b] || a - b);
      let cumulative = 0;
      // All but the most likely token (the last in this order) may go.
      for (let r = 0; r < n - 1; r++) {
        const i = order[r];
        cumulative += probabilities[i];
        if (cumulative <= 1 - topP && scores[i] !== -Infinity) {
          scores[i] = -Infinity;
          removedBy[i] = 2;
        }
      }
    }
    return { scores, removedBy };
  }

  /**
   * The chart's numbers: the top n tokens of the raw scores, each with its probability under the temperature
   * alone, its probability after every processor (what sampling draws from), and what removed it.
   */
  function distribution(logits, settings, n = 10) {
    const { scores, removedBy } = process(logits, settings);
    const temperature = settings.temperature ?? 1;
    const tempered = softmax(temperature === 1 ? logits : Float64Array.from(logits, (s) => Math.fround(s / temperature)));
    const final = softmax(scores);
    return topIds(logits, n).map((id) => ({
      id,
      tempered: tempered[id],
      probability: final[id],
      removedBy: ["", "top-k", "top-p"][removedBy[id]],
    }));
  }

  /** Draw an index from probabilities with a uniform number u in [0, 1). */
  function sample(probabilities, u) {
    let cumulative = 0;
    let last = 0;
    for (let i = 0; i < probabilities.length; i++) {
      if (probabilities[i] === 0) continue;
      cumulative += probabilities[i];
      last = i;
      if (u < cumulative) return i;
    }
    return last;
  }

  const api = { softmax, argmax, topIds, process, distribution, sample };
  if (typeof module !== "undefined" && module.exports) {
    module.exports = api;
  } else {
    root.Sampling = api;
  }
})(typeof window !== "undefined" ? window : globalThis);
