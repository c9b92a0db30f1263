/*
 * "Try your own prompt": the trained decoder (SmolLM2-135M-Instruct, the package's own Llama) in this browser.
 *
 * On the first Run, Generate or call of the hook (and only then) the page downloads, each
 * compressed and unpacked here:
 *   - prompt/decoder.json: the tokenizer's vocabulary and merges, the chat template's wrapping,
 *     the config and what the export measured (gzip, unpacked by the browser's DecompressionStream);
 *   - the graph, prompt/decoder.onnx: the weights in the GGUF file's 4- and 8-bit blocks (gzip),
 *     kept in the browser's Cache Storage after the first visit, under the export's digest;
 *   - onnxruntime-web's WebAssembly runtime (xz, unpacked by the vendored xzwasm).
 * onnxruntime turns the blocks into float32 matrices once, when it loads the graph; then each
 * call of the graph is one step of generation: the new tokens in, the cache of keys and values
 * of every layer in and out, the next token's scores out (and, for the prompt, every layer's
 * attention probabilities).
 *
 * The page tokenizes with bpe.js, reshapes the next-token distribution with sampling.js
 * (temperature, top-k, top-p, in transformers' order), and draws: the tokens, the top 10
 * bars, the generated text with its speed, and one layer's and head's attention on the prompt.
 *
 * For checks, window.literateTransformer has
 *   complete(prompt, {maxNewTokens = 32, chat = false}) -> {inputIds, outputIds, topTokens}:
 *     greedy decoding (stopping early at the end-of-answer token, as generate() does);
 *     topTokens is the first step's top 10, [{id, probability}], of the model's own softmax;
 *   tokenize(text) -> ids, wrap(message) -> the chat template's text, and timings.
 */
(function () {
  "use strict";

  const HERE = document.currentScript.src;
  const FILES = {
    metadata: new URL("prompt/decoder.json.gz", HERE),
    model: new URL("prompt/decoder.onnx.gz", HERE),
    runtime: new URL("../vendor/onnxruntime-web/ort.wasm.min.js", HERE),
    wasm: new URL("../vendor/onnxruntime-web/ort-wasm-simd-threaded.wasm.xz", HERE),
    xz: new URL("../vendor/xzwasm/xzwasm.min.js", HERE),
  };
  const CACHE_NAME = "literate-transformer-decoder";
  //: The longest prompt the page runs (the model reads 8192 positions; the page's memory and patience fewer).
  const MAX_PROMPT_TOKENS = 1024;
  //: Prompts up to this length get every layer's attention at once; longer ones the chosen layer's only.
  const ALL_LAYERS_UP_TO = 256;
  const TOP = 10;

  const api = (window.literateTransformer = {
    downloadedBytes: 0,
    cachedBytes: 0,
    modelFromCache: null,
    timings: { loadMs: null, firstTokenMs: null, tokensPerSecond: null, modelMsPerStep: null, redrawMs: null },
    lastRun: null,
    ready: false,
  });
  const state = { loading: null, session: null, tokenizer: null, metadata: null, busy: false, stop: false, runs: 0 };
  const view = { logits: null, attentions: null, tokens: null, promptLength: 0 };
  let page;

  // ---------------------------------------------------------------------------
  // Messages
  // ---------------------------------------------------------------------------
  function status(text) {
    if (page) page.status.textContent = text;
  }

  function say(kind, text) {
    if (!page) return;
    const item = document.createElement("p");
    item.className = `try-message try-message--${kind}`;
    item.textContent = text;
    page.messages.append(item);
  }

  // ---------------------------------------------------------------------------
  // Loading, once
  // ---------------------------------------------------------------------------
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

  async function networkResponse(url) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`could not download ${url.pathname} (HTTP ${response.status})`);
    return response;
  }

  function progress(bytes) {
    api.downloadedBytes += bytes;
    status(`Downloading the model and the runtime: ${(api.downloadedBytes / 1e6).toFixed(1)} MB…`);
  }

  // format: "gzip" (the browser unpacks it), "xz" (xzwasm does) or null.
  async function unpack(body, format) {
    const stream =
      format === "gzip"
        ? body.pipeThrough(new DecompressionStream("gzip"))
        : format === "xz"
          ? new xzwasm.XzReadableStream(body)
          : body;
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  async function download(url, format) {
    return unpack(counted((await networkResponse(url)).body, progress), format);
  }

  // The graph, from Cache Storage when this export was downloaded before (its digest is in the key).
  async function downloadModel(digest) {
    const key = new URL(FILES.model);
    key.searchParams.set("digest", digest);
    const cache = typeof caches !== "undefined" ? await caches.open(CACHE_NAME).catch(() => null) : null;
    if (cache) {
      const hit = await cache.match(key);
      if (hit) {
        api.modelFromCache = true;
        return unpack(counted(hit.body, (bytes) => (api.cachedBytes += bytes)), "gzip");
      }
    }
    api.modelFromCache = false;
    const response = await networkResponse(FILES.model);
    if (!cache) return unpack(counted(response.body, progress), "gzip");
    // One stream to the cache, one to the model; other exports' entries are dropped.
    const [toCache, toModel] = counted(response.body, progress).tee();
    const stored = (async () => {
      for (const old of await cache.keys()) if (old.url !== key.href) await cache.delete(old);
      await cache.put(key, new Response(toCache, { headers: { "Content-Type": "application/gzip" } }));
    })().catch((error) => say("info", `The model could not be kept for your next visit (${error.message}).`));
    const bytes = await unpack(toModel, "gzip");
    await stored;
    return bytes;
  }

  function loadScript(url) {
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = url;
      script.onload = resolve;
      script.onerror = () => reject(new Error(`could not load ${url.pathname}`));
      document.head.append(script);
    });
  }

  function load() {
    state.loading ??= (async () => {
      const start = performance.now();
      const metadata = JSON.parse(new TextDecoder().decode(await download(FILES.metadata, "gzip")));
      if (metadata.format !== "literate-transformer-decoder-export/1") {
        throw new Error(`decoder.json is of format ${metadata.format}, which this page does not read`);
      }
      state.metadata = metadata;
      state.tokenizer = new ByteLevelBPE(metadata.tokenizer);
      fillSelects();
      showWrapped();
      await Promise.all([loadScript(FILES.runtime), loadScript(FILES.xz)]);
      const [wasm, model] = await Promise.all([download(FILES.wasm, "xz"), downloadModel(metadata.digest)]);
      status("Starting the model (its 4- and 8-bit blocks become float32 matrices, once)…");
      // One thread: a static site cannot send the headers that shared memory (threads) needs.
      ort.env.wasm.numThreads = 1;
      ort.env.wasm.wasmBinary = wasm;
      state.session = await ort.InferenceSession.create(model, {
        executionProviders: ["wasm"],
        // Fold the blocks (DequantizeLinear) into float32 weights now, not at every step.
        extra: { session: { disable_quant_qdq: "1" } },
      });
      api.timings.loadMs = performance.now() - start;
      api.ready = true;
      status(`Model loaded in ${(api.timings.loadMs / 1000).toFixed(1)} s.`);
    })();
    return state.loading;
  }

  // ---------------------------------------------------------------------------
  // The model: one step of generation
  // ---------------------------------------------------------------------------
  function emptyCache() {
    const { num_hidden_layers: layers, num_key_value_heads: heads, head_dim: size } = state.metadata.config;
    const empty = () => new ort.Tensor("float32", new Float32Array(0), [1, heads, 0, size]);
    const cache = {};
    for (let i = 0; i < layers; i++) {
      cache[`past_key.${i}`] = empty();
      cache[`past_value.${i}`] = empty();
    }
    return cache;
  }

  // ids: the new tokens; cache: the past; attentionLayers: the layers whose attention to fetch.
  async function step(ids, cache, attentionLayers = []) {
    const layers = state.metadata.config.num_hidden_layers;
    const fetches = ["logits", ...attentionLayers.map((i) => `attention.${i}`)];
    for (let i = 0; i < layers; i++) fetches.push(`present_key.${i}`, `present_value.${i}`);
    const feeds = { input_ids: new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, ids.length]), ...cache };
    const output = await state.session.run(feeds, fetches);
    const next = {};
    for (let i = 0; i < layers; i++) {
      next[`past_key.${i}`] = output[`present_key.${i}`];
      next[`past_value.${i}`] = output[`present_value.${i}`];
    }
    const attentions = {};
    for (const i of attentionLayers) attentions[i] = output[`attention.${i}`];
    return { logits: output.logits.data, cache: next, attentions };
  }

  function settings() {
    return {
      temperature: Number(page.temperature.value),
      topK: Math.max(0, Math.round(Number(page.topK.value) || 0)),
      topP: Number(page.topP.value),
    };
  }

  function promptText() {
    return page.chat.checked ? wrap(page.text.value) : page.text.value;
  }

  function wrap(message) {
    const { before, after } = state.metadata.chat;
    return before + message + after;
  }

  function encodePrompt(text) {
    const ids = state.tokenizer.encode(text);
    if (!ids.length) throw new RangeError("The prompt is empty: type something first.");
    if (ids.length > MAX_PROMPT_TOKENS) {
      throw new RangeError(
        `The prompt is ${ids.length} tokens long; this page runs at most ${MAX_PROMPT_TOKENS} (shorten it).`,
      );
    }
    return ids;
  }

  // The prompt's step: the first next-token scores, and attention (all layers for a short prompt).
  async function runPrompt(ids) {
    const layers = state.metadata.config.num_hidden_layers;
    const wanted =
      ids.length <= ALL_LAYERS_UP_TO ? Array.from({ length: layers }, (_, i) => i) : [Number(page.layer.value || 0)];
    const result = await step(ids, emptyCache(), wanted);
    view.attentions = result.attentions;
    view.promptLength = ids.length;
    view.promptIds = ids;
    state.runs += 1;
    api.lastRun = { runId: state.runs, inputIds: ids, layers: Object.keys(result.attentions).map(Number) };
    return result;
  }

  // ---------------------------------------------------------------------------
  // Drawing
  // ---------------------------------------------------------------------------
  function showTokens(ids) {
    const tokenizer = state.tokenizer;
    page.tokens.replaceChildren(`${ids.length} tokens: `);
    for (const id of ids) {
      const code = document.createElement("code");
      code.textContent = tokenizer.display(id).replace(/\n/g, "\\n");
      code.title = `id ${id}`;
      page.tokens.append(code, " ");
    }
  }

  function showWrapped() {
    if (!page || !state.metadata) return;
    page.wrapped.hidden = !page.chat.checked;
    page.wrapped.textContent = page.chat.checked ? wrap(page.text.value) : "";
  }

  // The top 10 of the current scores: a bar per token, its length the probability sampling would draw it with
  // under the controls; a removed token is greyed, its outline the probability it had under the temperature alone.
  function drawChart() {
    if (!view.logits) return;
    const started = performance.now();
    let rows;
    try {
      rows = Sampling.distribution(view.logits, settings(), TOP);
    } catch (error) {
      page.chartNote.textContent = error.message;
      return;
    }
    const scale = Math.max(...rows.map((row) => Math.max(row.tempered, row.probability)), 1e-9);
    const list = document.createElement("ol");
    list.className = "prompt-bars";
    for (const row of rows) {
      const item = document.createElement("li");
      item.className = row.removedBy ? "prompt-bar prompt-bar--removed" : "prompt-bar";
      item.dataset.id = row.id;
      const label = document.createElement("code");
      label.className = "prompt-bar-token";
      label.textContent = JSON.stringify(state.tokenizer.display(row.id)).slice(1, -1);
      const track = document.createElement("span");
      track.className = "prompt-bar-track";
      const outline = document.createElement("span");
      outline.className = "prompt-bar-tempered";
      outline.style.width = `${(100 * row.tempered) / scale}%`;
      const fill = document.createElement("span");
      fill.className = "prompt-bar-fill";
      fill.style.width = `${(100 * row.probability) / scale}%`;
      track.append(outline, fill);
      const value = document.createElement("span");
      value.className = "prompt-bar-value";
      value.textContent = row.removedBy
        ? `removed by ${row.removedBy} (was ${(100 * row.tempered).toFixed(1)} %)`
        : `${(100 * row.probability).toFixed(1)} %`;
      item.title = `id ${row.id}`;
      item.append(label, track, value);
      list.append(item);
    }
    page.chart.replaceChildren(list);
    page.chartNote.textContent = "";
    api.lastChart = rows;
    requestAnimationFrame(() => {
      api.timings.redrawMs = performance.now() - started;
      api.redraws = (api.redraws || 0) + 1;
    });
  }

  function fillSelects() {
    if (!page || page.layer.options.length) return;
    const { num_hidden_layers: layers, num_attention_heads: heads } = state.metadata.config;
    for (let i = 0; i < layers; i++) page.layer.add(new Option(`layer ${i}`, i));
    for (let h = 0; h < heads; h++) page.head.add(new Option(`head ${h}`, h));
  }

  // The theme's colours, resolved by the browser.
  function themeColour(variable, fallback) {
    const probe = document.createElement("span");
    probe.style.color = `var(${variable}, ${fallback})`;
    page.root.append(probe);
    const rgb = getComputedStyle(probe).color.match(/[\d.]+/g).slice(0, 3).map(Number);
    probe.remove();
    return rgb;
  }

  // One heatmap: row = query token, column = key token (the causal mask leaves the upper triangle empty).
  async function drawAttention() {
    if (!view.attentions) return;
    const layer = Number(page.layer.value);
    const head = Number(page.head.value);
    if (!view.attentions[layer]) {
      // A long prompt: only one layer was kept; run the prompt again for this one.
      const result = await step(view.promptIds, emptyCache(), [layer]);
      view.attentions = result.attentions;
    }
    const tensor = view.attentions[layer];
    const [, heads, length, keys] = tensor.dims;
    const data = tensor.data;
    const canvas = page.attention;
    canvas.width = keys;
    canvas.height = length;
    const context = canvas.getContext("2d");
    const image = context.createImageData(keys, length);
    const background = themeColour("--pst-color-background", "#ffffff");
    const ink = themeColour("--pst-color-primary", "#0a7d91");
    const offset = head * length * keys;
    for (let cell = 0; cell < length * keys; cell++) {
      const shade = Math.sqrt(data[offset + cell]);
      for (let c = 0; c < 3; c++) image.data[cell * 4 + c] = background[c] + (ink[c] - background[c]) * shade;
      image.data[cell * 4 + 3] = 255;
    }
    context.putImageData(image, 0, 0);
    canvas.onmousemove = (event) => {
      const box = canvas.getBoundingClientRect();
      const q = Math.min(length - 1, Math.floor(((event.clientY - box.top) / box.height) * length));
      const k = Math.min(keys - 1, Math.floor(((event.clientX - box.left) / box.width) * keys));
      const show = (id) => JSON.stringify(state.tokenizer.display(id));
      page.readout.textContent =
        `layer ${layer}, head ${head}: ${show(view.promptIds[q])} → ${show(view.promptIds[k])} = ` +
        data[offset + q * keys + k].toFixed(3);
    };
    page.attentionCaption.textContent =
      `Layer ${layer}, head ${head} (of ${heads}): ${length} prompt tokens, each row one token, each column a token ` +
      "it may attend to.";
  }

  // ---------------------------------------------------------------------------
  // Run and Generate
  // ---------------------------------------------------------------------------
  async function guarded(work) {
    if (state.busy) return;
    state.busy = true;
    page.messages.replaceChildren();
    page.run.disabled = page.generate.disabled = true;
    page.stop.disabled = false;
    try {
      await load();
      await work();
    } catch (error) {
      if (error instanceof RangeError) say("error", error.message);
      else {
        say("error", `Something went wrong: ${error.message}`);
        console.error(error);
      }
    } finally {
      state.busy = false;
      page.run.disabled = page.generate.disabled = false;
      page.stop.disabled = true;
    }
  }

  async function runOnce() {
    const ids = encodePrompt(promptText());
    showTokens(ids);
    status("Running the prompt…");
    const started = performance.now();
    const result = await runPrompt(ids);
    api.timings.firstTokenMs = performance.now() - started;
    view.logits = result.logits;
    drawChart();
    await drawAttention();
    page.output.textContent = "";
    status(`${ids.length} tokens read in ${Math.round(api.timings.firstTokenMs)} ms: the chart is the next token's.`);
  }

  async function generateTokens() {
    const ids = encodePrompt(promptText());
    const maxNew = Math.max(1, Math.min(512, Math.round(Number(page.maxNew.value) || 64)));
    const sample = page.sample.checked;
    const eos = state.metadata.config.eos_token_id;
    showTokens(ids);
    state.stop = false;
    const out = [];
    page.output.textContent = "";
    page.speed.textContent = "";
    const started = performance.now();
    let result = await runPrompt(ids);
    api.timings.firstTokenMs = performance.now() - started;
    view.logits = result.logits;
    drawChart();
    await drawAttention();
    // The text is drawn once per frame, whatever the number of steps in it; the chart at most four times a second
    // (and after the last step), so that drawing takes little from the model's time.
    let painting = false;
    let chartDrawn = 0;
    const paint = (last = false) => {
      if (painting) return;
      painting = true;
      requestAnimationFrame(() => {
        const paintStarted = performance.now();
        painting = false;
        page.output.textContent = state.tokenizer.decode(out, { skipSpecial: true });
        if (api.timings.tokensPerSecond !== null) {
          page.speed.textContent = `${out.length} tokens, ${api.timings.tokensPerSecond.toFixed(1)} tokens/s`;
        }
        if (last || paintStarted - chartDrawn > 250) {
          drawChart();
          chartDrawn = paintStarted;
        }
        paintMs += performance.now() - paintStarted;
      });
    };
    api.timings.tokensPerSecond = null;
    let modelMs = 0;
    let paintMs = 0;
    let yieldMs = 0;
    const stepsStarted = performance.now();
    for (let n = 0; n < maxNew; n++) {
      let token;
      if (sample) {
        const { scores } = Sampling.process(result.logits, settings());
        token = Sampling.sample(Sampling.softmax(scores), Math.random());
      } else {
        token = Sampling.argmax(result.logits);
      }
      out.push(token);
      if (n > 0) api.timings.tokensPerSecond = n / ((performance.now() - stepsStarted) / 1000);
      paint();
      if (token === eos || n === maxNew - 1 || state.stop) break;
      const before = performance.now();
      result = await step([token], result.cache);
      modelMs += performance.now() - before;
      view.logits = result.logits;
      // Let the page paint and take the reader's clicks (Stop) between steps.
      const yielded = performance.now();
      await yieldToPage();
      yieldMs += performance.now() - yielded;
    }
    painting = false;
    paint(true);
    api.timings.modelMsPerStep = out.length > 1 ? modelMs / (out.length - 1) : null;
    api.timings.paintMsPerStep = out.length > 1 ? paintMs / (out.length - 1) : null;
    api.timings.yieldMsPerStep = out.length > 1 ? yieldMs / (out.length - 1) : null;
    await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
    api.lastGeneration = { inputIds: ids, outputIds: out.slice(), sampled: sample };
    status(
      `${out.length} new tokens${out[out.length - 1] === eos ? " (the model ended its answer)" : ""}; the prompt took ` +
        `${Math.round(api.timings.firstTokenMs)} ms.`,
    );
  }

  // A task's worth of pause (a message to ourselves: unlike setTimeout, never delayed by 4 ms once nested).
  const channel = new MessageChannel();
  function yieldToPage() {
    return new Promise((resolve) => {
      channel.port1.onmessage = () => resolve();
      channel.port2.postMessage(null);
    });
  }

  /** Greedy decoding for checks: no clicks needed, the page's controls untouched. */
  async function complete(prompt, { maxNewTokens = 32, chat = false } = {}) {
    if (typeof prompt !== "string") throw new TypeError(`prompt must be a string, got ${typeof prompt}`);
    if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1) {
      throw new RangeError(`maxNewTokens must be an integer >= 1, got ${maxNewTokens}`);
    }
    await load();
    const inputIds = encodePrompt(chat ? wrap(prompt) : prompt);
    const eos = state.metadata.config.eos_token_id;
    const started = performance.now();
    let result = await step(inputIds, emptyCache());
    const firstTokenMs = performance.now() - started;
    const probabilities = Sampling.softmax(result.logits);
    const topTokens = Sampling.topIds(result.logits, TOP).map((id) => ({ id, probability: probabilities[id] }));
    const outputIds = [];
    const stepsStarted = performance.now();
    for (;;) {
      const token = Sampling.argmax(result.logits);
      outputIds.push(token);
      if (token === eos || outputIds.length === maxNewTokens) break;
      result = await step([token], result.cache);
    }
    const seconds = (performance.now() - stepsStarted) / 1000;
    const timings = { firstTokenMs, tokensPerSecond: outputIds.length > 1 ? (outputIds.length - 1) / seconds : null };
    return { inputIds, outputIds, topTokens, timings };
  }

  /** The last prompt's attention probabilities of one layer and head, [query][key] (0 after the token's own position). */
  function attention(layer, head) {
    const tensor = view.attentions && view.attentions[layer];
    if (!tensor) throw new RangeError(`no attention of layer ${layer} kept from the last prompt`);
    const [, , length, keys] = tensor.dims;
    const offset = head * length * keys;
    return Array.from({ length }, (_, q) => Array.from(tensor.data.subarray(offset + q * keys, offset + (q + 1) * keys)));
  }

  Object.assign(api, {
    complete,
    attention,
    load,
    tokenize: async (text) => {
      await load();
      return state.tokenizer.encode(text);
    },
    wrap: async (message) => {
      await load();
      return wrap(message);
    },
  });

  function start() {
    const root = document.getElementById("prompt-it");
    if (!root) return;
    const find = (id) => root.querySelector(`#${id}`);
    page = {
      root,
      text: find("prompt-text"),
      chat: find("prompt-chat"),
      wrapped: find("prompt-wrapped"),
      run: find("prompt-run"),
      generate: find("prompt-generate"),
      stop: find("prompt-stop"),
      maxNew: find("prompt-max-new"),
      sample: find("prompt-sample"),
      temperature: find("prompt-temperature"),
      temperatureValue: find("prompt-temperature-value"),
      topK: find("prompt-top-k"),
      topP: find("prompt-top-p"),
      topPValue: find("prompt-top-p-value"),
      status: find("prompt-status"),
      messages: find("prompt-messages"),
      tokens: find("prompt-tokens"),
      chart: find("prompt-chart"),
      chartNote: find("prompt-chart-note"),
      output: find("prompt-output"),
      speed: find("prompt-speed"),
      layer: find("prompt-layer"),
      head: find("prompt-head"),
      attention: find("prompt-attention"),
      attentionCaption: find("prompt-attention-caption"),
      readout: find("prompt-attention-readout"),
    };
    page.stop.disabled = true;
    find("prompt-form").addEventListener("submit", (event) => {
      event.preventDefault();
      guarded(runOnce);
    });
    page.generate.addEventListener("click", () => guarded(generateTokens));
    page.stop.addEventListener("click", () => (state.stop = true));
    const showValues = () => {
      page.temperatureValue.textContent = Number(page.temperature.value).toFixed(2);
      page.topPValue.textContent = Number(page.topP.value).toFixed(2);
    };
    for (const control of [page.temperature, page.topK, page.topP]) {
      control.addEventListener("input", () => {
        showValues();
        drawChart();
      });
    }
    showValues();
    page.chat.addEventListener("change", showWrapped);
    page.text.addEventListener("input", showWrapped);
    page.layer.addEventListener("change", () => drawAttention());
    page.head.addEventListener("change", () => drawAttention());
    if (location.protocol === "file:") {
      page.run.disabled = page.generate.disabled = true;
      say(
        "error",
        "This page runs the model in your browser and needs the site served over HTTP, not opened as a file. " +
          "Serve the built site (python3 -m http.server --directory docs/_build/html --bind 127.0.0.1 8000) " +
          "and open http://127.0.0.1:8000/try_prompt.html.",
      );
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
