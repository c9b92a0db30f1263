"""The site's ONNX export: the graph the "Try your own sentence" page runs, against the PyTorch model.

The site's build exports the pretrained checkpoint into ``_build/try_it``
next to the HTML (``nox -s docs`` first; ``LT_SITE_HTML`` points at another
output folder).  These checks read that export:

* the shrunk graph (int8 codes plus int4 corrections) keeps every attention
  probability within ``ATTENTION_TOLERANCE`` (5e-3, the page's promise) and
  the last hidden state within ``HIDDEN_TOLERANCE`` (1e-2) of our
  :class:`~literate_transformer.BertModel`, on texts of the tokenizer corpus,
  sentence pairs and 512-token inputs among them;
* its inputs and outputs are those the page uses, every large matrix is
  shrunk, its JSON file describes it, and asking again is a cache hit.

And on a small BERT exported here with its float32 graph kept: the float32
graph computes :meth:`BertModel.forward` to ``FLOAT32_TOLERANCE`` (1e-4,
float32 rounding: the graph *is* the model), and an export whose JSON names
another digest is redone, byte for byte the same.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from lt_site.export import (
    BLOCK_SIZE,
    FORMAT,
    compare_with_pytorch,
    export_for_browser,
    load_browser_export,
)

import literate_transformer
from literate_transformer import BertModel, TransformerConfig, load_tokenizer, resolve_checkpoint

# One worker builds the module's exports and runs every test that reads them.
pytestmark = [pytest.mark.site, pytest.mark.xdist_group("export")]

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("LT_SITE_HTML", ROOT / "docs" / "_build" / "html"))
FLOAT32_TOLERANCE = 1e-4
ATTENTION_TOLERANCE = 5e-3
HIDDEN_TOLERANCE = 1e-2
CORPUS = ROOT / "tests" / "data" / "wordpiece_corpus.txt"


def _texts() -> list[str | tuple[str, str]]:
    """Every 10th corpus line, two pairs, and the corpus' over-long lines (cut to 512 tokens)."""
    lines = [line for line in CORPUS.read_text(encoding="utf-8").split("\n") if line]
    long_lines = [line for line in lines if len(line) > 2000]
    return [*lines[::10], (lines[0], lines[1]), (lines[28], lines[29]), *long_lines[:2]]


@pytest.fixture(scope="module")
def exported():
    """The site's export (made by the build: this reads it, it does not export)."""
    import onnx  # noqa: F401  (fail here, with the import error, when the export's dependencies are missing)

    folder = SITE.parent / "try_it"
    if not (folder / "model.json").is_file():
        pytest.fail(f"no export in {folder}: build the site first (python3 -m nox -s docs)", pytrace=False)
    metadata = load_browser_export(folder)

    class Exported:
        pass

    result = Exported()
    result.folder, result.onnx_path, result.metadata = folder, folder / "model.onnx", metadata
    result.digest = metadata["digest"]
    return result


@pytest.fixture(scope="module")
def model() -> BertModel:
    return BertModel.from_pretrained().eval()


@pytest.fixture(scope="module")
def small_export(tmp_path_factory):
    """A small random BERT with the checkpoint's tokenizer, exported with its float32 graph kept."""
    folder = tmp_path_factory.mktemp("small-bert")
    source = resolve_checkpoint().folder
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (source / name).is_file():
            shutil.copy(source / name, folder / name)
    torch.manual_seed(0)
    config = TransformerConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    from safetensors.torch import save_file

    small = BertModel(config).eval()
    save_file({key: value.contiguous() for key, value in small.state_dict().items()}, str(folder / "model.safetensors"))
    data = config.to_hf().to_dict()
    data["model_type"] = "bert"
    (folder / "config.json").write_text(json.dumps(data))
    # As in the build, where the exporter's process is forked from one that imported its libraries: the
    # tokenizer's library is loaded before the export begins.
    load_tokenizer(folder)
    started = time.perf_counter()
    result = export_for_browser(folder / "export", checkpoint=folder, keep_fp32=True, check_texts=["time flies"])
    print(f"\nsmall export took {time.perf_counter() - started:.1f} s")
    return folder, small, result


def test_the_exports_record_names_the_file_of_every_module_of_the_model(small_export) -> None:
    # An export is made again when the code it exported changes.  The exporter's trace runs with the call hook
    # paused (PyTorch and the exporter count by their versions); what the model's forward reaches is recorded.
    _, model, result = small_export
    reached = result.metadata["reached"]
    package = Path(literate_transformer.__file__).parent
    module_files = {
        Path(inspect.getfile(type(module))).resolve().relative_to(package.parent).as_posix()
        for module in model.modules()
        if Path(inspect.getfile(type(module))).resolve().is_relative_to(package)
    }
    assert "literate_transformer/models/bert.py" in module_files
    assert module_files <= set(reached["files"]), sorted(module_files - set(reached["files"]))
    assert {"torch", "onnx", "onnxscript", "onnx-ir"} <= set(reached["distributions"])
    # The tokenizer runs in Rust: no Python function of `tokenizers` is called, yet its version keys the export
    # (every installed distribution its process imported counts, those imported before the export began too).
    assert "tokenizers" in reached["distributions"]


def test_float32_graph_computes_bert_model_forward(small_export) -> None:
    folder, model, result = small_export
    tokenizer = load_tokenizer(folder)
    check = compare_with_pytorch(result.folder / "model.fp32.onnx", model, tokenizer, _texts())
    print(f"float32 graph: {check}")
    assert check.max_abs_attention <= FLOAT32_TOLERANCE
    assert check.max_abs_last_hidden_state <= FLOAT32_TOLERANCE


def test_shrunk_graph_stays_within_the_page_tolerance(exported, model, tokenizer) -> None:
    check = compare_with_pytorch(exported.onnx_path, model, tokenizer, _texts())
    print(f"shrunk graph: {check}")
    assert check.max_abs_attention <= ATTENTION_TOLERANCE
    assert check.max_abs_last_hidden_state <= HIDDEN_TOLERANCE
    # And it is not the float32 graph under another name: shrinking changes the numbers a little.
    assert check.max_abs_attention > FLOAT32_TOLERANCE
    # The page states the measured difference: the build measured it within the promise too.
    assert 0 < exported.metadata["check"]["max_abs_attention"] <= ATTENTION_TOLERANCE


def test_graph_has_the_inputs_and_outputs_the_page_uses(exported, model) -> None:
    import onnx

    graph = onnx.load(exported.onnx_path).graph
    config = model.config

    def dims(value) -> list:
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    assert [value.name for value in graph.input] == ["input_ids", "token_type_ids"]
    assert all(value.type.tensor_type.elem_type == onnx.TensorProto.INT64 for value in graph.input)
    inputs, outputs = {v.name: dims(v) for v in graph.input}, {v.name: dims(v) for v in graph.output}
    length = inputs["input_ids"][1]
    assert isinstance(length, str), "the sequence length must be dynamic"
    assert outputs["last_hidden_state"] == [1, length, config.hidden_size]
    assert outputs["attentions"] == [1, config.num_hidden_layers, config.num_attention_heads, length, length]
    # Any length from [CLS] [SEP] to the position table's size runs.
    import onnxruntime

    session = onnxruntime.InferenceSession(str(exported.onnx_path), providers=["CPUExecutionProvider"])
    for tokens in (2, config.max_position_embeddings):
        ids = np.full((1, tokens), 1000, dtype=np.int64)
        attentions = session.run(["attentions"], {"input_ids": ids, "token_type_ids": np.zeros_like(ids)})[0]
        assert attentions.shape == (1, config.num_hidden_layers, config.num_attention_heads, tokens, tokens)
        np.testing.assert_allclose(attentions.sum(-1), 1.0, atol=1e-5)


def test_every_large_matrix_is_stored_as_codes_and_corrections(exported) -> None:
    import onnx

    proto = onnx.load(exported.onnx_path)
    kinds = {init.name: init.data_type for init in proto.graph.initializer}
    shrunk = [name.removesuffix(".codes") for name in kinds if name.endswith(".codes")]
    assert len(shrunk) == exported.metadata["weights"]["shrunk_tensors"] > 0
    for name in shrunk:
        assert kinds[name + ".codes"] == onnx.TensorProto.INT8
        assert kinds[name + ".corrections"] == onnx.TensorProto.INT4
        assert kinds[name + ".scales"] == onnx.TensorProto.FLOAT16
    # No float32 matrix of 64k numbers or more is left.
    large_float = [
        init.name
        for init in proto.graph.initializer
        if init.data_type == onnx.TensorProto.FLOAT and np.prod(init.dims) >= 65536
    ]
    assert not large_float
    parameters = sum(parameter.numel() for parameter in BertModel.from_pretrained().parameters())
    assert exported.onnx_path.stat().st_size < 0.45 * 4 * parameters  # float32 would take 4 bytes a weight


def test_metadata_describes_the_export(exported, model, tokenizer) -> None:
    metadata = load_browser_export(exported.folder)
    assert metadata["format"] == FORMAT and metadata["digest"] == exported.digest
    assert metadata["model"]["bytes"] == exported.onnx_path.stat().st_size
    assert metadata["config"]["num_attention_heads"] == model.config.num_attention_heads
    assert metadata["tokenizer"]["vocab"][tokenizer.cls_token_id] == tokenizer.cls_token
    assert len(metadata["tokenizer"]["vocab"]) == model.config.vocab_size
    assert metadata["weights"]["block_size"] == BLOCK_SIZE
    check = metadata["check"]
    assert check["texts"] >= 1 and 0 < check["max_abs_attention"] <= ATTENTION_TOLERANCE


def test_a_second_export_is_a_cache_hit(exported, monkeypatch) -> None:
    # The same call the site's build makes: nothing is exported again, and no model is even built.
    import lt_site.export as export_module

    def refuse(*args, **kwargs):
        raise AssertionError("a cache hit must not build or export the model")

    monkeypatch.setattr(export_module, "export_onnx", refuse)
    monkeypatch.setattr(export_module.BertModel, "from_pretrained", refuse)
    modified = exported.onnx_path.stat().st_mtime_ns
    again = export_for_browser(exported.folder)
    assert again.cached and again.digest == exported.digest
    assert again.onnx_path.stat().st_mtime_ns == modified


def test_an_export_with_another_digest_is_redone(small_export, tmp_path) -> None:
    # A copy of a finished export whose JSON claims another digest: it must not be reused.
    checkpoint, _, exported = small_export
    for name in ("model.onnx", "model.json"):
        (tmp_path / name).write_bytes((exported.folder / name).read_bytes())
    metadata = json.loads((tmp_path / "model.json").read_text(encoding="utf-8"))
    metadata["digest"] = "0" * 64
    (tmp_path / "model.json").write_text(json.dumps(metadata), encoding="utf-8")
    redone = export_for_browser(tmp_path, checkpoint=checkpoint, keep_fp32=True, check_texts=["time flies"])
    assert not redone.cached
    assert load_browser_export(tmp_path)["digest"] == redone.digest != "0" * 64
    # Exporting is deterministic: the same code and weights give the same bytes.
    assert redone.metadata["model"]["sha256"] == exported.metadata["model"]["sha256"]
