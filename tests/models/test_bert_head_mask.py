"""head_mask: the package's BertModel honours it as transformers 4 did; transformers 5 takes none and ignores one.

Chapter 4 measures the second on the pretrained checkpoint; the compat leg (transformers 4.41) runs the first.
"""

from __future__ import annotations

import inspect

import pytest
import torch
import transformers
from shapes import BERT

from literate_transformer.models.bert import BertModel

TRANSFORMERS_MAJOR = int(transformers.__version__.split(".")[0])


@pytest.fixture(scope="module")
def models():
    config = transformers.BertConfig(
        **BERT("4_heads_of_4"), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="eager"
    )
    torch.manual_seed(0)
    hf = transformers.BertModel(config).eval()
    return hf, BertModel.from_hf(hf).eval()


def _head_mask() -> torch.Tensor:
    head_mask = torch.ones(2, 4)  # (L, H)
    head_mask[0, 1] = 0.0  # head 1 of layer 0 off
    head_mask[1, 3] = 0.5  # head 3 of layer 1 halved
    return head_mask


IDS = torch.tensor([[2, 7, 11, 3, 9, 4]])


@torch.no_grad()
@pytest.mark.skipif(TRANSFORMERS_MAJOR >= 5, reason="transformers 5 removed head_mask from BertModel.forward")
def test_the_head_mask_does_what_it_did_in_transformers_4(models):
    hf, ours = models
    theirs = hf(input_ids=IDS, head_mask=_head_mask()).last_hidden_state
    torch.testing.assert_close(ours(IDS, head_mask=_head_mask()).last_hidden_state, theirs, atol=1e-5, rtol=0)
    assert (theirs - hf(input_ids=IDS).last_hidden_state).abs().max() > 1e-3


@torch.no_grad()
@pytest.mark.skipif(TRANSFORMERS_MAJOR < 5, reason="transformers 4 still takes head_mask")
def test_transformers_5_takes_no_head_mask_and_ignores_one_while_the_package_honours_it(models):
    hf, ours = models
    assert "head_mask" not in inspect.signature(type(hf).forward).parameters
    all_off = torch.zeros(2, 4)
    assert torch.equal(hf(input_ids=IDS, head_mask=all_off).last_hidden_state, hf(input_ids=IDS).last_hidden_state)
    assert (ours(IDS, head_mask=_head_mask()).last_hidden_state - ours(IDS).last_hidden_state).abs().max() > 1e-3
