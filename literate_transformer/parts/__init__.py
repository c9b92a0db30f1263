"""The parts: what the book's modules and every model family assemble.

Each part is a concept written once, above the ground floor
(:mod:`~literate_transformer.core`) and below everything built from it: the
norms and their factory (:mod:`~literate_transformer.parts.norms`), the
positional schemes (:mod:`~literate_transformer.parts.positions`), the
feed-forward variants (:mod:`~literate_transformer.parts.feed_forward`), and
the heads that split a projection into attention heads and turn the last
hidden state into next-token scores
(:mod:`~literate_transformer.parts.heads`).  A family's file in
:mod:`literate_transformer.models` imports the parts it needs and writes
only what it changes, as labml keeps its variants as sibling modules: a
variant is a part you import, not a flag inside someone else's class.
"""
