"""Small GGUF files written as llama.cpp writes them, for tests that need no download.

:func:`write_llama_gguf` writes a ``transformers`` Llama to a GGUF file with
``gguf-py`` (llama.cpp's own Python package), following llama.cpp's converter
(``convert_hf_to_gguf.py``, ``LlamaModel``): its tensor names from
``gguf.get_tensor_name_map``, the query and key rows permuted by its
``permute``, copied here, the weights quantized by ``gguf-py``'s quantizers,
and a byte-level BPE tokenizer in the metadata.  Nothing of the package
writes these files, so a test that reads them with the package and with
``transformers`` compares two independent readings of llama.cpp's format.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: A tiny byte-level vocabulary: GPT-2's 256 byte characters, a few merges, and two control tokens.
#: A tiny Llama's sizes (two layers, four query heads in two groups), which each test of a GGUF file extends.
TINY_LLAMA = dict(
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>")
MERGES = ("Ġ t", "h e", "Ġt he", "Ġ a", "i n", "Ġ c", "a t", "Ġc at", "o n", "Ġ o", "Ġo n")
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def byte_level_vocabulary() -> tuple[list[str], list[int]]:
    """The tokens (control tokens first, then the bytes, then each merge's result) and llama.cpp's token types."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    tokens = list(SPECIAL_TOKENS) + list(bytes_to_unicode().values())
    tokens += ["".join(merge.split(" ")) for merge in MERGES]
    types = [3] * len(SPECIAL_TOKENS) + [1] * (len(tokens) - len(SPECIAL_TOKENS))
    return tokens, types


def llama_cpp_permute(weights: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    """llama.cpp's ``LlamaModel.permute`` (convert_hf_to_gguf.py), as it is written there."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def write_llama_gguf(
    path: Path,
    hf_model,
    quantization: dict[str, str] | None = None,
    architecture: str = "llama",
    drop: tuple[str, ...] = (),
    extra=None,
) -> Path:
    """Write ``hf_model`` (a ``transformers.LlamaForCausalLM``) as llama.cpp's converter would, quantized.

    Args:
        path: The file to write.
        hf_model: The model; its vocabulary must be :func:`byte_level_vocabulary`'s size.
        quantization: The format of each kind of tensor, by the ending of its llama.cpp name (``"attn_q.weight"``);
            ``"token_embd.weight"`` defaults to Q8_0, the other matrices to Q4_1, the norms stay F32.
        architecture: ``general.architecture`` to write (another than ``"llama"`` for a refusal).
        drop: llama.cpp names of tensors to leave out.
        extra: A function of the ``GGUFWriter``, called after the metadata and before the tensors: what a test adds
            (a key set again replaces the first value; ``gguf-py`` writes each key once).
    """
    import gguf

    config = hf_model.config
    tokens, types = byte_level_vocabulary()
    assert config.vocab_size == len(tokens), "the model's vocabulary must be the file's"
    formats = {"token_embd.weight": "Q8_0", **(quantization or {})}
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny test llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    # transformers 5 keeps rope_theta in rope_parameters, 4.x on the config itself.
    rope = getattr(config, "rope_parameters", None) or {"rope_theta": config.rope_theta}
    writer.add_rope_freq_base(float(rope["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(list(MERGES))
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)
    writer.add_pad_token_id(1)
    writer.add_chat_template(CHAT_TEMPLATE)
    if extra is not None:
        extra(writer)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    for hf_name, tensor in hf_model.state_dict().items():
        if hf_name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None or name in drop:
            continue
        data = tensor.detach().float().numpy()
        if name.endswith("attn_q.weight"):
            data = llama_cpp_permute(data, config.num_attention_heads, config.num_attention_heads)
        elif name.endswith("attn_k.weight"):
            data = llama_cpp_permute(data, config.num_attention_heads, config.num_key_value_heads)
        kind = next((kind for ending, kind in formats.items() if name.endswith(ending)), None)
        kind = kind or ("F32" if data.ndim == 1 else "Q4_1")
        if kind == "F32":
            writer.add_tensor(name, data)
        else:
            quantized = gguf.quants.quantize(data, getattr(gguf.GGMLQuantizationType, kind))
            writer.add_tensor(name, quantized, raw_dtype=getattr(gguf.GGMLQuantizationType, kind))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
