"""The training step of every family on the site: a badge each, measured as the tests measure it.

The measurement and the cases are the package's
(:mod:`literate_transformer.pretraining.training_step`: every family's case
read from its record, one padded batch of its objective, the loss, every
gradient and one AdamW step compared with ``transformers``'); this module
builds each case's two models and makes a badge of the worst gradient.
"""

from __future__ import annotations

import torch
import transformers
from torch import nn

from literate_transformer.models.registry import from_hf
from literate_transformer.pretraining.training_step import (
    RTOL,
    StepDifference,
    TrainingCase,
    case_batch,
    randomized,
    readout_matrix,
    training_cases,
    training_step_difference,
)

from .base import Proof

__all__ = ["CASES", "TEST", "case_models", "run_case", "PROOFS"]

#: Every family's case (:func:`~literate_transformer.pretraining.training_step.training_cases`).
CASES: tuple[TrainingCase, ...] = training_cases()
#: The test that proves every case (the badges point to it).
TEST = "tests/models/test_training_step.py::test_one_training_step_equals_transformers"


def case_models(case: TrainingCase) -> tuple[nn.Module, nn.Module]:
    """The case's ``transformers`` model (eager attention, every parameter random) and the package's, both in
    evaluation mode."""
    config = getattr(transformers, case.config_class)(**case.sizes, **case.config, attn_implementation="eager")
    torch.manual_seed(0)
    hf = randomized(getattr(transformers, case.model_class)(config, **case.model_options))
    return hf, from_hf(hf).eval()


def run_case(case: TrainingCase) -> StepDifference:
    """:func:`~literate_transformer.pretraining.training_step.training_step_difference` on the case's models and
    batch."""
    hf, ours = case_models(case)
    readout = readout_matrix(hf.config) if case.objective == "readout" else None
    return training_step_difference(hf, ours, case_batch(case, hf.config), readout)


def _proof(case: TrainingCase) -> Proof:
    return Proof(
        f"models.{case.family}.{case.model_class}",
        f"gradients against transformers {case.model_class} (worst relative)",
        TEST,
        lambda: max(run_case(case).gradients.values()),
        tolerance=RTOL,
        example=case.family,
    )


#: A badge per family: the worst relative difference of a parameter's gradient (the test checks the loss and the
#: step as well; a family whose class this release of ``transformers`` lacks has nothing to be proved against).
PROOFS: tuple[Proof, ...] = tuple(_proof(case) for case in CASES if hasattr(transformers, case.config_class))
