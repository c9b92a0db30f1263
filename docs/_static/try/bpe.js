/*
 * Byte-level BPE, GPT-2's tokenizer and SmolLM2's, written out for the browser.
 *
 * It gives the ids of the transformers tokenizer built from the same GGUF file
 * (literate_transformer.core.gguf.gguf_tokenizer; tests/test_bpe_js.py and the
 * browser test compare them on a corpus), in four steps:
 *
 *   1. the special tokens ("<|im_start|>", ...) typed in the text are cut out first,
 *      whole: at each place the longest one that starts there, the earliest place first;
 *   2. pre-tokenise each stretch between them with GPT-2's pattern: a word is an optional
 *      space and letters, or and digits, or and other symbols; "'s" and friends; runs of
 *      white space (the last space of a run goes with the word after it);
 *   3. spell each piece's UTF-8 bytes as printable characters (GPT-2's bytes_to_unicode:
 *      a space is "Ġ", a newline "Ċ"), so that every byte is a symbol of the vocabulary;
 *   4. BPE: merge the adjacent pair of symbols whose merge rule comes first in the file's
 *      list, again and again, until no adjacent pair has a rule; each symbol left is a token.
 *
 * White space in the pattern is Unicode's White_Space, as in the Rust library's regular
 * expressions (JavaScript's \s also counts U+FEFF and misses U+0085, so it is not used).
 * The vocabulary and the merges come from decoder.json, written by
 * lt_site.export_decoder.tokenizer_spec() from the GGUF file's own metadata.
 */
(function (root) {
  "use strict";

  // Step 2: GPT-2's pattern, \s and \S spelled as White_Space.
  const PIECES =
    /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+/gu;

  // Step 3: GPT-2's bytes_to_unicode. The printable bytes stand for themselves; the others
  // (controls, space, the non-printing Latin-1 range) get the code points from 256 on, in order.
  function bytesToUnicode() {
    const printable = [];
    const ranges = [[0x21, 0x7e], [0xa1, 0xac], [0xae, 0xff]];
    for (const [first, last] of ranges) for (let b = first; b <= last; b++) printable.push(b);
    const table = new Array(256);
    let next = 256;
    for (let b = 0; b < 256; b++) table[b] = String.fromCodePoint(printable.includes(b) ? b : next++);
    return table;
  }

  // How many bytes at the end of bytes begin a UTF-8 character without finishing it (0 to 3).
  function incompleteTail(bytes) {
    for (let back = 1; back <= Math.min(3, bytes.length); back++) {
      const byte = bytes[bytes.length - back];
      // A continuation byte (10xxxxxx): look further back for the byte that starts the character.
      if ((byte & 0xc0) === 0x80) continue;
      // The start of a character of 2 (110xxxxx), 3 (1110xxxx) or 4 (11110xxx) bytes; else a whole one.
      const length = (byte & 0xe0) === 0xc0 ? 2 : (byte & 0xf0) === 0xe0 ? 3 : (byte & 0xf8) === 0xf0 ? 4 : 1;
      return back < length ? back : 0;
    }
    return 0;
  }

  class ByteLevelBPE {
    /**
     * A tokenizer whose two big maps (about 49,000 tokens and as many merges) are built a slice at a
     * time, awaiting pause() between slices: a page's thread stays free to draw meanwhile.
     * @param {object} spec  the "tokenizer" object of decoder.json
     * @param {function} pause  returns a promise (a task's worth of waiting, say)
     */
    static async built(spec, pause, slice = 8192) {
      const tokenizer = new ByteLevelBPE(spec, { maps: false });
      for (const [list, map] of [[spec.tokens, tokenizer.ids], [spec.merges, tokenizer.ranks]]) {
        for (let start = 0; start < list.length; start += slice) {
          for (let i = start; i < Math.min(start + slice, list.length); i++) map.set(list[i], i);
          await pause();
        }
      }
      return tokenizer;
    }

    /** @param {object} spec  the "tokenizer" object of decoder.json */
    constructor(spec, { maps = true } = {}) {
      if (spec.model !== "byte-level-bpe") throw new Error(`not a byte-level BPE tokenizer: ${spec.model}`);
      this.spec = spec;
      this.tokens = spec.tokens; // id -> token
      // token -> id, and "a b" -> its priority (lower merges first).
      this.ids = new Map();
      this.ranks = new Map();
      if (maps) {
        for (let id = 0; id < spec.tokens.length; id++) this.ids.set(spec.tokens[id], id);
        for (let rank = 0; rank < spec.merges.length; rank++) this.ranks.set(spec.merges[rank], rank);
      }
      this.byteChars = bytesToUnicode();
      this.charBytes = new Map(this.byteChars.map((ch, b) => [ch, b]));
      // Whole tokens matched before anything else, grouped by first character, longest first.
      this.whole = new Map();
      for (const token of [...spec.special, ...spec.added]) {
        const first = token[0];
        if (!this.whole.has(first)) this.whole.set(first, []);
        this.whole.get(first).push(token);
      }
      for (const list of this.whole.values()) list.sort((a, b) => b.length - a.length);
      this.special = new Set(spec.special);
      this.cache = new Map();
      this.encoder = new TextEncoder();
      // ignoreBOM: a text that starts with U+FEFF keeps it (the decoder would drop it as a byte order mark).
      this.decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
    }

    // Step 1: the text cut into stretches and whole tokens.
    splitWhole(text) {
      const parts = [];
      let start = 0;
      for (let i = 0; i < text.length; i++) {
        const candidates = this.whole.get(text[i]);
        if (!candidates) continue;
        const match = candidates.find((token) => text.startsWith(token, i));
        if (match === undefined) continue;
        if (i > start) parts.push({ text: text.slice(start, i), whole: false });
        parts.push({ text: match, whole: true });
        start = i + match.length;
        i = start - 1;
      }
      if (start < text.length) parts.push({ text: text.slice(start), whole: false });
      return parts;
    }

    // Step 4 on one piece, already spelled in byte characters.
    bpe(piece) {
      const cached = this.cache.get(piece);
      if (cached) return cached;
      let symbols = Array.from(piece);
      while (symbols.length > 1) {
        let best = -1;
        let bestRank = Infinity;
        for (let i = 0; i < symbols.length - 1; i++) {
          const rank = this.ranks.get(symbols[i] + " " + symbols[i + 1]);
          if (rank !== undefined && rank < bestRank) {
            bestRank = rank;
            best = i;
          }
        }
        if (best < 0) break;
        // Merge every occurrence of that pair, left to right (the Rust library merges the leftmost first, then
        // finds the same pair again further right: the same result).
        const [left, right] = [symbols[best], symbols[best + 1]];
        const merged = [];
        for (let i = 0; i < symbols.length; i++) {
          if (i < symbols.length - 1 && symbols[i] === left && symbols[i + 1] === right) {
            merged.push(left + right);
            i++;
          } else {
            merged.push(symbols[i]);
          }
        }
        symbols = merged;
      }
      if (this.cache.size < 100000) this.cache.set(piece, symbols);
      return symbols;
    }

    /** The tokens of a text (strings of the vocabulary). */
    tokenize(text) {
      const out = [];
      for (const part of this.splitWhole(text)) {
        if (part.whole) {
          out.push(part.text);
          continue;
        }
        for (const match of part.text.matchAll(PIECES)) {
          const spelled = Array.from(this.encoder.encode(match[0]), (b) => this.byteChars[b]).join("");
          out.push(...this.bpe(spelled));
        }
      }
      return out;
    }

    /** The ids of a text, as `tokenizer(text)["input_ids"]` (no token is added around it). */
    encode(text) {
      return this.tokenize(text).map((token) => {
        const id = this.ids.get(token);
        if (id === undefined) throw new Error(`token ${JSON.stringify(token)} is not in the vocabulary`);
        return id;
      });
    }

    /**
     * The text of some ids: each token's byte characters turned back into bytes, read as UTF-8.
     *
     * A character may be split across tokens (an emoji's four bytes in two tokens, say). With
     * holdIncomplete, for text still being written, bytes at the end that begin a character
     * without finishing it are held back (they would read as U+FFFD); the next call, with the
     * tokens that complete them, shows the character.
     */
    decode(ids, { skipSpecial = false, holdIncomplete = false } = {}) {
      const bytes = [];
      let text = "";
      const flush = () => {
        text += this.decoder.decode(Uint8Array.from(bytes));
        bytes.length = 0;
      };
      for (const id of ids) {
        const token = this.tokens[id];
        if (this.special.has(token) || this.spec.added.includes(token)) {
          flush();
          if (!(skipSpecial && this.special.has(token))) text += token;
          continue;
        }
        for (const ch of token) bytes.push(this.charBytes.get(ch));
      }
      if (holdIncomplete) bytes.length -= incompleteTail(bytes);
      flush();
      return text;
    }

    /**
     * One token with its white space visible, as the tokenizer writes it: a space "Ġ", a line break
     * "Ċ", a tab "ĉ" (each byte below "!" and DEL as GPT-2's byte characters spell it); the rest
     * as display() shows it (a byte of a character cut in two as <0xF0>, a space before it as "Ġ"). A
     * token of ASCII bytes reads exactly as in the vocabulary.
     */
    visible(id) {
      return this.visibleParts(id)
        .map((part) => part.text)
        .join("");
    }

    /** visible(id) in parts, [{text, mark}], mark true for the stand-ins of white space (a page draws them apart). */
    visibleParts(id) {
      const token = this.tokens[id];
      if (this.special.has(token) || this.spec.added.includes(token)) return [{ text: token, mark: false }];
      const parts = [];
      const push = (text, mark) => {
        const last = parts[parts.length - 1];
        if (last && last.mark === mark) last.text += text;
        else parts.push({ text, mark });
      };
      const bytes = Array.from(token, (ch) => this.charBytes.get(ch));
      const text = this.decoder.decode(Uint8Array.from(bytes));
      const blank = (code) => code <= 0x20 || code === 0x7f;
      if (!text.includes("\ufffd")) {
        for (const ch of text) {
          const code = ch.codePointAt(0);
          if (blank(code)) push(this.byteChars[code], true);
          else push(ch, false);
        }
      } else {
        for (const byte of bytes) {
          if (blank(byte)) push(this.byteChars[byte], true);
          else push(`<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>`, false);
        }
      }
      return parts;
    }

    /** One token as the reader should see it: its bytes as text, or as <0xNN> where they are not whole UTF-8. */
    display(id) {
      const token = this.tokens[id];
      if (this.special.has(token) || this.spec.added.includes(token)) return token;
      const bytes = Uint8Array.from(Array.from(token, (ch) => this.charBytes.get(ch)));
      const text = this.decoder.decode(bytes);
      if (!text.includes("\ufffd")) return text;
      return Array.from(bytes, (b) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`).join("");
    }
  }

  // The browser gets a global; node (the tests) gets a module.
  if (typeof module !== "undefined" && module.exports) {
    module.exports = { ByteLevelBPE, bytesToUnicode, incompleteTail, PIECES };
  } else {
    root.ByteLevelBPE = ByteLevelBPE;
  }
})(typeof window !== "undefined" ? window : globalThis);
