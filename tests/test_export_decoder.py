"""The decoder's browser export: the graph is the package's Llama, step by step with its cache, on the file's blocks.

A tiny Llama is written to a GGUF file by llama.cpp's own Python package
(``tests/gguf_files.py``), its matrices in Q4_1, Q4_0 and Q8_0 blocks and its
token table in Q8_0, and read back with :func:`literate_transformer.load_decoder`.
The exported graph, run in ``onnxruntime`` with the session option the page
uses, must give that model's logits, cache and attention probabilities at
every step (within float32 rounding: the weights are the same numbers, the
sums run in another order) and its greedy ids exactly; blocks of another
model are refused; the cached export is found again without work.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from gguf_files import TINY_LLAMA, byte_level_vocabulary, write_llama_gguf
from lt_site import export_decoder as ed

from literate_transformer import load_decoder
from literate_transformer.core.gguf import read_gguf
from literate_transformer.models.llama import LlamaForCausalLM

pytest.importorskip("onnxruntime", reason="onnxruntime (the docs extras) runs the exported graph")

TINY = dict(TINY_LLAMA, rope_theta=500.0)
BLOCKS_JS = Path(__file__).resolve().parents[1] / "docs" / "_static" / "try" / "blocks.js"
# The page's blocks.js on an export's blocks file: decoder.weights written, the names in the order they were made.
_BLOCKS_RUNNER = r"""
const fs = require("fs");
const path = require("path");
const Blocks = require(process.argv[2]);
const folder = process.argv[3];
const weights = JSON.parse(fs.readFileSync(path.join(folder, "weights.json"), "utf8"));
const raw = fs.readFileSync(path.join(folder, "decoder.blocks"));
const blocks = new Uint8Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
const names = [];
const file = Blocks.weightsFile(weights, blocks, (done, all, name) => names.push(name));
fs.writeFileSync(path.join(folder, "decoder.weights"), file);
// An entry whose scales lie past the end of the blocks is refused, by name.
const bad = { ...weights.table[1], scales: [blocks.byteLength - 2, weights.table[1].scales[1]] };
let refused = null;
try {
  Blocks.dequantize(bad, blocks, new Float32Array(bad.shape[0] * bad.shape[1]));
} catch (error) {
  refused = error.message;
}
process.stdout.write(JSON.stringify({ names, refused }));
"""
#: Every block format the export reads, on one model.
FORMATS = {"attn_v.weight": "Q4_0", "ffn_down.weight": "Q8_0", "attn_output.weight": "F16"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, randomize):
    pytest.importorskip("gguf", reason="gguf-py (llama.cpp's package) writes the tiny file")
    tokens, _ = byte_level_vocabulary()
    # The package's own Llama has HuggingFace's names: llama.cpp's converter writes it as it writes theirs.
    reference = randomize(LlamaForCausalLM(transformers.LlamaConfig(vocab_size=len(tokens), **TINY)))
    folder = tmp_path_factory.mktemp("decoder_export")
    path = write_llama_gguf(folder / "tiny.gguf", reference, FORMATS)
    tokenizer, model = load_decoder(path)
    gguf = read_gguf(path)
    blocks = ed.decoder_blocks(gguf, model.config)
    graph = ed.export_decoder_graph(model, blocks)
    return {
        "path": path,
        "model": model,
        "tokenizer": tokenizer,
        "blocks": blocks,
        "graph": graph,
        "bytes": graph.proto.SerializeToString(),
        "weights": ed.weights_from_blocks(graph.table, graph.blocks),
    }


def test_the_graph_names_its_matrices_and_the_blocks_file_keeps_the_files_blocks(tiny) -> None:
    import onnx

    graph, table = onnx.load_model_from_string(tiny["bytes"]).graph, tiny["graph"].table
    kinds = {entry["name"]: entry["kind"] for entry in table}
    assert kinds["model.layers.0.self_attn.q_proj.weight"] == "Q4_1"
    assert kinds["model.layers.0.self_attn.v_proj.weight"] == "Q4_0"
    assert kinds["model.layers.0.mlp.down_proj.weight"] == "Q8_0"
    assert kinds["model.layers.0.self_attn.o_proj.weight"] == "F16"
    assert kinds["model.embed_tokens.weight"] == "Q8_0"
    # Every matrix of the graph is float32 whose numbers lie in the file the page makes, where the table says.
    external = {tensor.name: tensor for tensor in graph.initializer if tensor.external_data}
    assert set(external) == set(kinds)
    for entry in table:
        tensor = external[entry["name"]]
        where = {item.key: item.value for item in tensor.external_data}
        assert tensor.data_type == onnx.TensorProto.FLOAT and list(tensor.dims) == entry["shape"]
        assert where == {"location": ed.WEIGHTS_FILE, "offset": str(entry["weights"][0]),
                         "length": str(entry["weights"][1])}  # fmt: skip
    assert tiny["graph"].weights_bytes == sum(entry["weights"][1] for entry in table)
    # The graph holds no matrix, the blocks file is about the GGUF file's size: no float32 copy is downloaded.
    assert len(tiny["bytes"]) < 0.2 * tiny["path"].stat().st_size
    assert len(tiny["graph"].blocks) < 1.2 * tiny["path"].stat().st_size
    assert {blocks.kind for blocks in tiny["blocks"].values()} == {"Q4_1", "Q4_0", "Q8_0", "F16", "F32"}


def test_the_blocks_file_gives_the_models_weights_exactly(tiny) -> None:
    parameters = dict(tiny["model"].named_parameters())
    for entry in tiny["graph"].table:
        name = entry["name"]
        weights = torch.from_numpy(tiny["weights"][name])
        # Matrices are stored as W^T (inputs first, for MatMul); the token table as it is.
        expected = parameters[name].detach() if name == "model.embed_tokens.weight" else parameters[name].detach().T
        # Bit for bit: the same float32 numbers, signs of zero included.
        assert weights.dtype == torch.float32 and torch.equal(weights.view(torch.int32), expected.view(torch.int32))


def test_the_pages_blocks_js_makes_the_same_float32_numbers(tiny, tmp_path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node (Node.js) is needed to run the page's blocks.js: apt-get install -y nodejs")
    graph = tiny["graph"]
    (tmp_path / "decoder.blocks").write_bytes(graph.blocks)
    weights = {"file": ed.WEIGHTS_FILE, "bytes": graph.weights_bytes, "table": list(graph.table)}
    (tmp_path / "weights.json").write_text(json.dumps(weights))
    (tmp_path / "runner.js").write_text(_BLOCKS_RUNNER)
    completed = subprocess.run(
        [node, str(tmp_path / "runner.js"), str(BLOCKS_JS), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, f"node failed:\n{completed.stderr}"
    made = np.fromfile(tmp_path / "decoder.weights", dtype=np.int32)
    assert made.size * 4 == graph.weights_bytes
    answer = json.loads(completed.stdout)
    assert answer["names"] == [entry["name"] for entry in graph.table]
    assert answer["refused"].startswith(f"{graph.table[1]['name']}'s scales"), answer["refused"]
    for entry in graph.table:
        offset, length = entry["weights"]
        expected = tiny["weights"][entry["name"]].reshape(-1).view(np.int32)
        np.testing.assert_array_equal(made[offset // 4 : (offset + length) // 4], expected, err_msg=entry["name"])


def test_a_table_entry_outside_the_blocks_file_is_refused_by_name(tiny) -> None:
    entry = dict(tiny["graph"].table[1])
    entry["scales"] = [len(tiny["graph"].blocks) - 2, entry["scales"][1]]
    with pytest.raises(ValueError, match=f"{entry['name']}'s scales"):
        ed.weights_from_blocks([entry], tiny["graph"].blocks)


@torch.no_grad()
def test_every_step_gives_the_models_logits_cache_and_attention(tiny) -> None:
    model, config = tiny["model"], tiny["model"].config
    session = ed._session(tiny["bytes"], tiny["weights"])
    names = [output.name for output in session.get_outputs()]
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, config.vocab_size, (1, 7), generator=generator)
    empty = np.zeros((1, config.num_key_value_heads, 0, config.hidden_size // config.num_attention_heads), np.float32)
    cache = {f"past_{kind}.{i}": empty for i in range(config.num_hidden_layers) for kind in ("key", "value")}
    ids, past, seen = prompt, None, prompt
    for _step in range(4):
        outputs = dict(zip(names, session.run(None, {"input_ids": ids.numpy(), **cache}), strict=True))
        expected = model(ids, past_key_values=past, use_cache=True, output_attentions=True)
        torch.testing.assert_close(torch.from_numpy(outputs["logits"]), expected.logits[:, -1], atol=1e-5, rtol=0)
        for i, layer_cache in enumerate(expected.past_key_values):
            key, value = layer_cache.self_attention
            torch.testing.assert_close(torch.from_numpy(outputs[f"present_key.{i}"]), key, atol=1e-5, rtol=0)
            torch.testing.assert_close(torch.from_numpy(outputs[f"present_value.{i}"]), value, atol=1e-5, rtol=0)
            attention = torch.from_numpy(outputs[f"attention.{i}"])
            torch.testing.assert_close(attention, expected.attentions[i], atol=1e-6, rtol=0)
            # Causal: nothing after a token's own position.
            assert attention.shape == (1, config.num_attention_heads, ids.shape[1], seen.shape[1])
        cache = {
            f"past_{kind}.{i}": outputs[f"present_{kind}.{i}"]
            for i in range(config.num_hidden_layers)
            for kind in ("key", "value")
        }
        ids, past = expected.logits[:, -1:].argmax(-1), expected.past_key_values
        seen = torch.cat([seen, ids], dim=1)


def test_greedy_ids_equal_the_models_generate(tiny) -> None:
    model = tiny["model"]
    prompts = [tiny["tokenizer"]("the cat on the mat")["input_ids"]]
    check = ed.compare_with_pytorch(tiny["bytes"], tiny["weights"], model, prompts, max_new_tokens=10)
    assert check.greedy_ids_equal and check.new_tokens == (10,)
    assert check.max_abs_probability < 1e-5 and check.max_abs_attention < 1e-5
    with pytest.raises(ValueError, match="prompts"):
        ed.compare_with_pytorch(tiny["bytes"], tiny["weights"], model, [[]])


def test_blocks_of_another_model_are_refused(tiny) -> None:
    blocks = dict(tiny["blocks"])
    name = "model.layers.1.mlp.up_proj.weight"
    original = blocks[name]
    changed = original.raw.copy()
    changed[6] ^= 0x11  # two levels of the first Q4_1 block
    blocks[name] = ed.Blocks(original.kind, original.shape, changed)
    with pytest.raises(ValueError, match="up_proj.weight.*not this model's"):
        ed.export_decoder_graph(tiny["model"], blocks)
    blocks.pop(name)
    with pytest.raises(ValueError, match="no entry"):
        ed.export_decoder_graph(tiny["model"], blocks)


def test_bad_models_are_refused_by_name(tiny) -> None:
    with pytest.raises(TypeError, match="LlamaForCausalLM"):
        ed.export_decoder_graph(torch.nn.Linear(2, 2), tiny["blocks"])
    tiny["model"].train()
    try:
        with pytest.raises(ValueError, match="evaluation mode"):
            ed.export_decoder_graph(tiny["model"], tiny["blocks"])
    finally:
        tiny["model"].eval()


def test_the_export_is_cached_by_its_digest(tiny, tmp_path) -> None:
    folder = tmp_path / "export"
    first = ed.export_decoder_for_browser(folder, gguf=tiny["path"], check_prompts=["the cat"], check_new_tokens=2)
    assert not first.cached and first.metadata["check"]["greedy_ids_equal"]
    metadata = ed.load_decoder_export(folder)
    assert metadata["digest"] == first.digest and metadata["model"]["bytes"] == first.onnx_path.stat().st_size
    assert metadata["blocks"]["bytes"] == first.blocks_path.stat().st_size
    assert metadata["weights"]["table"] == list(tiny["graph"].table)
    assert metadata["tokenizer"]["special"] == ["<|im_start|>", "<|im_end|>"]
    assert metadata["chat"]["after"] == "<|im_end|>\n<|im_start|>assistant\n"
    written = first.onnx_path.stat().st_mtime_ns
    again = ed.export_decoder_for_browser(folder, gguf=tiny["path"], check_prompts=["the cat"], check_new_tokens=2)
    assert again.cached and again.digest == first.digest and first.onnx_path.stat().st_mtime_ns == written
    # Without its blocks file, the export is made again.
    first.blocks_path.unlink()
    remade = ed.export_decoder_for_browser(folder, gguf=tiny["path"], check_prompts=["the cat"], check_new_tokens=2)
    assert not remade.cached and remade.blocks_path.is_file()
    # Other settings, another digest: exported again.
    other = ed.export_decoder_for_browser(folder, gguf=tiny["path"], check_prompts=["a cat"], check_new_tokens=2)
    assert not other.cached and other.digest != first.digest
    # A file that is not an export of this format is named as such.
    (folder / ed.METADATA_FILE).write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a literate-transformer-decoder-export"):
        ed.load_decoder_export(folder)


def test_bad_arguments_are_refused_by_name(tmp_path) -> None:
    with pytest.raises(TypeError, match="folder"):
        ed.export_decoder_for_browser(3)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="directory"):
        ed.export_decoder_for_browser(tmp_path / "file")
    with pytest.raises(ValueError, match="check_prompts"):
        ed.export_decoder_for_browser(tmp_path / "a", check_prompts=[])
    with pytest.raises(ValueError, match="check_new_tokens"):
        ed.export_decoder_for_browser(tmp_path / "a", check_new_tokens=0)
    with pytest.raises(TypeError, match="check_new_tokens"):
        ed.export_decoder_for_browser(tmp_path / "a", check_new_tokens=2.0)
    with pytest.raises(FileNotFoundError, match="no decoder export"):
        ed.load_decoder_export(tmp_path)
