"""Making attention fast: the same numbers with less work, and on more than one device.

The floor above the model families: each module here takes a model the
package has already proved equal to HuggingFace's, and computes the same
function faster or spread over processes.

* :mod:`~literate_transformer.fast.bert`: BERT with one fused projection for
  queries, keys and values, no work on padding, matrix multiplies that add
  their own bias, GELU and residual (oneDNN, on the CPU), and a compiled path;
* :mod:`~literate_transformer.fast.encode`: the checkpoint's sentence
  embeddings (sentence-transformers' ``encode``) on that fast path;
* :mod:`~literate_transformer.fast.flash`: FlashAttention's online softmax,
  keys in tiles, and what the memory of attention and of its cache costs;
* :mod:`~literate_transformer.fast.parallel`: multi-head attention and the
  feed-forward layer split across processes, as Megatron-LM splits them.
"""
