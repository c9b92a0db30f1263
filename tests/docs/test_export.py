"""The ONNX export's parts: shrinking weights, the cache key, the tokenizer's spec, bad arguments.

These run in seconds and need no export.  The export itself (our BertModel
as a graph, run in onnxruntime against PyTorch: float32 to 1e-4, the shrunk
weights' attention probabilities to 5e-3) is checked by
``tests/docs/test_site_export.py`` on the export the site's build made, and
on a small model exported there.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

# The export belongs to the site (its "Try your own sentence" page): its libraries come with the docs extras.
onnx = pytest.importorskip("onnx", reason="onnx is not installed (the docs extras); the export is not tested")
onnxruntime = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (the docs extras)")

from lt_site.export import (  # noqa: E402
    BLOCK_SIZE,
    compare_with_pytorch,
    dequantize_int8_int4,
    export_digest,
    export_for_browser,
    export_onnx,
    load_browser_export,
    quantize_int8_int4,
    shrink_weights,
    tokenizer_spec,
)

from literate_transformer import BertModel, TransformerConfig  # noqa: E402


@pytest.fixture(scope="module")
def model() -> BertModel:
    """A small BERT (the bad-argument checks never reach its weights)."""
    config = TransformerConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2)
    return BertModel(config).eval()


# ---------------------------------------------------------------------------
# The cache key
# ---------------------------------------------------------------------------


def test_the_digest_changes_with_anything_the_export_depends_on() -> None:
    base = export_digest("sha", '{"vocab": []}', {"block_size": 16})
    assert base == export_digest("sha", '{"vocab": []}', {"block_size": 16})
    assert base != export_digest("other sha", '{"vocab": []}', {"block_size": 16})
    assert base != export_digest("sha", '{"vocab": ["a"]}', {"block_size": 16})
    assert base != export_digest("sha", '{"vocab": []}', {"block_size": 32})


# ---------------------------------------------------------------------------
# Shrinking, on its own
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [1e-4, 0.05, 3.0])
def test_codes_and_corrections_are_within_s_over_28(scale) -> None:
    weight = np.random.default_rng(0).normal(0.0, scale, size=(8, 64)).astype(np.float32)
    weight[0, :BLOCK_SIZE] = 0.0  # an all-zero block
    codes, corrections, scales = quantize_int8_int4(weight)
    assert codes.min() >= -127 and codes.max() <= 127
    assert corrections.min() >= -7 and corrections.max() <= 7
    restored = dequantize_int8_int4(codes, corrections, scales)
    bound = np.repeat(scales.astype(np.float32), BLOCK_SIZE, axis=1) / 28
    assert np.all(np.abs(restored - weight) <= bound * (1 + 1e-5))
    assert np.all(restored[0, :BLOCK_SIZE] == 0.0)


def test_shrunk_graph_rebuilds_the_matrix_as_dequantize_int8_int4_does() -> None:
    from onnx import TensorProto, helper, numpy_helper

    weight = np.random.default_rng(1).normal(0.0, 0.1, size=(32, 256)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "weight"], ["y"])],
        "matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256])],
        [numpy_helper.from_array(weight, "weight")],
    )
    # IR version 10, which onnxruntime reads (the exporter writes one it reads too).
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    shrunk = shrink_weights(proto, min_elements=1)
    session = onnxruntime.InferenceSession(shrunk.SerializeToString(), providers=["CPUExecutionProvider"])
    # Multiplying by the identity reads the rebuilt matrix back, row by row.
    rows = [session.run(["y"], {"x": np.eye(32, dtype=np.float32)[row : row + 1]})[0][0] for row in range(32)]
    expected = dequantize_int8_int4(*quantize_int8_int4(weight))
    np.testing.assert_allclose(np.stack(rows), expected, rtol=0, atol=1e-7)
    assert not np.array_equal(np.stack(rows), weight)


# ---------------------------------------------------------------------------
# Bad arguments
# ---------------------------------------------------------------------------
def test_export_for_browser_refuses_bad_arguments(tmp_path) -> None:
    with pytest.raises(TypeError, match="folder"):
        export_for_browser(123)
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    with pytest.raises(ValueError, match="folder"):
        export_for_browser(a_file)
    with pytest.raises(TypeError, match="block_size"):
        export_for_browser(tmp_path, block_size="16")
    with pytest.raises(ValueError, match="block_size"):
        export_for_browser(tmp_path, block_size=3)
    with pytest.raises(ValueError, match="check_texts"):
        export_for_browser(tmp_path, check_texts=[])
    with pytest.raises(ValueError, match="check_texts"):
        export_for_browser(tmp_path, check_texts="one string")


def test_export_onnx_refuses_bad_arguments(tmp_path, model) -> None:
    with pytest.raises(TypeError, match="bert"):
        export_onnx(torch.nn.Linear(2, 2), tmp_path / "x.onnx")
    with pytest.raises(TypeError, match="path"):
        export_onnx(model, 42)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        export_onnx(model, tmp_path / "missing" / "x.onnx")
    with pytest.raises(ValueError, match="opset_version"):
        export_onnx(model, tmp_path / "x.onnx", opset_version=17)
    with pytest.raises(ValueError, match="evaluation mode"):
        export_onnx(BertModel(model.config).train(), tmp_path / "x.onnx")


def test_the_other_functions_refuse_bad_arguments(tmp_path, model, tokenizer) -> None:
    with pytest.raises(TypeError, match="model_proto"):
        shrink_weights(b"not a model")
    with pytest.raises(ValueError, match="min_elements"):
        shrink_weights(onnx.ModelProto(), min_elements=0)
    with pytest.raises(TypeError, match="weight"):
        quantize_int8_int4(np.ones((2, 16), dtype=np.int32))
    with pytest.raises(ValueError, match="weight"):
        quantize_int8_int4(np.ones((2, 10), dtype=np.float32))
    with pytest.raises(ValueError, match="weight"):
        quantize_int8_int4(np.ones(32, dtype=np.float32))
    with pytest.raises(FileNotFoundError, match="export_for_browser"):
        load_browser_export(tmp_path)
    with pytest.raises(TypeError, match="folder"):
        load_browser_export(None)
    with pytest.raises(TypeError, match="tokenizer"):
        tokenizer_spec(object())
    with pytest.raises(ValueError, match="texts"):
        compare_with_pytorch(b"", model, tokenizer, [])


def test_tokenizer_spec_is_json_and_complete(tokenizer) -> None:
    spec = json.loads(json.dumps(tokenizer_spec(tokenizer)))
    assert spec["vocab"][tokenizer.unk_token_id] == spec["unk_token"] == tokenizer.unk_token
    assert spec["model_max_length"] == tokenizer.model_max_length
    assert set(spec["special_tokens"]) == set(tokenizer.all_special_tokens)
    # Longest first, so that a longer special token wins where two start at the same place.
    lengths = [len(token) for token in spec["special_tokens"]]
    assert lengths == sorted(lengths, reverse=True)
