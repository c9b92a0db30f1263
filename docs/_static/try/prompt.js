/*
 * "Try your own prompt": the trained decoder (SmolLM2-135M-Instruct, the package's own Llama) in this browser.
 *
 * The page's thread only tokenizes, chooses and draws; the model runs in a Web Worker
 * (prompt-worker.js), so that the page answers the reader's clicks and scrolls at every moment,
 * the model's heaviest minutes included. On the first Run, Generate or call of the hook (and
 * only then):
 *   - the page downloads prompt/decoder.json (gzip, unpacked by the browser's DecompressionStream):
 *     the tokenizer's vocabulary and merges, the chat template's wrapping, the config, the table of
 *     the weights' blocks and what the export measured;
 *   - the worker downloads the graph, prompt/decoder.onnx, and the weights in the GGUF file's 4- and
 *     8-bit blocks, prompt/decoder.blocks (both gzip, kept in the browser's Cache Storage after the
 *     first visit, under the export's digest), and onnxruntime-web's WebAssembly runtime (xz,
 *     unpacked by the vendored xzwasm); it turns the blocks into float32 numbers (blocks.js), saying
 *     how far it is (the bar under the buttons), and starts onnxruntime on them.
 * Then each request to the worker is one step of generation: the new tokens in, the next token's
 * scores out (and, for a prompt, attention probabilities). The keys and values of every layer stay
 * in the worker between steps; the prompt's are kept, so that Generate after Run continues from
 * Run's cache instead of reading the prompt again.
 *
 * The page tokenizes with bpe.js, reshapes the next-token distribution with sampling.js
 * (temperature, top-k, top-p, in transformers' order), and draws: the tokens, the top 10
 * bars (naming the position they are for), the generated text with its speed, and one layer's
 * and head's attention on the prompt, its axes labelled with the tokens. White space in a token
 * is shown as the tokenizer writes it: a space "Ġ", a line break "Ċ".
 *
 * For checks, window.literateTransformer has
 *   complete(prompt, {maxNewTokens = 32, chat = false}) -> {inputIds, outputIds, topTokens, timings}:
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
    blocks: new URL("prompt/decoder.blocks.gz", HERE),
    wasm: new URL("../vendor/onnxruntime-web/ort-wasm-simd-threaded.wasm.xz", HERE),
    worker: new URL("prompt-worker.js", HERE),
  };
  const FORMAT = "literate-transformer-decoder-export/2";
  //: The longest prompt the page runs (the model reads 8192 positions; the page's memory and patience fewer).
  const MAX_PROMPT_TOKENS = 1024;
  //: Prompts up to this length get every layer's attention at once; longer ones the chosen layer's only.
  const ALL_LAYERS_UP_TO = 256;
  //: Up to this many tokens the heatmap labels every one; beyond, every k-th (with its number).
  const LABELLED_TOKENS = 40;
  const TOP = 10;

  const api = (window.literateTransformer = {
    downloadedBytes: 0,
    cachedBytes: 0,
    fetchedBytes: 0,
    modelFromCache: null,
    timings: {
      loadMs: null,
      firstTokenMs: null,
      generateFirstTokenMs: null,
      tokensPerSecond: null,
      modelMsPerStep: null,
      redrawMs: null,
    },
    lastRun: null,
    ready: false,
  });
  const state = { loading: null, tokenizer: null, metadata: null, busy: false, stop: false, runs: 0 };
  // What the chart and the heatmap show: the scores (and for which position), the prompt's attention.
  const view = { logits: null, at: null, attentions: null, promptIds: null };
  // The prompt whose cache the worker keeps, and the scores it gave.
  let held = null;
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

  // The bar under the buttons: a fraction, or null for "busy, no measure", or hidden when undefined.
  function bar(fraction) {
    if (!page) return;
    page.progress.hidden = fraction === undefined;
    if (fraction === null || fraction === undefined) page.progress.removeAttribute("value");
    else page.progress.value = fraction;
  }

  const mb = (bytes) => (bytes / 1e6).toFixed(1);

  // A task's worth of waiting: what is queued (a click, a frame to draw) runs first.
  function nextTask() {
    return new Promise((resolve) => setTimeout(resolve, 0));
  }

  // What the worker says while it loads.
  function showProgress({ phase, done, total }) {
    if (phase === "download") {
      status(`Getting the model: ${mb(done)} of ${mb(total)} MB unpacked…`);
      bar(total ? done / total : null);
    } else if (phase === "convert") {
      status(`Turning the 4- and 8-bit blocks into float32 numbers: ${mb(done)} of ${mb(total)} MB…`);
      bar(done / total);
    } else if (phase === "start") {
      status("Starting onnxruntime on the float32 weights…");
      bar(null);
    }
  }

  // ---------------------------------------------------------------------------
  // The worker: requests and their answers
  // ---------------------------------------------------------------------------
  const worker = { thread: null, next: 1, pending: new Map() };

  function ask(type, request = {}) {
    if (!worker.thread) {
      worker.thread = new Worker(FILES.worker);
      worker.thread.onmessage = ({ data }) => {
        if (data.progress) return showProgress(data.progress);
        const pending = worker.pending.get(data.id);
        worker.pending.delete(data.id);
        if (!pending) return;
        if (data.error) {
          const error = new Error(data.error.message);
          error.name = data.error.name;
          error.stack = data.error.stack;
          pending.reject(error);
        } else pending.resolve(data.result);
      };
      worker.thread.onerror = (event) => {
        const error = new Error(`the model's worker failed: ${event.message || "it could not start"}`);
        for (const pending of worker.pending.values()) pending.reject(error);
        worker.pending.clear();
        // The next request starts a new worker, which loads the model again.
        worker.thread.terminate();
        worker.thread = null;
        state.loading = null;
        held = null;
      };
    }
    const id = worker.next++;
    return new Promise((resolve, reject) => {
      worker.pending.set(id, { resolve, reject });
      worker.thread.postMessage({ id, type, ...request });
    });
  }

  // ---------------------------------------------------------------------------
  // Loading, once
  // ---------------------------------------------------------------------------
  async function downloadMetadata() {
    const response = await fetch(FILES.metadata);
    if (!response.ok) throw new Error(`could not download ${FILES.metadata.pathname} (HTTP ${response.status})`);
    const text = await new Response(response.body.pipeThrough(new DecompressionStream("gzip"))).text();
    await nextTask();
    return JSON.parse(text);
  }

  function load() {
    state.loading ??= (async () => {
      const start = performance.now();
      status("Getting the vocabulary…");
      bar(null);
      const metadata = await downloadMetadata();
      if (metadata.format !== FORMAT) {
        throw new Error(`decoder.json is of format ${metadata.format}, which this page does not read`);
      }
      state.metadata = metadata;
      // The vocabulary's maps are built a slice at a time: the page draws in between.
      state.tokenizer = await ByteLevelBPE.built(metadata.tokenizer, nextTask);
      fillSelects();
      showWrapped();
      const { config, digest, model, blocks, weights } = metadata;
      const files = { model: FILES.model.href, blocks: FILES.blocks.href, wasm: FILES.wasm.href };
      const loaded = await ask("load", { files, metadata: { config, digest, model, blocks, weights } });
      Object.assign(api, {
        modelFromCache: loaded.fromCache,
        downloadedBytes: loaded.downloadedBytes,
        cachedBytes: loaded.cachedBytes,
        fetchedBytes: loaded.fetchedBytes,
      });
      Object.assign(api.timings, loaded.timings);
      if (loaded.notKept) say("info", `The model could not be kept for your next visit (${loaded.notKept}).`);
      api.timings.loadMs = performance.now() - start;
      api.ready = true;
      bar(undefined);
      status(
        `Model ready in ${(api.timings.loadMs / 1000).toFixed(1)} s ` +
          `(${loaded.fromCache ? "from your browser's cache" : `${mb(loaded.downloadedBytes)} MB downloaded`}; ` +
          `blocks to float32 in ${(loaded.timings.convertMs / 1000).toFixed(1)} s).`,
      );
    })();
    state.loading.catch(() => {
      // A failed load (the network, say) may be tried again with the next click.
      state.loading = null;
      bar(undefined);
    });
    return state.loading;
  }

  // ---------------------------------------------------------------------------
  // The model: the prompt, then one step of generation at a time
  // ---------------------------------------------------------------------------
  function sameIds(a, b) {
    return a.length === b.length && a.every((id, i) => id === b[i]);
  }

  // The prompt's step from an empty cache: the first next-token scores, and attention (all layers for a short
  // prompt, the chosen one for a long one). The worker keeps its cache.
  async function runPrompt(ids) {
    const layers = state.metadata.config.num_hidden_layers;
    const wanted =
      ids.length <= ALL_LAYERS_UP_TO ? Array.from({ length: layers }, (_, i) => i) : [Number(page.layer.value || 0)];
    const result = await ask("prompt", { ids, layers: wanted });
    held = { ids: ids.slice(), logits: result.logits };
    view.attentions = result.attentions;
    view.promptIds = ids;
    state.runs += 1;
    api.lastRun = { runId: state.runs, inputIds: ids, layers: Object.keys(result.attentions).map(Number) };
    return result;
  }

  // One token more on the worker's cache: the scores of the token after it.
  async function step(token) {
    return (await ask("step", { token })).logits;
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

  // ---------------------------------------------------------------------------
  // Drawing
  // ---------------------------------------------------------------------------
  // A token as the page shows it: white space as the tokenizer writes it ("Ġ" a space, "Ċ" a line break).
  function shown(id) {
    return state.tokenizer.visible(id);
  }

  // The same, as nodes to put in an element: the stand-ins of white space in spans of their own, drawn muted.
  function shownNodes(id) {
    return state.tokenizer.visibleParts(id).map(({ text, mark }) => {
      if (!mark) return text;
      const span = document.createElement("span");
      span.className = "prompt-space";
      span.textContent = text;
      return span;
    });
  }

  function showTokens(ids) {
    page.tokens.replaceChildren(`${ids.length} tokens: `);
    for (const id of ids) {
      const code = document.createElement("code");
      code.append(...shownNodes(id));
      code.title = `id ${id}`;
      page.tokens.append(code, " ");
    }
  }

  function showWrapped() {
    if (!page || !state.metadata) return;
    page.wrapped.hidden = !page.chat.checked;
    page.wrapped.textContent = page.chat.checked ? wrap(page.text.value) : "";
  }

  // The scores the chart shows, and where they are: the token numbered `position` (counting the prompt's from 1),
  // the `generated`-th new one, after the token `after`; `chosen`, once Generate has drawn it.
  function showScores(logits, at) {
    view.logits = logits;
    view.at = at;
  }

  function positionText({ position, generated, after, chosen }) {
    const which = generated === 1 ? "the first new token" : `new token ${generated}`;
    const drawn = chosen === undefined ? "" : `; Generate chose “${shown(chosen)}”`;
    return `For token ${position} (${which}), after “${shown(after)}”${drawn}.`;
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
      if (view.at.chosen === row.id) item.classList.add("prompt-bar--chosen");
      item.dataset.id = row.id;
      const label = document.createElement("code");
      label.className = "prompt-bar-token";
      label.append(...shownNodes(row.id));
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
    page.chartPosition.textContent = positionText(view.at);
    page.chart.replaceChildren(list);
    page.chartNote.textContent = "";
    api.lastChart = rows;
    api.lastChartAt = { ...view.at };
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

  // The tokens along one axis of the heatmap: each label at its row's (or column's) middle; beyond
  // LABELLED_TOKENS, every k-th, with its number.
  function labelAxis(axis, ids) {
    const every = Math.ceil(ids.length / LABELLED_TOKENS);
    const labels = [];
    for (let i = 0; i < ids.length; i += every) {
      const label = document.createElement("span");
      label.className = "prompt-axis-label";
      if (every > 1) label.append(`${i + 1} `);
      label.append(...shownNodes(ids[i]));
      label.title = `token ${i + 1}: ${shown(ids[i])} (id ${ids[i]})`;
      label.style.setProperty("--at", `${((i + 0.5) / ids.length) * 100}%`);
      labels.push(label);
    }
    axis.replaceChildren(...labels);
    axis.dataset.count = ids.length;
  }

  // One heatmap: row = query token, column = key token (the causal mask leaves the upper triangle empty).
  async function drawAttention() {
    if (!view.attentions) return;
    const layer = Number(page.layer.value);
    const head = Number(page.head.value);
    if (!view.attentions[layer]) {
      // A long prompt: only one layer was kept; the worker runs the prompt again for this one (its caches stay).
      status(`Running the prompt again for layer ${layer}'s attention…`);
      const result = await ask("attention", { ids: view.promptIds, layer });
      view.attentions = result.attentions;
      status(`Layer ${layer}'s attention is drawn.`);
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
    labelAxis(page.attentionQueries, view.promptIds.slice(0, length));
    labelAxis(page.attentionKeys, view.promptIds.slice(0, keys));
    canvas.onmousemove = (event) => {
      const box = canvas.getBoundingClientRect();
      const q = Math.min(length - 1, Math.floor(((event.clientY - box.top) / box.height) * length));
      const k = Math.min(keys - 1, Math.floor(((event.clientX - box.left) / box.width) * keys));
      page.readout.textContent =
        `layer ${layer}, head ${head}: token ${q + 1} “${shown(view.promptIds[q])}” → token ${k + 1} ` +
        `“${shown(view.promptIds[k])}” = ${data[offset + q * keys + k].toFixed(3)}`;
    };
    page.attentionCaption.textContent =
      `Layer ${layer}, head ${head} (of ${heads}): ${length} prompt tokens; the rows, down the left, are the ` +
      "tokens that attend, the columns, along the top, the tokens they may attend to.";
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
    status(`Reading the prompt's ${ids.length} tokens…`);
    const started = performance.now();
    const result = await runPrompt(ids);
    api.timings.firstTokenMs = performance.now() - started;
    showScores(result.logits, { position: ids.length + 1, generated: 1, after: ids[ids.length - 1] });
    drawChart();
    await nextTask();
    await drawAttention();
    page.output.textContent = "";
    page.speed.textContent = "";
    status(
      `${ids.length} tokens read in ${Math.round(api.timings.firstTokenMs)} ms: the chart is the next token's. ` +
        "Generate continues from here without reading them again.",
    );
  }

  async function generateTokens() {
    const pressed = performance.now();
    const ids = encodePrompt(promptText());
    const maxNew = Math.max(1, Math.min(512, Math.round(Number(page.maxNew.value) || 64)));
    const sample = page.sample.checked;
    const eos = state.metadata.config.eos_token_id;
    state.stop = false;
    const out = [];
    page.output.textContent = "";
    page.speed.textContent = "";
    let logits;
    // The prompt Run has just read: its cache is in the worker, go back to it; another prompt: read it.
    const continued = held !== null && sameIds(held.ids, ids);
    if (continued) {
      await ask("rewind");
      logits = held.logits;
      status(`Continuing from Run's cache of the prompt's ${ids.length} tokens…`);
    } else {
      showTokens(ids);
      status(`Reading the prompt's ${ids.length} tokens…`);
      const started = performance.now();
      logits = (await runPrompt(ids)).logits;
      api.timings.firstTokenMs = performance.now() - started;
      showScores(logits, { position: ids.length + 1, generated: 1, after: ids[ids.length - 1] });
      drawChart();
      await nextTask();
      await drawAttention();
      status(`Writing (the prompt took ${Math.round(api.timings.firstTokenMs)} ms)…`);
    }
    // The text is drawn once per frame, whatever the number of steps in it; the chart at most four times a second
    // (and after the last step), so that drawing takes little from the model's time.
    let painting = false;
    let chartDrawn = 0;
    let paintMs = 0;
    const paint = (last = false) => {
      if (painting) return;
      painting = true;
      requestAnimationFrame(() => {
        const paintStarted = performance.now();
        painting = false;
        // A character whose bytes are not all written yet (half an emoji) waits for the next token.
        page.output.textContent = state.tokenizer.decode(out, { skipSpecial: true, holdIncomplete: !last });
        if (api.timings.generateFirstTokenMs === null && out.length) {
          api.timings.generateFirstTokenMs = paintStarted - pressed;
        }
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
    api.timings.generateFirstTokenMs = null;
    let modelMs = 0;
    const stepsStarted = performance.now();
    for (let n = 0; n < maxNew; n++) {
      let token;
      if (sample) {
        const { scores } = Sampling.process(logits, settings());
        token = Sampling.sample(Sampling.softmax(scores), Math.random());
      } else {
        token = Sampling.argmax(logits);
      }
      out.push(token);
      const after = n ? out[n - 1] : ids[ids.length - 1];
      showScores(logits, { position: ids.length + n + 1, generated: n + 1, after, chosen: token });
      if (n > 0) api.timings.tokensPerSecond = n / ((performance.now() - stepsStarted) / 1000);
      paint();
      if (token === eos || n === maxNew - 1 || state.stop) break;
      const before = performance.now();
      logits = await step(token);
      modelMs += performance.now() - before;
    }
    painting = false;
    paint(true);
    api.timings.modelMsPerStep = out.length > 1 ? modelMs / (out.length - 1) : null;
    api.timings.paintMsPerStep = out.length > 1 ? paintMs / (out.length - 1) : null;
    await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
    api.lastGeneration = { inputIds: ids, outputIds: out.slice(), sampled: sample, continued };
    status(
      `${out.length} new tokens${out[out.length - 1] === eos ? " (the model ended its answer)" : ""}` +
        (continued
          ? `, continuing from Run's cache: the first after ${Math.round(api.timings.generateFirstTokenMs)} ms.`
          : `; the prompt took ${Math.round(api.timings.firstTokenMs)} ms.`),
    );
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
    let logits = (await ask("prompt", { ids: inputIds })).logits;
    // The worker now keeps this prompt's cache, not the last Run's.
    held = { ids: inputIds.slice(), logits };
    const firstTokenMs = performance.now() - started;
    const probabilities = Sampling.softmax(logits);
    const topTokens = Sampling.topIds(logits, TOP).map((id) => ({ id, probability: probabilities[id] }));
    const outputIds = [];
    const stepsStarted = performance.now();
    for (;;) {
      const token = Sampling.argmax(logits);
      outputIds.push(token);
      if (token === eos || outputIds.length === maxNewTokens) break;
      logits = await step(token);
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
      attentionQueries: find("prompt-attention-queries"),
      attentionKeys: find("prompt-attention-keys"),
      attentionCaption: find("prompt-attention-caption"),
      progress: find("prompt-progress"),
      chartPosition: find("prompt-chart-position"),
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
    const redrawAttention = () =>
      drawAttention().catch((error) => say("error", `The attention could not be drawn: ${error.message}`));
    page.layer.addEventListener("change", redrawAttention);
    page.head.addEventListener("change", redrawAttention);
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
