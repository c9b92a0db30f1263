"""The prompt page's temperature, top-k and top-p (JavaScript) remove the tokens transformers' processors remove.

``docs/_static/try/sampling.js`` is run with ``node`` on random scores
(some with ties, one with a single dominant token) under many settings; for
each, ``transformers``' own ``TemperatureLogitsWarper``, ``TopKLogitsWarper``
and ``TopPLogitsWarper``, applied in the order ``generate()`` applies them
and only when ``generate()`` would, must remove the same tokens (among equal
scores, as many: which of them top-p keeps follows ``torch.sort``'s order of
equal values, which it leaves unspecified), and the probabilities left must
agree within 1e-6.  The chart's rows
(``distribution``) are checked on the same numbers, and bad settings are
refused by name.

``node`` is required (``apt-get install -y nodejs``): without it these tests fail with a message.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SAMPLING_JS = ROOT / "docs" / "_static" / "try" / "sampling.js"

_RUNNER = r"""
const fs = require("fs");
const sampling = require(process.argv[2]);
const cases = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const results = cases.map(({ logits, settings }) => {
  const scores = Float32Array.from(logits);
  const { scores: processed, removedBy } = sampling.process(scores, settings);
  return {
    removed: Array.from(processed, (s) => s === -Infinity),
    removedBy: Array.from(removedBy),
    probabilities: Array.from(sampling.softmax(processed)),
    chart: sampling.distribution(scores, settings, 10),
    argmax: sampling.argmax(scores),
  };
});
const errors = [{ temperature: 0 }, { topK: -1 }, { topK: 1.5 }, { topP: 0 }, { topP: 1.5 }].map((settings) => {
  try { sampling.process(new Float32Array(4), settings); return null; } catch (error) { return error.message; }
});
process.stdout.write(JSON.stringify({ results, errors }));
"""

SETTINGS = [
    {"temperature": 1.0, "topK": 0, "topP": 1.0},
    {"temperature": 0.7, "topK": 0, "topP": 1.0},
    {"temperature": 1.0, "topK": 5, "topP": 1.0},
    {"temperature": 1.0, "topK": 0, "topP": 0.9},
    {"temperature": 0.5, "topK": 20, "topP": 0.8},
    {"temperature": 1.6, "topK": 50, "topP": 0.95},
    {"temperature": 1.0, "topK": 1, "topP": 0.5},
    {"temperature": 2.0, "topK": 300, "topP": 0.3},
    {"temperature": 0.25, "topK": 3, "topP": 0.05},
]


def _logits() -> list[np.ndarray]:
    generator = np.random.default_rng(0)
    cases = [generator.normal(0, scale, 200).astype(np.float32) for scale in (0.5, 2.0, 5.0)]
    tied = generator.normal(0, 1, 200).astype(np.float32)
    tied[::7] = tied[3]  # many equal scores, some of them at a top-k boundary
    dominant = generator.normal(0, 1, 200).astype(np.float32)
    dominant[17] = 30.0  # one token holds nearly all the probability: top-p keeps it alone
    return [*cases, tied, dominant]


def _transformers(logits: np.ndarray, settings: dict) -> torch.Tensor:
    """What generate(do_sample=True, ...) does to the scores (GenerationMixin._get_logits_processor)."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    scores = torch.from_numpy(logits)[None]
    ids = torch.zeros(1, 1, dtype=torch.long)
    if settings["temperature"] != 1.0:
        scores = TemperatureLogitsWarper(settings["temperature"])(ids, scores)
    if settings["topK"] != 0:
        scores = TopKLogitsWarper(top_k=settings["topK"])(ids, scores)
    if settings["topP"] < 1.0:
        scores = TopPLogitsWarper(top_p=settings["topP"])(ids, scores)
    return scores[0]


@pytest.fixture(scope="module")
def js(tmp_path_factory) -> dict:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node (Node.js) is needed to run the page's sampling: apt-get install -y nodejs")
    folder = tmp_path_factory.mktemp("sampling")
    cases = [{"logits": logits.tolist(), "settings": settings} for logits in _logits() for settings in SETTINGS]
    (folder / "cases.json").write_text(json.dumps(cases))
    (folder / "runner.js").write_text(_RUNNER)
    completed = subprocess.run(
        [node, str(folder / "runner.js"), str(SAMPLING_JS), str(folder / "cases.json")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, f"node failed:\n{completed.stderr}"
    return json.loads(completed.stdout)


def _cases():
    return [(logits, settings) for logits in _logits() for settings in SETTINGS]


def _unique(logits: np.ndarray) -> np.ndarray:
    """Where a score is unique: among equal scores, which ones top-p removes depends on torch.sort's order of
    equal values, which it leaves unspecified (and scrambles), so there only how many are removed is compared."""
    values, counts = np.unique(logits, return_counts=True)
    return np.isin(logits, values[counts == 1])


def _assert_same_removal(removed: list[bool], expected: list[bool], logits: np.ndarray, settings: dict) -> None:
    removed, expected = np.array(removed), np.array(expected)
    unique = _unique(logits)
    assert (removed[unique] == expected[unique]).all(), f"{settings}: removed tokens differ"
    for value in np.unique(logits[~unique]):
        tied = logits == value
        assert removed[tied].sum() == expected[tied].sum(), f"{settings}: a different number of tied tokens removed"


def test_the_same_tokens_are_removed_and_the_same_probabilities_left(js) -> None:
    removed_counts = []
    for (logits, settings), result in zip(_cases(), js["results"], strict=True):
        expected = _transformers(logits, settings)
        expected_removed = torch.isinf(expected).tolist()
        _assert_same_removal(result["removed"], expected_removed, logits, settings)
        probabilities = torch.softmax(expected.double(), -1).numpy()
        unique = _unique(logits)
        actual = np.array(result["probabilities"])
        np.testing.assert_allclose(actual[unique], probabilities[unique], atol=1e-6, rtol=0, err_msg=str(settings))
        np.testing.assert_allclose(np.sort(actual), np.sort(probabilities), atol=1e-6, rtol=0, err_msg=str(settings))
        removed_counts.append(sum(expected_removed))
    # Not vacuous: some settings remove nothing, some nearly everything, most something in between.
    assert min(removed_counts) == 0 and max(removed_counts) == 199 and len(set(removed_counts)) > 10


def test_each_removal_is_attributed_to_its_processor(js) -> None:
    for (logits, settings), result in zip(_cases(), js["results"], strict=True):
        # Top-k alone (it keeps every score equal to the k-th: no order of equal values matters).
        by_top_k = torch.isinf(_transformers(logits, {**settings, "topP": 1.0})).tolist()
        for index, reason in enumerate(result["removedBy"]):
            assert reason in (0, 1, 2)
            assert (reason == 1) == by_top_k[index], f"{settings}: token {index}"
            assert (reason != 0) == result["removed"][index]


def test_the_charts_rows_are_the_top_ten_with_both_probabilities(js) -> None:
    for (logits, settings), result in zip(_cases(), js["results"], strict=True):
        chart = result["chart"]
        processed = _transformers(logits, settings)
        tempered = torch.softmax(torch.from_numpy(logits).double() / settings["temperature"], -1).numpy()
        final = torch.softmax(processed.double(), -1).numpy()
        assert [row["id"] for row in chart] == np.argsort(-logits, kind="stable")[:10].tolist()
        unique = _unique(logits)
        for row in chart:
            assert row["tempered"] == pytest.approx(tempered[row["id"]], abs=1e-6)
            if unique[row["id"]]:
                assert row["probability"] == pytest.approx(final[row["id"]], abs=1e-6)
                assert (row["removedBy"] != "") == bool(torch.isinf(processed[row["id"]]))
        assert result["argmax"] == int(np.argmax(logits))


def test_bad_settings_are_refused_by_name(js) -> None:
    temperature, negative_k, fractional_k, zero_p, large_p = js["errors"]
    assert "temperature" in temperature
    assert "top-k" in negative_k and "top-k" in fractional_k
    assert "top-p" in zero_p and "top-p" in large_p
