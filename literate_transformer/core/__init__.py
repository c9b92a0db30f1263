"""The shared core: what every model of the package is built from.

Each concept here is written once and imported by the book's modules, the
BERT mirror and every other model: the configuration
(:mod:`~literate_transformer.core.config`), the activation registry
(:mod:`~literate_transformer.core.activations`), masks
(:mod:`~literate_transformer.core.masks`), the choice between the commented
attention code and PyTorch's fused kernel
(:mod:`~literate_transformer.core.kernels`), the residual sub-layer in both
layer-norm arrangements (:mod:`~literate_transformer.core.residual`), the
output types (:mod:`~literate_transformer.core.outputs`), input
validation (:mod:`~literate_transformer.core.validation`) and the families'
records (:mod:`~literate_transformer.core.records`).
"""
