/*
 * "Try your own sentence": the literate BERT, run in this browser.
 *
 * On Run (and only then) the page downloads, each compressed and unpacked here:
 *   - model/model.json: the tokenizer's vocabulary and settings, the model's config and
 *     what the export measured (gzip, unpacked by the browser's own DecompressionStream);
 *   - the graph, model/model.onnx (gzip: its int8/int4 codes are near their entropy, and
 *     no compressor does much better);
 *   - onnxruntime-web's WebAssembly runtime (xz, 2.2 MB where gzip needs 3.7 MB, unpacked
 *     by the vendored xzwasm, itself 20 kB);
 * then it tokenizes the text with wordpiece.js, runs the graph, and draws what came out:
 * a head view (after bertviz's, its lines on a canvas), one heatmap per head, and the
 * similarity of the sentence's mean-pooled embedding to a few reference sentences.
 *
 * The last run is kept in window.literateTransformer.lastRun = {tokens, inputIds,
 * tokenTypeIds, attentions (layer x head x query x key), timings}, so that a test
 * can compare it with the PyTorch model (tests/browser/test_try.py).
 */
(function () {
  "use strict";

  // Everything is found relative to this script: _static/try/try.js.
  const HERE = document.currentScript.src;
  const FILES = {
    metadata: new URL("model/model.json.gz", HERE),
    model: new URL("model/model.onnx.gz", HERE),
    runtime: new URL("../vendor/onnxruntime-web/ort.wasm.min.js", HERE),
    wasm: new URL("../vendor/onnxruntime-web/ort-wasm-simd-threaded.wasm.xz", HERE),
    xz: new URL("../vendor/xzwasm/xzwasm.min.js", HERE),
  };

  const api = (window.literateTransformer = { lastRun: null, downloadedBytes: 0, loadMs: null });
  const state = { loading: null, session: null, tokenizer: null, metadata: null, references: null, runs: 0 };
  let page; // the elements, found once the document is parsed

  // ---------------------------------------------------------------------------
  // Messages
  // ---------------------------------------------------------------------------
  function status(text) {
    page.status.textContent = text;
  }

  function say(kind, text) {
    const item = document.createElement("p");
    item.className = `try-message try-message--${kind}`;
    item.textContent = text;
    page.messages.append(item);
  }

  // ---------------------------------------------------------------------------
  // Loading, once, on the first Run
  // ---------------------------------------------------------------------------
  // format: "gzip" (the browser unpacks it), "xz" (xzwasm does) or null (as it comes).
  async function download(url, format) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`could not download ${url.pathname} (HTTP ${response.status})`);
    // Count the bytes as they arrive, for the progress line and the budget.
    const counted = response.body.pipeThrough(
      new TransformStream({
        transform(chunk, controller) {
          api.downloadedBytes += chunk.byteLength;
          status(`Downloading the model and the runtime: ${(api.downloadedBytes / 1e6).toFixed(1)} MB…`);
          controller.enqueue(chunk);
        },
      }),
    );
    const body =
      format === "gzip"
        ? counted.pipeThrough(new DecompressionStream("gzip"))
        : format === "xz"
          ? new xzwasm.XzReadableStream(counted)
          : counted;
    return new Uint8Array(await new Response(body).arrayBuffer());
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
      const metadataBytes = await download(FILES.metadata, "gzip");
      state.metadata = JSON.parse(new TextDecoder().decode(metadataBytes));
      state.tokenizer = new WordPieceTokenizer(state.metadata.tokenizer);
      for (let layer = 0; layer < state.metadata.config.num_hidden_layers; layer++) {
        page.layer.add(new Option(`layer ${layer}`, layer));
      }
      await Promise.all([loadScript(FILES.runtime), loadScript(FILES.xz)]);
      const [wasm, model] = await Promise.all([download(FILES.wasm, "xz"), download(FILES.model, "gzip")]);
      status("Starting the model…");
      // One thread: a static site cannot send the headers that shared memory (threads) needs.
      ort.env.wasm.numThreads = 1;
      ort.env.wasm.wasmBinary = wasm;
      state.session = await ort.InferenceSession.create(model, {
        executionProviders: ["wasm"],
        // Rebuild the int8+int4 weights as float32 once, now, rather than at every run.
        extra: { session: { disable_quant_qdq: "1" } },
      });
      api.loadMs = performance.now() - start;
    })();
    return state.loading;
  }

  // ---------------------------------------------------------------------------
  // The model
  // ---------------------------------------------------------------------------
  async function runModel(encoded) {
    const length = encoded.inputIds.length;
    const int64 = (values) => new ort.Tensor("int64", BigInt64Array.from(values, BigInt), [1, length]);
    const output = await state.session.run({
      input_ids: int64(encoded.inputIds),
      token_type_ids: int64(encoded.tokenTypeIds),
    });
    return { hidden: output.last_hidden_state, attentions: output.attentions };
  }

  // attentions (1, L, H, T, T) as nested arrays [layer][head][query][key].
  function nest(tensor) {
    const [, layers, heads, queries, keys] = tensor.dims;
    const data = tensor.data;
    const nested = [];
    for (let l = 0; l < layers; l++) {
      const layer = [];
      for (let h = 0; h < heads; h++) {
        const head = [];
        for (let q = 0; q < queries; q++) {
          const start = ((l * heads + h) * queries + q) * keys;
          head.push(Array.from(data.subarray(start, start + keys)));
        }
        layer.push(head);
      }
      nested.push(layer);
    }
    return nested;
  }

  // The sentence embedding: the mean of the token vectors, scaled to length 1.
  function meanPooled(hidden) {
    const [, length, width] = hidden.dims;
    const mean = new Float64Array(width);
    for (let t = 0; t < length; t++) for (let e = 0; e < width; e++) mean[e] += hidden.data[t * width + e] / length;
    const norm = Math.hypot(...mean);
    return mean.map((value) => value / norm);
  }

  const cosine = (u, v) => u.reduce((sum, value, i) => sum + value * v[i], 0);

  async function embed(text) {
    return meanPooled((await runModel(state.tokenizer.encode(text))).hidden);
  }

  // ---------------------------------------------------------------------------
  // Drawing
  // ---------------------------------------------------------------------------
  function showTokens(encoded) {
    page.tokens.replaceChildren(`${encoded.tokens.length} tokens: `);
    encoded.tokens.forEach((token, i) => {
      const code = document.createElement("code");
      code.textContent = token;
      code.title = `id ${encoded.inputIds[i]}, segment ${encoded.tokenTypeIds[i]}`;
      page.tokens.append(code, " ");
    });
  }

  // The head view (after bertviz's): tokens left and right, a line from each token on the left to each
  // token on the right it attends to, as opaque as the attention probability, one colour per head.
  // The tokens are SVG text; the 12 x T^2 lines are drawn on one canvas (thousands of SVG elements
  // would cost the page most of its drawing time), and only the chosen layer's.
  const HEAD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                        "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"];
  const VIEW = { tokenWidth: 110, linesWidth: 115, rowHeight: 22.5, top: 30, square: 20 };
  const SVG_NS = "http://www.w3.org/2000/svg";

  function svgElement(name, attributes, text) {
    const element = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
    if (text !== undefined) element.textContent = text;
    return element;
  }

  function drawHeadView(tokens, attentionTensor, sentenceBStart) {
    const [, layers, heads, length] = attentionTensor.dims;
    const data = attentionTensor.data;
    const all = [0, length];
    const parts = [{ name: "All", rows: all, columns: all }];
    if (sentenceBStart !== null) {
      const a = [0, sentenceBStart];
      const b = [sentenceBStart, length];
      parts.push(
        { name: "Sentence A -> Sentence A", rows: a, columns: a },
        { name: "Sentence B -> Sentence B", rows: b, columns: b },
        { name: "Sentence A -> Sentence B", rows: a, columns: b },
        { name: "Sentence B -> Sentence A", rows: b, columns: a },
      );
    }
    const view = { layer: 0, part: parts[0], active: new Array(heads).fill(true), hovered: null };
    const root = document.createElement("div");
    const controls = document.createElement("span");
    controls.className = "try-view-controls";
    const layerSelect = document.createElement("select");
    layerSelect.id = "try-head-view-layer";
    for (let l = 0; l < layers; l++) layerSelect.add(new Option(`${l}`, l));
    controls.append("Layer: ", layerSelect);
    let partSelect = null;
    if (parts.length > 1) {
      partSelect = document.createElement("select");
      parts.forEach((part, i) => partSelect.add(new Option(part.name, i)));
      controls.append(" Attention: ", partSelect);
    }
    const figure = document.createElement("div");
    figure.className = "try-head-view-figure";
    root.append(controls, figure);
    page.headView.replaceChildren(root);

    function draw() {
      const { rows, columns } = view.part;
      const leftTokens = tokens.slice(...rows);
      const rightTokens = tokens.slice(...columns);
      const height = VIEW.top + Math.max(leftTokens.length, rightTokens.length) * VIEW.rowHeight;
      const width = 2 * VIEW.tokenWidth + VIEW.linesWidth;
      const svg = svgElement("svg", { width, height, viewBox: `0 0 ${width} ${height}` });
      // One square per head: click to show or hide it, double-click to show only it (or all again).
      for (let h = 0; h < heads; h++) {
        const square = svgElement("rect", {
          x: h * VIEW.square, y: 0, width: VIEW.square - 2, height: VIEW.square - 2,
          fill: HEAD_COLOURS[h % HEAD_COLOURS.length], "fill-opacity": view.active[h] ? 1 : 0.2,
          class: "try-head-square",
        });
        square.append(svgElement("title", {}, `head ${h}`));
        square.addEventListener("click", () => { view.active[h] = !view.active[h]; draw(); });
        square.addEventListener("dblclick", () => {
          const only = view.active.every((on, i) => on === (i === h));
          view.active.fill(only);
          view.active[h] = true;
          draw();
        });
        svg.append(square);
      }
      const addTokens = (texts, side) => {
        texts.forEach((token, i) => {
          const y = VIEW.top + (i + 0.5) * VIEW.rowHeight;
          const x = side === "left" ? VIEW.tokenWidth - 6 : VIEW.tokenWidth + VIEW.linesWidth + 6;
          const text = svgElement(
            "text",
            { x, y, "dominant-baseline": "middle", "text-anchor": side === "left" ? "end" : "start",
              "font-size": 15, "data-side": side, "data-index": i },
            token,
          );
          // Hover a token: only its lines.
          text.addEventListener("mouseenter", () => { view.hovered = { side, index: i }; paint(); });
          text.addEventListener("mouseleave", () => { view.hovered = null; paint(); });
          svg.append(text);
        });
      };
      addTokens(leftTokens, "left");
      addTokens(rightTokens, "right");
      const canvas = document.createElement("canvas");
      canvas.className = "try-head-view-lines";
      const scale = window.devicePixelRatio || 1;
      canvas.width = Math.round(VIEW.linesWidth * scale);
      canvas.height = Math.round(height * scale);
      canvas.style.left = `${VIEW.tokenWidth}px`;
      canvas.style.width = `${VIEW.linesWidth}px`;
      canvas.style.height = `${height}px`;
      figure.replaceChildren(svg, canvas);

      function paint() {
        const context = canvas.getContext("2d");
        context.setTransform(scale, 0, 0, scale, 0, 0);
        context.clearRect(0, 0, VIEW.linesWidth, height);
        context.lineWidth = 2;
        const shown = view.active.filter(Boolean).length;
        for (let h = 0; h < heads; h++) {
          if (!view.active[h]) continue;
          context.strokeStyle = HEAD_COLOURS[h % HEAD_COLOURS.length];
          const offset = (view.layer * heads + h) * length * length;
          for (let q = rows[0]; q < rows[1]; q++) {
            if (view.hovered && view.hovered.side === "left" && view.hovered.index !== q - rows[0]) continue;
            for (let k = columns[0]; k < columns[1]; k++) {
              if (view.hovered && view.hovered.side === "right" && view.hovered.index !== k - columns[0]) continue;
              // As opaque as the probability, shared between the heads shown (bertviz's rule).
              const alpha = data[offset + q * length + k] / shown;
              if (alpha < 1 / 512) continue; // below what 8-bit colour can show
              context.globalAlpha = Math.min(1, alpha);
              context.beginPath();
              context.moveTo(0, VIEW.top + (q - rows[0] + 0.5) * VIEW.rowHeight);
              context.lineTo(VIEW.linesWidth, VIEW.top + (k - columns[0] + 0.5) * VIEW.rowHeight);
              context.stroke();
            }
          }
        }
        context.globalAlpha = 1;
        for (const text of svg.querySelectorAll("text")) {
          const hovered = view.hovered && view.hovered.side === text.dataset.side &&
            view.hovered.index === Number(text.dataset.index);
          text.setAttribute("font-weight", hovered ? "bold" : "normal");
        }
      }
      paint();
    }

    layerSelect.addEventListener("change", () => { view.layer = Number(layerSelect.value); draw(); });
    if (partSelect) partSelect.addEventListener("change", () => { view.part = parts[Number(partSelect.value)]; draw(); });
    draw();
  }

  // The theme's colours, resolved to rgb() by the browser; looked up again when the theme changes.
  let colours = null;
  function heatmapColours() {
    colours ??= {
      background: themeColour("--pst-color-background", "#ffffff"),
      ink: themeColour("--pst-color-primary", "#0a7d91"),
    };
    return colours;
  }

  function themeColour(variable, fallback) {
    const probe = document.createElement("span");
    probe.style.color = `var(${variable}, ${fallback})`;
    page.root.append(probe);
    const rgb = getComputedStyle(probe)
      .color.match(/[\d.]+/g)
      .slice(0, 3)
      .map(Number);
    probe.remove();
    return rgb;
  }

  // One small heatmap per head of the chosen layer: row = query, column = key, darker = more attention.
  // Each canvas has one pixel per (query, key) cell; CSS scales it up without smoothing.
  function drawHeatmaps() {
    const run = api.lastRun;
    if (!run) return;
    const layer = Number(page.layer.value);
    const [, , heads, length] = run.attentionTensor.dims;
    const data = run.attentionTensor.data;
    const { background, ink } = heatmapColours();
    const figures = [];
    for (let h = 0; h < heads; h++) {
      const canvas = document.createElement("canvas");
      canvas.width = canvas.height = length;
      canvas.setAttribute(
        "aria-label",
        `layer ${layer}, head ${h}: attention from each token (rows) to each token (columns)`,
      );
      const context = canvas.getContext("2d");
      const image = context.createImageData(length, length);
      const offset = (layer * heads + h) * length * length;
      for (let cell = 0; cell < length * length; cell++) {
        // The shade grows with the square root of the weight, so that small weights still show.
        const shade = Math.sqrt(data[offset + cell]);
        for (let c = 0; c < 3; c++) image.data[cell * 4 + c] = background[c] + (ink[c] - background[c]) * shade;
        image.data[cell * 4 + 3] = 255;
      }
      context.putImageData(image, 0, 0);
      canvas.addEventListener("mousemove", (event) => {
        const box = canvas.getBoundingClientRect();
        const q = Math.min(length - 1, Math.floor(((event.clientY - box.top) / box.height) * length));
        const k = Math.min(length - 1, Math.floor(((event.clientX - box.left) / box.width) * length));
        const weight = data[offset + q * length + k];
        page.readout.textContent = `layer ${layer}, head ${h}: ${run.tokens[q]} → ${run.tokens[k]} = ${weight.toFixed(3)}`;
      });
      const figure = document.createElement("figure");
      const caption = document.createElement("figcaption");
      caption.textContent = `head ${h}`;
      figure.append(canvas, caption);
      figures.push(figure);
    }
    page.heatmaps.replaceChildren(...figures);
  }

  async function showSimilarities(textA, textB, hiddenOfInput) {
    state.references ??= await Promise.all(page.references.map(async (text) => ({ text, vector: await embed(text) })));
    const columns = [{ name: "Sentence", vector: textB ? await embed(textA) : meanPooled(hiddenOfInput) }];
    if (textB) columns.push({ name: "Second sentence", vector: await embed(textB) });
    const rows = state.references.map((reference) => [
      reference.text,
      ...columns.map((c) => cosine(c.vector, reference.vector)),
    ]);
    if (textB) rows.unshift(["(your two sentences)", cosine(columns[0].vector, columns[1].vector), null]);
    const table = document.createElement("table");
    table.className = "table try-similarity-table";
    table.innerHTML = `<thead><tr><th>Reference</th>${columns.map((c) => `<th>${c.name}</th>`).join("")}</tr></thead>`;
    const body = table.createTBody();
    for (const [text, ...values] of rows) {
      const row = body.insertRow();
      row.insertCell().textContent = text;
      for (const value of values) row.insertCell().textContent = value === null ? "" : value.toFixed(3);
    }
    page.similarity.replaceChildren(table);
    api.lastRun.similarities = rows;
  }

  // ---------------------------------------------------------------------------
  // Run
  // ---------------------------------------------------------------------------
  async function run(event) {
    event.preventDefault();
    const clicked = performance.now();
    const textA = page.sentenceA.value;
    const textB = page.sentenceB.value.trim() ? page.sentenceB.value : null;
    page.messages.replaceChildren();
    if (!textA.trim()) {
      say(
        "error",
        textB
          ? "The first box is empty: type the first sentence there (the second box is for a second sentence)."
          : "The box is empty: type a sentence, then Run.",
      );
      return;
    }
    page.run.disabled = true;
    try {
      const wasLoaded = state.session !== null;
      await load();
      const loaded = performance.now();
      const maxLength = state.metadata.config.max_position_embeddings;
      const encoded = state.tokenizer.encode(textA, textB, Math.min(maxLength, state.tokenizer.maxLength));
      if (encoded.truncated) {
        say(
          "warning",
          `Your text is ${encoded.untruncatedLength} tokens long, but the model reads at most ${encoded.tokens.length} ` +
            "(its max_position_embeddings). It was cut to that length the way the Python tokenizer cuts it " +
            `(truncation=True${textB ? ", the longer sentence first" : ""}); the end of your text is not shown below.`,
        );
      }
      status("Running the model…");
      const output = await runModel(encoded);
      const ran = performance.now();
      state.runs += 1;
      let nested = null;
      api.lastRun = {
        runId: state.runs,
        tokens: encoded.tokens,
        inputIds: encoded.inputIds,
        tokenTypeIds: encoded.tokenTypeIds,
        truncated: encoded.truncated,
        attentionTensor: output.attentions,
        // The last layer's token vectors, [token][feature] (for the tests; the page shows their mean).
        get lastHiddenState() {
          const [, length, width] = output.hidden.dims;
          return Array.from({ length }, (_, t) => Array.from(output.hidden.data.subarray(t * width, (t + 1) * width)));
        },
        // Built on first use: 6 x 12 x 512 x 512 numbers are not cheap.
        get attentions() {
          nested ??= nest(output.attentions);
          return nested;
        },
        timings: null,
        similarities: null,
      };
      showTokens(encoded);
      const beforeViews = performance.now();
      drawHeatmaps();
      const heatmapsDrawn = performance.now();
      const headViewLimit = Number(page.root.dataset.headViewMaxTokens);
      if (encoded.tokens.length <= headViewLimit) {
        drawHeadView(encoded.tokens, output.attentions, encoded.sentenceBStart);
      } else {
        page.headView.replaceChildren();
        say(
          "info",
          `The line view is drawn for up to ${headViewLimit} tokens (this input has ${encoded.tokens.length}); ` +
            "the heatmaps below show them all.",
        );
      }
      const headViewDrawn = performance.now();
      // "Drawn" is when the browser has painted the new view: the next animation frame.
      await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
      const drawn = performance.now();
      api.lastRun.timings = {
        modelWasLoaded: wasLoaded,
        loadMs: wasLoaded ? 0 : loaded - clicked,
        runToDrawnMs: drawn - loaded,
        clickToDrawnMs: drawn - clicked,
        modelMs: ran - loaded,
        heatmapsMs: heatmapsDrawn - beforeViews,
        headViewMs: headViewDrawn - heatmapsDrawn,
      };
      status(
        `${encoded.tokens.length} tokens, drawn ${Math.round(drawn - loaded)} ms after Run` +
          (wasLoaded
            ? "."
            : ` (plus ${(api.loadMs / 1000).toFixed(1)} s to download ${(api.downloadedBytes / 1e6).toFixed(1)} MB ` +
              "and start the model)."),
      );
      await showSimilarities(textA, textB, output.hidden);
    } catch (error) {
      say("error", `Something went wrong: ${error.message}`);
      console.error(error);
    } finally {
      page.run.disabled = false;
    }
  }

  function start() {
    const root = document.getElementById("try-it");
    if (!root) return;
    page = {
      root,
      sentenceA: root.querySelector("#try-sentence-a"),
      sentenceB: root.querySelector("#try-sentence-b"),
      run: root.querySelector("#try-run"),
      status: root.querySelector("#try-status"),
      messages: root.querySelector("#try-messages"),
      tokens: root.querySelector("#try-tokens"),
      headView: root.querySelector("#try-head-view"),
      layer: root.querySelector("#try-heatmap-layer"),
      heatmaps: root.querySelector("#try-heatmaps"),
      readout: root.querySelector("#try-heatmap-readout"),
      similarity: root.querySelector("#try-similarity"),
      references: Array.from(root.querySelectorAll("#try-references li"), (li) => li.textContent.trim()),
    };
    root.querySelector("#try-form").addEventListener("submit", run);
    if (location.protocol === "file:") {
      // Opened as a file, the browser refuses to fetch the model: say so, and how to serve the site.
      page.run.disabled = true;
      say(
        "error",
        "This page runs the model in your browser and needs the site served over HTTP, not opened as a file. " +
          "Serve the built site (python3 -m http.server --directory docs/_build/html --bind 127.0.0.1 8000) " +
          "and open http://127.0.0.1:8000/try.html.",
      );
    }
    page.layer.addEventListener("change", drawHeatmaps);
    // Redraw the heatmaps in the theme's new colours when the reader switches light/dark.
    new MutationObserver(() => {
      colours = null;
      drawHeatmaps();
    }).observe(document.documentElement, { attributeFilter: ["data-theme"] });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
