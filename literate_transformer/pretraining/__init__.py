"""How each branch is pretrained: the objectives, one module each.

An encoder learns by filling in masked tokens (masked language modelling),
a decoder by predicting the next token (causal language modelling: the loss
is :func:`~literate_transformer.parts.heads.causal_lm_loss`, and
:mod:`~literate_transformer.pretraining.causal_lm` trains one on a stream
of tokens), an
encoder-decoder by writing back a text that was corrupted (span corruption,
text infilling, sentence permutation).  Each module here writes one
objective's data preparation as a function, proved equal to
``transformers``' where it has one, and checked by rebuilding the original
text from what the function made.
:mod:`~literate_transformer.pretraining.training_step` takes one step of
every family's objective beside ``transformers``' and compares what each
learnt.
"""
