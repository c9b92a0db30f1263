"""The page's WordPiece tokenizer (JavaScript) gives the Python tokenizer's ids, exactly.

``docs/_static/try/wordpiece.js`` is run with ``node`` on every line of
``tests/data/wordpiece_corpus.txt`` (punctuation, accents, numbers, unknown
and over-long words, CJK, emoji, control and zero-width characters, special
tokens typed in the text, and inputs longer than the model's 512 positions),
alone and as pairs of consecutive lines, with the checkpoint's own maximum
length and with a tiny one that forces truncation everywhere.  Its ids and
token types must equal those of ``literate_transformer.load_tokenizer()``
called with ``truncation=True``: nothing is compared with numbers copied
from a run.

``node`` is required (the README lists Node.js among the prerequisites;
``apt-get install -y nodejs`` on Debian): without it these tests fail with a
message, they do not skip.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from lt_site.export import tokenizer_spec

ROOT = Path(__file__).resolve().parents[2]
WORDPIECE_JS = ROOT / "docs" / "_static" / "try" / "wordpiece.js"
CORPUS = ROOT / "tests" / "data" / "wordpiece_corpus.txt"
#: A maximum length so small that most lines and every pair get truncated.
TINY_MAX_LENGTH = 16

# Reads the spec, the corpus and the cases, and prints what the JavaScript tokenizer makes of each.
_RUNNER = r"""
const fs = require("fs");
const { WordPieceTokenizer } = require(process.argv[2]);
const spec = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const cases = JSON.parse(fs.readFileSync(process.argv[4], "utf8"));
const tokenizer = new WordPieceTokenizer(spec);
const results = cases.map(([a, b, maxLength]) => {
  const encoded = tokenizer.encode(a, b, maxLength === null ? undefined : maxLength);
  return { ids: encoded.inputIds, types: encoded.tokenTypeIds, tokens: encoded.tokens, truncated: encoded.truncated };
});
process.stdout.write(JSON.stringify(results));
"""


def _corpus() -> list[str]:
    # split("\n"), not splitlines(): some lines hold vertical tabs and form feeds on purpose.
    lines = CORPUS.read_text(encoding="utf-8").split("\n")
    return [line for line in lines if line]


def _cases() -> list[tuple[str, str | None, int | None]]:
    lines = _corpus()
    pairs = list(zip(lines, lines[1:] + lines[:1], strict=True))
    return (
        [(line, None, None) for line in lines]
        + [(a, b, None) for a, b in pairs]
        + [(line, None, TINY_MAX_LENGTH) for line in lines]
        + [(a, b, TINY_MAX_LENGTH) for a, b in pairs]
    )


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("node (Node.js) is needed to run the page's tokenizer: apt-get install -y nodejs")
    return found


@pytest.fixture(scope="module")
def js_results(node: str, tokenizer, tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("wordpiece")
    (folder / "spec.json").write_text(json.dumps(tokenizer_spec(tokenizer)), encoding="utf-8")
    (folder / "cases.json").write_text(json.dumps(_cases()), encoding="utf-8")
    (folder / "runner.js").write_text(_RUNNER, encoding="utf-8")
    completed = subprocess.run(
        [node, str(folder / "runner.js"), str(WORDPIECE_JS), str(folder / "spec.json"), str(folder / "cases.json")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, f"node failed:\n{completed.stderr}"
    return json.loads(completed.stdout)


def _mismatches(cases, results, tokenizer, select) -> list[str]:
    found = []
    for (a, b, max_length), result in zip(cases, results, strict=True):
        if not select(b, max_length):
            continue
        kwargs = {"truncation": True} if max_length is None else {"truncation": True, "max_length": max_length}
        expected = tokenizer(a, b, **kwargs) if b is not None else tokenizer(a, **kwargs)
        if result["ids"] != expected["input_ids"] or result["types"] != expected["token_type_ids"]:
            found.append(
                f"{a[:60]!r}{' + ' + repr(b[:40]) if b is not None else ''} (max_length={max_length}):\n"
                f"    js     {result['tokens'][:24]}\n"
                f"    python {tokenizer.convert_ids_to_tokens(expected['input_ids'])[:24]}"
            )
    return found


def test_corpus_covers_what_the_page_must_handle(tokenizer) -> None:
    lines = _corpus()
    assert len(lines) >= 200
    text = "".join(lines)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text), "CJK ideographs"
    assert any(ord(ch) >= 0x1F300 for ch in text), "emoji"
    assert any(ch in "éüñçø" for ch in text), "accents"
    assert any(ch.isdigit() for ch in text), "numbers"
    assert "[MASK]" in text, "special tokens typed in the text"
    lengths = [len(tokenizer(line)["input_ids"]) for line in lines]
    assert sum(length > tokenizer.model_max_length for length in lengths) >= 2, "over-long inputs"
    assert any(tokenizer.unk_token_id in tokenizer(line)["input_ids"] for line in lines), "unknown words"


def test_single_sentences_get_the_python_ids(js_results, tokenizer) -> None:
    mismatches = _mismatches(_cases(), js_results, tokenizer, lambda b, max_length: b is None and max_length is None)
    assert not mismatches, f"{len(mismatches)} sentences differ:\n" + "\n".join(mismatches[:10])


def test_sentence_pairs_get_the_python_ids_and_token_types(js_results, tokenizer) -> None:
    mismatches = _mismatches(
        _cases(), js_results, tokenizer, lambda b, max_length: b is not None and max_length is None
    )
    assert not mismatches, f"{len(mismatches)} pairs differ:\n" + "\n".join(mismatches[:10])


def test_over_long_input_is_truncated_as_python_truncates(js_results, tokenizer) -> None:
    cases = _cases()
    # Truncation at the model's own length (the over-long lines) and at a tiny one, singles and pairs...
    at_model_length = [
        index for index, result in enumerate(js_results) if result["truncated"] and cases[index][2] is None
    ]
    assert at_model_length and all(
        len(js_results[index]["ids"]) == tokenizer.model_max_length for index in at_model_length
    )
    assert sum(result["truncated"] for result in js_results) > len(_corpus())
    # ...gives the ids `truncation=True` gives.
    truncated = [case for case, result in zip(cases, js_results, strict=True) if result["truncated"]]
    mismatches = _mismatches(
        truncated, [result for result in js_results if result["truncated"]], tokenizer, lambda b, max_length: True
    )
    assert not mismatches, f"{len(mismatches)} truncated inputs differ:\n" + "\n".join(mismatches[:10])
