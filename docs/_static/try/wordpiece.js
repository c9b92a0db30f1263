/*
 * BERT's WordPiece tokenizer, written out for the browser.
 *
 * It gives the ids HuggingFace's fast tokenizer gives (tests/test_wordpiece_js.py
 * compares them on a corpus), in the same four steps:
 *
 *   1. special tokens typed in the text ("[MASK]") are cut out first, as they are;
 *   2. normalise: drop control characters, turn every kind of space into " ",
 *      put spaces around CJK ideographs, strip accents (NFD, then drop the
 *      combining marks), lowercase;
 *   3. pre-tokenise: split on spaces, and make every punctuation mark its own word;
 *   4. WordPiece: cut each word into the longest pieces found in the vocabulary,
 *      left to right, pieces after the first written with "##"; a word that cannot
 *      be cut (or is longer than 100 characters) becomes [UNK].
 *
 * Then [CLS] A [SEP] (B [SEP]) around the pieces, token type 0 for A and 1 for B,
 * and, when the result is too long, the same truncation as `truncation=True`.
 *
 * Every loop walks over code points (Array.from), not UTF-16 units, so an emoji
 * is one character here as it is in Rust.  The settings and the vocabulary come
 * from model.json, written by literate_transformer.export.tokenizer_spec().
 */
(function (root) {
  "use strict";

  // Unicode classes, as HuggingFace's tokenizers (Rust) defines them.
  const CONTROL = /\p{C}/u; // "other": Cc, Cf, Cs, Co, Cn
  const WHITESPACE = /\p{White_Space}/u;
  const COMBINING_MARK = /\p{Mn}/gu; // what strip_accents removes after NFD
  // ASCII punctuation includes symbols such as $ + < = > ^ ` | ~, then all of Unicode's P*.
  const PUNCTUATION = /[!-/:-@[-`{-~]|\p{P}/u;

  // The CJK Unified Ideographs blocks BERT isolates (Hangul and kana are not among them).
  function isChineseChar(codePoint) {
    return (
      (codePoint >= 0x4e00 && codePoint <= 0x9fff) ||
      (codePoint >= 0x3400 && codePoint <= 0x4dbf) ||
      (codePoint >= 0x20000 && codePoint <= 0x2a6df) ||
      (codePoint >= 0x2a700 && codePoint <= 0x2b73f) ||
      (codePoint >= 0x2b740 && codePoint <= 0x2b81f) ||
      (codePoint >= 0x2b820 && codePoint <= 0x2ceaf) ||
      (codePoint >= 0xf900 && codePoint <= 0xfaff) ||
      (codePoint >= 0x2f800 && codePoint <= 0x2fa1f)
    );
  }

  class WordPieceTokenizer {
    /** @param {object} spec  the "tokenizer" object of model.json */
    constructor(spec) {
      this.spec = spec;
      this.vocab = spec.vocab; // id -> token
      this.ids = new Map(spec.vocab.map((token, id) => [token, id])); // token -> id
      this.unkId = this.idOf(spec.unk_token);
      this.clsId = this.idOf(spec.cls_token);
      this.sepId = this.idOf(spec.sep_token);
      this.maxLength = spec.model_max_length;
    }

    idOf(token) {
      if (!this.ids.has(token)) throw new Error(`token ${token} is not in the vocabulary`);
      return this.ids.get(token);
    }

    // Step 2.
    normalize(text) {
      const spec = this.spec;
      let out = "";
      for (const ch of text) {
        const codePoint = ch.codePointAt(0);
        if (spec.clean_text) {
          // NUL, the replacement character and control characters go; tab and newlines are spaces.
          const keptControl = ch === "\t" || ch === "\n" || ch === "\r";
          if (codePoint === 0 || codePoint === 0xfffd || (CONTROL.test(ch) && !keptControl)) continue;
          if (keptControl || WHITESPACE.test(ch)) {
            out += " ";
            continue;
          }
        }
        out += spec.handle_chinese_chars && isChineseChar(codePoint) ? ` ${ch} ` : ch;
      }
      if (spec.strip_accents) out = out.normalize("NFD").replace(COMBINING_MARK, "");
      // Character by character, as Rust's char::to_lowercase (no final-sigma rule).
      if (spec.lowercase) out = Array.from(out, (ch) => ch.toLowerCase()).join("");
      return out;
    }

    // Step 3.
    preTokenize(text) {
      const words = [];
      let word = "";
      for (const ch of text) {
        if (WHITESPACE.test(ch)) {
          if (word) words.push(word);
          word = "";
        } else if (PUNCTUATION.test(ch)) {
          if (word) words.push(word);
          words.push(ch);
          word = "";
        } else {
          word += ch;
        }
      }
      if (word) words.push(word);
      return words;
    }

    // Step 4: greedy longest-match-first.
    wordPiece(word) {
      const chars = Array.from(word);
      if (chars.length > this.spec.max_input_chars_per_word) return [this.spec.unk_token];
      const pieces = [];
      let start = 0;
      while (start < chars.length) {
        let end = chars.length;
        let piece = null;
        // Shrink the candidate from the right until the vocabulary knows it.
        while (start < end) {
          let candidate = chars.slice(start, end).join("");
          if (start > 0) candidate = this.spec.continuing_subword_prefix + candidate;
          if (this.ids.has(candidate)) {
            piece = candidate;
            break;
          }
          end -= 1;
        }
        // One unknown stretch makes the whole word unknown.
        if (piece === null) return [this.spec.unk_token];
        pieces.push(piece);
        start = end;
      }
      return pieces;
    }

    /** The pieces of one text, special tokens typed in it kept whole (step 1). */
    tokenize(text) {
      const tokens = [];
      for (const part of this.splitSpecial(text)) {
        if (part.special) {
          tokens.push(part.text);
        } else {
          for (const word of this.preTokenize(this.normalize(part.text))) tokens.push(...this.wordPiece(word));
        }
      }
      return tokens;
    }

    // Step 1: cut "[MASK]", "[SEP]"... out of the raw text (exact, case-sensitive matches).
    splitSpecial(text) {
      const parts = [];
      let rest = text;
      while (rest) {
        let first = -1;
        let match = null;
        // The earliest match wins; among matches at one place, the longest (the list is sorted longest first).
        for (const special of this.spec.special_tokens) {
          const at = rest.indexOf(special);
          if (at !== -1 && (first === -1 || at < first)) {
            first = at;
            match = special;
          }
        }
        if (match === null) {
          parts.push({ text: rest, special: false });
          break;
        }
        if (first > 0) parts.push({ text: rest.slice(0, first), special: false });
        parts.push({ text: match, special: true });
        rest = rest.slice(first + match.length);
      }
      return parts;
    }

    /**
     * Encode one text or a pair, as `tokenizer(a, b, truncation=True, max_length=maxLength)`.
     *
     * @returns {{tokens: string[], inputIds: number[], tokenTypeIds: number[],
     *            untruncatedLength: number, truncated: boolean, sentenceBStart: number|null}}
     */
    encode(textA, textB = null, maxLength = this.maxLength) {
      let a = this.tokenize(textA);
      let b = textB === null ? null : this.tokenize(textB);
      const specials = b === null ? 2 : 3;
      const untruncatedLength = a.length + (b === null ? 0 : b.length) + specials;
      const room = Math.max(maxLength - specials, 0);
      if (untruncatedLength > maxLength) {
        if (b === null) {
          a = a.slice(0, room);
        } else {
          [a, b] = truncateLongestFirst(a, b, room);
        }
      }
      const tokens = [this.spec.cls_token, ...a, this.spec.sep_token];
      const tokenTypeIds = tokens.map(() => 0);
      let sentenceBStart = null;
      if (b !== null) {
        sentenceBStart = tokens.length;
        tokens.push(...b, this.spec.sep_token);
        tokenTypeIds.push(...b.map(() => 1), 1);
      }
      return {
        tokens,
        inputIds: tokens.map((token) => this.ids.get(token)),
        tokenTypeIds,
        untruncatedLength,
        truncated: untruncatedLength > maxLength,
        sentenceBStart,
      };
    }
  }

  // HuggingFace's "longest_first" for a pair: keep the shorter text whole if the longer one
  // can take the cut alone; otherwise give each half of the room (the extra token to the longer).
  function truncateLongestFirst(a, b, room) {
    const swap = a.length > b.length;
    let [short, long] = swap ? [b.length, a.length] : [a.length, b.length];
    long = short > room ? short : Math.max(short, room - short);
    if (short + long > room) {
      short = Math.floor(room / 2);
      long = short + (room % 2);
    }
    const [keepA, keepB] = swap ? [long, short] : [short, long];
    return [a.slice(0, keepA), b.slice(0, keepB)];
  }

  // The browser gets a global; node (the tests) gets a module.
  if (typeof module !== "undefined" && module.exports) {
    module.exports = { WordPieceTokenizer };
  } else {
    root.WordPieceTokenizer = WordPieceTokenizer;
  }
})(typeof window !== "undefined" ? window : globalThis);
