"""The book's path: a transformer from scratch, as *Natural Language Processing with Transformers* builds it.

Scaled dot-product attention and one module per head
(:mod:`~literate_transformer.book.attention`), the feed-forward layer, the
embeddings, the encoder, a classification head, the decoder, greedy
generation and a training run, each with the book's readable names and each
proved equal to PyTorch's own modules.
"""
