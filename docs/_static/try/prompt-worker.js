/*
 * "Try your own prompt": the model's side, in a Web Worker, so that the page never waits on it.
 *
 * The page (prompt.js) starts this worker and asks it, one request at a time, to
 *   load     download the graph and the blocks (or take them from the browser's Cache Storage),
 *            turn the blocks into float32 (blocks.js), start onnxruntime-web on them;
 *   prompt   run a prompt's tokens from an empty cache: the next token's scores, the attention of
 *            the layers asked for, and the cache of keys and values kept here, as the prompt's;
 *   step     run one more token on the cache kept here (and keep the longer cache);
 *   rewind   go back to the prompt's cache (Generate after Run does not read the prompt again);
 *   attention  one layer's attention on a prompt, leaving the caches as they are.
 * While it loads it posts {progress: {phase, done, total}}: "download" (bytes unpacked),
 * "convert" (bytes of float32 weights written), "start" (onnxruntime starting, no measure).
 *
 * Every request gets one answer, {id, result} or {id, error}; big arrays (the scores, the
 * attention) are transferred, not copied. The keys and values never leave the worker.
 *
 * The graph's inputs and outputs are named in one place, GRAPH below; so is what is handed to
 * onnxruntime besides the graph (the float32 numbers of its matrices, externalData): a graph that
 * kept the blocks itself (onnxruntime's MatMulNBits, say) would change those two and nothing else.
 */
/* global ort, xzwasm, Blocks */
"use strict";

const VENDOR = new URL("../vendor/", self.location.href);
importScripts(
  new URL("onnxruntime-web/ort.wasm.min.js", VENDOR).href,
  new URL("xzwasm/xzwasm.min.js", VENDOR).href,
  new URL("blocks.js", self.location.href).href,
);

const CACHE_NAME = "literate-transformer-decoder";

// ---------------------------------------------------------------------------
// The graph: its names, and what onnxruntime is given with it
// ---------------------------------------------------------------------------
const GRAPH = {
  // The float32 numbers of the graph's matrices, made from the blocks: the file the graph names.
  externalData(metadata, blocks, onProgress) {
    const data = Blocks.weightsFile(metadata.weights, blocks, onProgress);
    return [{ path: metadata.weights.file, data }];
  },
  emptyCache(config) {
    const { num_hidden_layers: layers, num_key_value_heads: heads, head_dim: size } = config;
    const cache = {};
    for (let i = 0; i < layers; i++) {
      for (const kind of ["key", "value"]) {
        cache[`past_${kind}.${i}`] = new ort.Tensor("float32", new Float32Array(0), [1, heads, 0, size]);
      }
    }
    return cache;
  },
  feeds(ids, cache) {
    return { input_ids: new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, ids.length]), ...cache };
  },
  fetches(config, attentionLayers, withCache) {
    const names = ["logits", ...attentionLayers.map((i) => `attention.${i}`)];
    if (withCache) {
      for (let i = 0; i < config.num_hidden_layers; i++) names.push(`present_key.${i}`, `present_value.${i}`);
    }
    return names;
  },
  // The outputs present_*.i become the next step's inputs past_*.i.
  nextCache(config, output) {
    const cache = {};
    for (let i = 0; i < config.num_hidden_layers; i++) {
      for (const kind of ["key", "value"]) cache[`past_${kind}.${i}`] = output[`present_${kind}.${i}`];
    }
    return cache;
  },
  attention(output, layer) {
    return output[`attention.${layer}`];
  },
};

const state = {
  session: null,
  config: null,
  // The prompt's cache (kept for rewind) and the cache of the last step.
  promptCache: null,
  cache: null,
  length: 0,
  promptLength: 0,
  // Requests are served one after another, in the order they came.
  queue: Promise.resolve(),
};

// At most a message every 1 % of a phase (and its first and last): the page redraws its bar for each.
let reported = { phase: null, done: 0 };
function progress(phase, done, total) {
  if (phase === reported.phase && done !== total && done - reported.done < total / 100) return;
  reported = { phase, done };
  postMessage({ progress: { phase, done, total } });
}

// ---------------------------------------------------------------------------
// Loading, once
// ---------------------------------------------------------------------------
async function networkResponse(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`could not download ${new URL(url).pathname} (HTTP ${response.status})`);
  return response;
}

function counted(body, onChunk) {
  return body.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        onChunk(chunk.byteLength);
        controller.enqueue(chunk);
      },
    }),
  );
}

// format: "gzip" (the browser unpacks it, onBytes counting the bytes unpacked) or "xz" (xzwasm does; its chunks
// are views of its own memory, overwritten by the next: they go straight into one buffer, uncounted).
async function unpack(body, format, onBytes = () => {}) {
  const stream =
    format === "gzip"
      ? counted(body.pipeThrough(new DecompressionStream("gzip")), onBytes)
      : new xzwasm.XzReadableStream(body);
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// The files, from Cache Storage when this export was downloaded before (its digest is in the keys).
async function downloadExport(files, digest, counts) {
  const cache = typeof caches !== "undefined" ? await caches.open(CACHE_NAME).catch(() => null) : null;
  const keys = files.map((url) => {
    const key = new URL(url);
    key.searchParams.set("digest", digest);
    return key;
  });
  const hits = cache ? await Promise.all(keys.map((key) => cache.match(key))) : [];
  if (cache && hits.every(Boolean)) {
    counts.fromCache = true;
    return Promise.all(hits.map((hit) => unpack(counted(hit.body, (n) => (counts.cached += n)), "gzip", counts.add)));
  }
  counts.fromCache = false;
  // Other exports' entries are dropped.
  if (cache) {
    for (const old of await cache.keys()) if (!keys.some((key) => key.href === old.url)) await cache.delete(old);
  }
  return Promise.all(
    files.map(async (url, i) => {
      const response = await networkResponse(url);
      const body = counted(response.body, (n) => (counts.downloaded += n));
      if (!cache) return unpack(body, "gzip", counts.add);
      // One stream to the cache, one to the model.
      const [toCache, toModel] = body.tee();
      const stored = cache
        .put(keys[i], new Response(toCache, { headers: { "Content-Type": "application/gzip" } }))
        .then(() => null)
        .catch((error) => error.message);
      const bytes = await unpack(toModel, "gzip", counts.add);
      counts.notKept = (await stored) || counts.notKept;
      return bytes;
    }),
  );
}

async function load({ files, metadata }) {
  const started = performance.now();
  state.config = metadata.config;
  const total = metadata.model.bytes + metadata.blocks.bytes;
  const counts = { downloaded: 0, cached: 0, unpacked: 0, fromCache: null, notKept: null };
  counts.add = (n) => {
    counts.unpacked += n;
    progress("download", counts.unpacked, total);
  };
  progress("download", 0, total);
  const [wasm, [model, blocks]] = await Promise.all([
    networkResponse(files.wasm).then((response) =>
      unpack(counted(response.body, (n) => (counts.downloaded += n)), "xz"),
    ),
    downloadExport([files.model, files.blocks], metadata.digest, counts),
  ]);
  const downloadMs = performance.now() - started;

  // The blocks become float32 numbers, weight by weight; the page draws the bar.
  const converting = performance.now();
  const externalData = GRAPH.externalData(metadata, blocks, (done, all) => progress("convert", done, all));
  const convertMs = performance.now() - converting;

  progress("start", 0, 0);
  const starting = performance.now();
  // One thread: a static site cannot send the headers that shared memory (threads) needs.
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.wasmBinary = wasm;
  // In a worker onnxruntime would look for its loader beside this script: it is in the vendor folder.
  ort.env.wasm.wasmPaths = { mjs: new URL("onnxruntime-web/ort-wasm-simd-threaded.mjs", VENDOR).href };
  state.session = await ort.InferenceSession.create(model, { executionProviders: ["wasm"], externalData });
  const sessionMs = performance.now() - starting;
  // What the worker itself fetched (the page's own timeline does not see a worker's requests).
  const fetchedBytes = performance
    .getEntriesByType("resource")
    .reduce((sum, entry) => sum + (entry.encodedBodySize || 0), 0);
  return {
    fromCache: counts.fromCache,
    downloadedBytes: counts.downloaded,
    cachedBytes: counts.cached,
    fetchedBytes,
    notKept: counts.notKept,
    timings: { downloadMs, convertMs, sessionMs, workerLoadMs: performance.now() - started },
  };
}

// ---------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------
function needSession() {
  if (!state.session) throw new Error("the model is not loaded");
}

// An array that is alone in its buffer (copied if it shares one), so that its buffer can be handed over.
function own(array) {
  return array.byteOffset === 0 && array.byteLength === array.buffer.byteLength ? array : array.slice();
}

// The scores of the next token, and the attentions asked for, as transferable arrays.
function answer(output, attentionLayers) {
  const logits = own(output.logits.data);
  const attentions = {};
  const transfer = [logits.buffer];
  for (const layer of attentionLayers) {
    const tensor = GRAPH.attention(output, layer);
    const data = own(tensor.data);
    attentions[layer] = { data, dims: tensor.dims };
    transfer.push(data.buffer);
  }
  return { result: { logits, attentions }, transfer };
}

async function prompt({ ids, layers = [] }) {
  needSession();
  const started = performance.now();
  const output = await state.session.run(
    GRAPH.feeds(ids, GRAPH.emptyCache(state.config)),
    GRAPH.fetches(state.config, layers, true),
  );
  state.promptCache = state.cache = GRAPH.nextCache(state.config, output);
  state.promptLength = state.length = ids.length;
  const reply = answer(output, layers);
  reply.result.modelMs = performance.now() - started;
  return reply;
}

async function step({ token }) {
  needSession();
  if (!state.cache) throw new Error("no prompt was run: there is no cache to continue");
  const started = performance.now();
  const output = await state.session.run(GRAPH.feeds([token], state.cache), GRAPH.fetches(state.config, [], true));
  state.cache = GRAPH.nextCache(state.config, output);
  state.length += 1;
  const reply = answer(output, []);
  reply.result.modelMs = performance.now() - started;
  reply.result.position = state.length;
  return reply;
}

function rewind() {
  if (!state.promptCache) throw new Error("no prompt was run: there is no cache to go back to");
  state.cache = state.promptCache;
  state.length = state.promptLength;
  return { result: { length: state.length } };
}

async function attention({ ids, layer }) {
  needSession();
  const output = await state.session.run(
    GRAPH.feeds(ids, GRAPH.emptyCache(state.config)),
    GRAPH.fetches(state.config, [layer], false),
  );
  return answer(output, [layer]);
}

const REQUESTS = {
  load: async (request) => ({ result: await load(request) }),
  prompt,
  step,
  rewind,
  attention,
};

self.onmessage = (event) => {
  const { id, type, ...request } = event.data;
  state.queue = state.queue.then(async () => {
    try {
      const handler = REQUESTS[type];
      if (!handler) throw new Error(`the worker has no request ${type}`);
      const { result, transfer = [] } = await handler(request);
      postMessage({ id, result }, transfer);
    } catch (error) {
      postMessage({ id, error: { name: error.name, message: error.message, stack: String(error.stack || "") } });
    }
  });
};
