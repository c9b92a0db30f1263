r"""
Fine-tuning BERT for longer
===========================

Chapter 20 fine-tunes the site's BERT checkpoint to tell which part of
Python's documentation a sentence comes from
(:func:`literate_transformer.tasks.topic_classification`), and the site's
build affords the whole model a few dozen steps only.  This example runs the
same code, :func:`literate_transformer.fine_tuning.fine_tune`, for longer:
the head alone on the frozen sentence vectors, then the whole model from
that head (LP-FT), and, as a control, the whole model from a random head.
It draws each run's held-out accuracy against its steps, beside the
baseline the chapter measured first: a bag of words and scikit-learn's
logistic regression, on the same split.

The default settings are the ones the site's build runs, on one CPU
thread: four steps of the whole model, on about a tenth of the training
sentences and a fifth of the held-out ones (the baseline is fitted on the
same tenth), and no control run.  Their numbers say that the code runs,
not what fine-tuning gives.  ``LT_GALLERY_SCALE=gpu`` (or
``large``) runs the real experiment: every sentence, 300 steps of each run
(minutes on a GPU; more on a CPU).
"""

# %%
# Set-up
# ------
# The device is chosen once: CUDA when it is available, else the CPU.
import os

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression

import literate_transformer as lt
from literate_transformer.figures.fine_tuning import plot_fine_tuning
from literate_transformer.fine_tuning import SentenceClassifier, fine_tune
from literate_transformer.visualize import show

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cpu":
    # One CPU thread, as the site's build runs the examples: small models run no slower, and timings are steady.
    torch.set_num_threads(1)
large = os.environ.get("LT_GALLERY_SCALE", "cpu") in ("gpu", "large")

task = lt.tasks.topic_classification()
if large:
    train_size, held_out_size, steps, eval_every = len(task.train_sentences), len(task.held_out_sentences), 300, 25
else:
    train_size, held_out_size, steps, eval_every = 96, 48, 4, 2
# The task's parts are in a seeded random order: their first sentences are a random sample of each.
train_sentences, train_labels = task.train_sentences[:train_size], task.train_labels[:train_size]
held_out_sentences, held_out_labels = task.held_out_sentences[:held_out_size], task.held_out_labels[:held_out_size]
print(f"{len(train_sentences)} training sentences, {len(held_out_sentences)} held out, on {device}")

# %%
# The baseline
# ------------
# Word counts and a logistic regression, scikit-learn's defaults, fitted on the same training sentences.
counts = CountVectorizer()
bag_of_words = LogisticRegression(max_iter=1000).fit(counts.fit_transform(train_sentences), train_labels)
bag_predictions = bag_of_words.predict(counts.transform(held_out_sentences))
bag_accuracy = float((bag_predictions == np.array(held_out_labels)).mean())
print(f"bag of words: held-out accuracy {bag_accuracy:.3f}")

# %%
# The head alone, then the whole model
# ------------------------------------
# The frozen encoder's sentence vectors are computed once, on the CPU's fast
# path (chapter 16), each sentence cut at 64 tokens; the head trains on them.
# Then every weight trains, from that head.  Over hundreds of steps the
# learning rate is the largest of those BERT's authors tried for fine-tuning
# (Devlin et al., 2019, arXiv:1810.04805, appendix A.3: 5e-5, 3e-5 and
# 2e-5), with a tenth of the run as warmup; the chapter's short run takes
# larger steps.
tokenizer = lt.load_tokenizer()


def tokenized(sentences):
    """A padded batch of every sentence, cut at 64 tokens, on the device."""
    batch = tokenizer(sentences, padding=True, truncation=True, max_length=64, return_tensors="pt")
    return {name: value.to(device) for name, value in batch.items()}


def vectors_of(sentences):
    """The checkpoint's sentence vectors, on the device."""
    vectors = lt.encode(sentences, batch_size=64, truncate_at=64, show_progress_bar=False)
    return {"sentence_vectors": vectors.clone().to(device)}


def classifier_on_pretrained_bert():
    return SentenceClassifier(lt.BertModel.from_pretrained(attn_implementation="sdpa"), num_labels=4).to(device)


# %%
# The head alone trains first, on the frozen checkpoint's sentence vectors;
# then every weight trains from that head, on the tokens.
train_inputs, held_out_inputs = tokenized(train_sentences), tokenized(held_out_sentences)
settings = {"steps": steps, "learning_rate": 5e-5 if large else 1e-4, "warmup_steps": steps // 10 or 1}
settings |= {"group_by_length": True, "eval_every": eval_every, "held_out": (held_out_inputs, held_out_labels)}

classifier = classifier_on_pretrained_bert()
classifier.encoder.requires_grad_(False)
runs = {
    "the head alone": fine_tune(
        classifier, vectors_of(train_sentences), train_labels, steps=300 if large else 100, learning_rate=1e-2,
        eval_every=25, held_out=(vectors_of(held_out_sentences), held_out_labels),
    )
}  # fmt: skip
classifier.encoder.requires_grad_(True)
runs["then the whole model"] = fine_tune(classifier, train_inputs, train_labels, **settings)
if large:
    # The control: the whole model from a random head, the same settings.
    torch.manual_seed(0)
    runs["the whole model from a random head"] = fine_tune(
        classifier_on_pretrained_bert(), train_inputs, train_labels, **settings
    )

# %%
# One held-out sentence, and one standard error of an accuracy near the
# baseline's, in points of accuracy: two curves that end a few sentences
# apart are not apart.
sentence = 100 / len(held_out_labels)
error = 100 * (bag_accuracy * (1 - bag_accuracy) / len(held_out_labels)) ** 0.5
print(f"one held-out sentence: {sentence:.1f} points; one standard error: {error:.1f} points")
for name, history in runs.items():
    accuracy = np.array(history.held_out_accuracy)
    ahead = round((accuracy[-1] - bag_accuracy) * len(held_out_labels))
    print(
        f"{name}: {len(history.steps)} steps in {history.seconds:.0f} s; held-out accuracy {accuracy[-1]:.3f} at the "
        f"end ({ahead:+d} sentences against the bag of words), {accuracy.max():.3f} at best"
    )

# %%
# The curves
# ----------
# Each run's training loss at every step above its held-out accuracy, the
# bag of words' accuracy across.
plot_fine_tuning(
    runs,
    baselines={"bag of words": bag_accuracy},
    figure=plt.figure(figsize=(4.2 * len(runs) + 1.6, 5.6), layout="constrained"),
)
show()
