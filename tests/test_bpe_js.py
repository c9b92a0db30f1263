"""The prompt page's byte-level BPE tokenizer (JavaScript) gives transformers' ids, exactly.

``docs/_static/try/bpe.js`` is run with ``node`` on every string of
``tests/data/bpe_corpus.json`` (English with contractions in both cases,
digits and numbers, runs of every kind of white space, accents, combining
marks and many scripts, emoji with modifiers and joiners, code, special
tokens typed in the text, long words), built from the trained decoder's own
GGUF file (:func:`lt_site.export_decoder.tokenizer_spec`).  Its ids must
equal those of the ``transformers`` tokenizer built from the same file
(:func:`literate_transformer.core.gguf.gguf_tokenizer`, which the site's build
proves equal to ``AutoTokenizer.from_pretrained(..., gguf_file=...)``), and
decoding them must give the text back.  The browser test runs the same
corpus in Chromium.

``node`` is required (``apt-get install -y nodejs``): without it these tests fail with a message.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest
from lt_site.export_decoder import chat_wrapping, tokenizer_spec

ROOT = Path(__file__).resolve().parents[1]
BPE_JS = ROOT / "docs" / "_static" / "try" / "bpe.js"
CORPUS = ROOT / "tests" / "data" / "bpe_corpus.json"

_RUNNER = r"""
const fs = require("fs");
const { ByteLevelBPE } = require(process.argv[2]);
const spec = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const texts = JSON.parse(fs.readFileSync(process.argv[4], "utf8"));
const tokenizer = new ByteLevelBPE(spec);
const results = texts.map((text) => {
  const ids = tokenizer.encode(text);
  return { ids, decoded: tokenizer.decode(ids) };
});
process.stdout.write(JSON.stringify(results));
"""


# Each text decoded as the page streams it, token by token, holding back a character's unfinished bytes; and
# every token of the vocabulary as the page shows it, its white space visible.
_STREAM_RUNNER = r"""
const fs = require("fs");
const { ByteLevelBPE } = require(process.argv[2]);
const spec = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const texts = JSON.parse(fs.readFileSync(process.argv[4], "utf8"));
const tokenizer = new ByteLevelBPE(spec);
const streams = texts.map((text) => {
  const ids = tokenizer.encode(text);
  const held = [], plain = [];
  for (let n = 1; n <= ids.length; n++) {
    held.push(tokenizer.decode(ids.slice(0, n), { holdIncomplete: true }));
    plain.push(tokenizer.decode(ids.slice(0, n)));
  }
  return { held, plain };
});
const visible = spec.tokens.map((_, id) => tokenizer.visible(id));
// The stand-ins of white space, apart from the text: " é", " the", two line breaks, a space and half an emoji.
const parts = ["ĠÃ©", "Ġthe", "ĊĊ", "ĠðŁ"].map((token) => tokenizer.visibleParts(spec.tokens.indexOf(token)));
// The page builds its tokenizer a slice at a time, pausing between slices: the same tokenizer.
let pauses = 0;
ByteLevelBPE.built(spec, async () => pauses++, 5000).then((built) => {
  const builtIds = texts.map((text) => built.encode(text));
  const sameIds = builtIds.every((ids, i) => JSON.stringify(ids) === JSON.stringify(tokenizer.encode(texts[i])));
  process.stdout.write(JSON.stringify({ streams, visible, parts, sameIds, pauses }));
});
"""


def corpus() -> list[str]:
    return json.loads(CORPUS.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def gguf():
    from literate_transformer.core.checkpoints import resolve_decoder
    from literate_transformer.core.gguf import read_gguf

    return read_gguf(resolve_decoder())


@pytest.fixture(scope="module")
def decoder_tokenizer(gguf):
    from literate_transformer.core.gguf import gguf_tokenizer

    return gguf_tokenizer(gguf)


@pytest.fixture(scope="module")
def js_results(gguf, tmp_path_factory) -> list[dict]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node (Node.js) is needed to run the page's tokenizer: apt-get install -y nodejs")
    folder = tmp_path_factory.mktemp("bpe")
    (folder / "spec.json").write_text(json.dumps(tokenizer_spec(gguf)), encoding="utf-8")
    (folder / "runner.js").write_text(_RUNNER, encoding="utf-8")
    completed = subprocess.run(
        [node, str(folder / "runner.js"), str(BPE_JS), str(folder / "spec.json"), str(CORPUS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, f"node failed:\n{completed.stderr}"
    return json.loads(completed.stdout)


@pytest.fixture(scope="module")
def js_streams(gguf, tmp_path_factory) -> dict:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node (Node.js) is needed to run the page's tokenizer: apt-get install -y nodejs")
    folder = tmp_path_factory.mktemp("bpe_stream")
    (folder / "spec.json").write_text(json.dumps(tokenizer_spec(gguf)), encoding="utf-8")
    (folder / "runner.js").write_text(_STREAM_RUNNER, encoding="utf-8")
    completed = subprocess.run(
        [node, str(folder / "runner.js"), str(BPE_JS), str(folder / "spec.json"), str(CORPUS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, f"node failed:\n{completed.stderr}"
    return json.loads(completed.stdout)


def test_the_corpus_covers_what_a_prompt_may_hold(gguf) -> None:
    texts = corpus()
    assert len(texts) >= 200 and len(set(texts)) == len(texts)
    joined = "".join(texts)
    assert any(ord(ch) >= 0x1F300 for ch in joined), "emoji"
    assert "\u200d" in joined, "emoji joined by zero-width joiners"
    assert any(unicodedata.category(ch) == "Mn" for ch in joined), "combining marks"
    assert any("\u4e00" <= ch <= "\u9fff" for ch in joined), "CJK"
    assert any(ch.isdigit() for ch in joined), "digits"
    assert any("def " in text or "{" in text for text in texts), "code"
    assert any("  " in text or "\t\t" in text or "\n\n" in text for text in texts), "whitespace runs"
    assert {"\u00a0", "\u3000", "\u0085", "\u2028", "\ufeff"} <= set(joined), "white space that is not ASCII"
    assert any(text != text.lower() and "'" in text for text in texts), "contractions in upper case"
    # Control tokens typed in the text, which both tokenizers must cut out whole.
    assert sum(token in joined for token in tokenizer_spec(gguf)["special"]) >= 10


def test_every_string_gets_transformers_ids(js_results, decoder_tokenizer) -> None:
    texts = corpus()
    mismatches = []
    for text, result in zip(texts, js_results, strict=True):
        expected = decoder_tokenizer(text)["input_ids"]
        if result["ids"] != expected:
            mismatches.append(
                f"{text[:50]!r}:\n    js     {decoder_tokenizer.convert_ids_to_tokens(result['ids'])[:20]}\n"
                f"    python {decoder_tokenizer.convert_ids_to_tokens(expected)[:20]}"
            )
    assert not mismatches, f"{len(mismatches)} of {len(texts)} strings differ:\n" + "\n".join(mismatches[:10])
    # Not vacuous: the corpus makes thousands of tokens, of many kinds.
    assert sum(len(result["ids"]) for result in js_results) > 2000


def test_decoding_gives_the_text_back(js_results, decoder_tokenizer) -> None:
    for text, result in zip(corpus(), js_results, strict=True):
        assert result["decoded"] == decoder_tokenizer.decode(result["ids"]) == text, text


def test_the_chat_wrapping_is_the_templates(decoder_tokenizer) -> None:
    wrapping = chat_wrapping(decoder_tokenizer)
    for message in ("What is the capital of France?", "two\nlines  and  spaces", "🎉 <|im_end|> inside"):
        expected = decoder_tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=False
        )
        assert wrapping["before"] + message + wrapping["after"] == expected
    assert (
        wrapping["before"].startswith("<|im_start|>system\n")
        and wrapping["after"] == "<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_tokenizer_that_is_not_byte_level_bpe_is_refused(gguf) -> None:
    import dataclasses

    other = dataclasses.replace(gguf, metadata={**gguf.metadata, "tokenizer.ggml.model": "llama"})
    with pytest.raises(ValueError, match="byte-level BPE"):
        tokenizer_spec(other)


def test_a_template_that_does_not_copy_the_message_is_refused(decoder_tokenizer) -> None:
    import copy

    changed = copy.copy(decoder_tokenizer)
    changed.chat_template = "{% for m in messages %}{{ m['content'] | upper }}{% endfor %}"
    with pytest.raises(ValueError, match="verbatim"):
        chat_wrapping(changed)
    changed.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        chat_wrapping(changed)


def test_a_streamed_text_never_shows_half_a_character(js_streams) -> None:
    split = 0
    for text, stream in zip(corpus(), js_streams["streams"], strict=True):
        if "\ufffd" in text or not text:
            continue
        for held, plain in zip(stream["held"], stream["plain"], strict=True):
            assert "\ufffd" not in held and text.startswith(held), (text, held)
            # What is held back is only the character being written, which reads as U+FFFD without holding.
            assert plain == held or plain.rstrip("\ufffd") == held, (plain, held)
            split += plain != held
        assert stream["held"][-1] == text
    # Not vacuous: many prefixes end inside a character, and read as U+FFFD without holding back.
    assert split >= 20


def test_white_space_is_shown_as_the_tokenizer_writes_it(js_streams, gguf) -> None:
    tokens = tokenizer_spec(gguf)["tokens"]
    visible = js_streams["visible"]
    # GPT-2's byte characters: every byte of ASCII spelled as the vocabulary spells it ("Ġthe", "ĊĊ", "ĉ").
    ascii_spelling = {chr(code) for code in range(0x21, 0x7F)} | {chr(0x100 + code) for code in range(0x21)} | {"ġ"}
    ascii_tokens = [index for index, token in enumerate(tokens) if set(token) <= ascii_spelling]
    assert len(ascii_tokens) > 10000
    for index in ascii_tokens:
        assert visible[index] == tokens[index], (tokens[index], visible[index])
    for token in ("Ġthe", "Ċ", "ĊĊ", "ĉ", "Ġ"):
        assert visible[tokens.index(token)] == token
    # No token shows white space or a control character, which would read as nothing.
    assert not [text for text in visible if any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in text)]
    assert visible[tokens.index("<|im_start|>")] == "<|im_start|>"
    # A token that is not ASCII shows its text: "Ġé" is " é", with its space spelled.
    accented = next(index for index, token in enumerate(tokens) if token == "ĠÃ©")
    assert visible[accented] == "Ġé"
    # A character cut in two shows its bytes, its white space spelled still: "ĠðŁ" (a space, half an emoji).
    assert visible[tokens.index("ĠðŁ")] == "Ġ<0xF0><0x9F>"
    # In parts, the stand-ins of white space are marked, for a page to draw them apart from letters.
    assert js_streams["parts"] == [
        [{"text": "Ġ", "mark": True}, {"text": "é", "mark": False}],
        [{"text": "Ġ", "mark": True}, {"text": "the", "mark": False}],
        [{"text": "ĊĊ", "mark": True}],
        [{"text": "Ġ", "mark": True}, {"text": "<0xF0><0x9F>", "mark": False}],
    ]


def test_the_tokenizer_built_a_slice_at_a_time_is_the_same(js_streams, gguf) -> None:
    spec = tokenizer_spec(gguf)
    assert js_streams["sameIds"]
    # It paused after every 5,000 tokens and merges.
    assert js_streams["pauses"] == -(-len(spec["tokens"]) // 5000) + -(-len(spec["merges"]) // 5000)
