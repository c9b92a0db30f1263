r"""One record per family: what the package, its site and its tests know of a model family, in one file.

A family of :mod:`literate_transformer.models` is two files side by side:
``models/<family>.py``, its code (what it changes from the model it builds
on, and its registration), and ``models/<family>.ini``, its *record*: the
facts about the family that are not code.  Everything that lists the
families reads the records, and nothing keeps a list of its own:

* the registry (:func:`~literate_transformer.models.registry.from_hf`)
  finds which family converts a ``transformers`` class in the records'
  ``models``, so that converting a Llama imports Llama's file and the
  files it builds on, no other (a test checks that each file registers
  exactly the classes its record names);
* the lineage figure (:mod:`~literate_transformer.figures.lineage`) draws
  the records' papers;
* the reading order (:mod:`~literate_transformer.manifest`) places each
  family in its chapter;
* the site's proofs and running examples, the tests' shape scenarios, the
  lens's test of every family, the training step of every family and the
  static cache's tests build each family's small model from its record.

A record is an INI file (read by ``configparser``, in the standard
library of every Python the package supports), a section a topic, and its
comments say where a fact comes from:

===================  ========================================================================================
section              what it holds
===================  ========================================================================================
``[paper]``          the paper (or release) that introduced the model: name, branch, year and month of its
                     first public version, title, first author, arXiv identifier, the families it builds on
``[transformers]``   ``transformers``' module, the oldest release that has it, the config class and the
                     model classes the family registers
``[chapter]``        the chapter that builds it and its place there
``[example]``        its running example: the model in words, the class it runs, ``generate()``'s options,
                     the layer the lens test patches
``[sizes]``          the running example's config (the book example's sizes under the family's names), which
                     the site's proofs and the tests build
``[dims]``           the legend's letters whose size in that example is not the book example's
``[ids]``            the special token ids the proofs and tests give its configs
``[legend]``         how its config names the legend's sizes, where it does not use the standard names
``[training]``       its objective in the training step's proof, and what that proof builds
``[proof]``          the test that proves its badge, where it is not the branch's shared one
``[static_cache]``   for a family that decodes over a static cache: config fields its tests add
===================  ========================================================================================

Values of ``[sizes]``, ``[dims]``, ``[ids]``, ``[training]``, ``[static_cache]``
and ``[example] generate`` are Python literals (``24``, ``True``, ``"relu"``,
``[["global", "local"], 1]``); the others are text.

>>> llama = record("llama")
>>> llama.name, llama.branch, llama.models
('Llama', 'decoder', ('LlamaModel', 'LlamaForCausalLM'))
>>> llama.sizes["num_key_value_heads"], llama.dims
(2, {'K': 2, 'R': 6})
>>> config_sizes("distilbert", {"V": 50, "E": 24, "H": 4, "L": 2, "F": 40})
{'vocab_size': 50, 'dim': 24, 'n_heads': 4, 'n_layers': 2, 'hidden_dim': 40}
"""

from __future__ import annotations

import ast
import configparser
import functools
import importlib.metadata
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

__all__ = [
    "BRANCHES",
    "ROOT",
    "STANDARD_NAMES",
    "FamilyRecord",
    "parse_record",
    "records",
    "record",
    "config_sizes",
    "transformers_version",
]

#: The branches of the family tree (the root, the 2017 Transformer, is an encoder-decoder).
BRANCHES: tuple[str, ...] = ("encoder", "encoder-decoder", "decoder")
#: The key of the root every branch grows from, the 2017 Transformer, which the book builds (it has no family file).
ROOT = "transformer"
#: The names every ``transformers`` config answers to for the legend's vocabulary ``V``, width ``E``, heads ``H``
#: and layers ``L`` (a family whose config names them otherwise says so in its ``[legend]``).
STANDARD_NAMES: dict[str, str] = {
    "V": "vocab_size",
    "E": "hidden_size",
    "H": "num_attention_heads",
    "L": "num_hidden_layers",
}
#: The package holding the records, one ``<family>.ini`` beside each family's file.
_FOLDER = "literate_transformer.models"
#: The sections whose values are Python literals.
_LITERAL = ("sizes", "dims", "ids", "training", "static_cache")


@dataclass(frozen=True)
class FamilyRecord:
    """One family's record (``models/<key>.ini``), read.

    Attributes:
        key: The family's module under :mod:`literate_transformer.models` (``"llama"``); ``"transformer"`` for
            the root.
        name: The model's name as its paper writes it.
        branch: One of :data:`BRANCHES`.
        year: The year of the paper's (or release's) first public version.
        month: Its month (for an arXiv paper, the one its identifier carries).
        title: The paper's or the release's title.
        first_author: The first author's family name, or the team that signs it.
        others: What follows the first author in a short citation: ``"et al."``, ``"& Conneau"`` or ``""``.
        arxiv: The arXiv identifier, or ``None`` (a report, a software release).
        parents: The keys of the models it builds on (none for the root).
        later: The arXiv identifier of a later paper whose model the same file builds, or ``None``.
        hf_module: ``transformers``' module (``transformers.models.<hf_module>``), or ``None``.
        since: The oldest ``transformers`` release that has the family (``"4.51"``), or ``None`` where
            ``transformers`` has no such model.
        config: The config class the family reads: ``transformers``' (``"LlamaConfig"``), or the family file's own
            where ``transformers`` has none (GPT-3's).
        models: The ``transformers`` class names the family registers (its file's ``register(...)``).
        chapter: The chapter that builds it, or ``None`` (the root: the book's chapters build it).
        order: Its place among the families of its chapter (1 first).
        example: Its running example's model, in words (``"a small random Llama (...)"``).
        example_model: The class its running example runs (a name of the family's file).
        generate: ``generate()``'s options in its running example (``{}``: greedy).
        lens_layer: The name of the first layer's module, which the lens test patches.
        sizes: The running example's config fields.
        dims: The legend's sizes in that example that differ from the book example's.
        ids: The special token ids its proofs and tests give its configs.
        legend: How its config names the legend's sizes (:data:`STANDARD_NAMES` where it says nothing).
        training: Its training step: ``objective`` (``"causal"``, ``"masked"``, ``"replaced"``, ``"seq2seq"`` or
            ``"readout"``), and where they differ from its running example's, ``model``, ``options`` (the
            constructor's keyword arguments), ``config`` (more config fields), ``length`` (the sequences'),
            ``languages`` (XLM's language of each row).
        proof: Its proof's ``test`` (``path::function``), where it is not its branch's shared one.
        static_cache: For a family that decodes over a static cache, the config fields its tests add; else ``None``.
    """

    key: str
    name: str
    branch: str
    year: int
    month: int
    title: str
    first_author: str
    others: str = "et al."
    arxiv: str | None = None
    parents: tuple[str, ...] = ()
    later: str | None = None
    hf_module: str | None = None
    since: str | None = None
    config: str | None = None
    models: tuple[str, ...] = ()
    chapter: int | None = None
    order: int | None = None
    example: str | None = None
    example_model: str | None = None
    generate: Mapping[str, Any] = field(default_factory=dict)
    lens_layer: str | None = None
    sizes: Mapping[str, Any] = field(default_factory=dict)
    dims: Mapping[str, int] = field(default_factory=dict)
    ids: Mapping[str, int] = field(default_factory=dict)
    legend: Mapping[str, str] = field(default_factory=dict)
    training: Mapping[str, Any] = field(default_factory=dict)
    proof: Mapping[str, str] = field(default_factory=dict)
    static_cache: Mapping[str, Any] | None = None

    @property
    def later_year(self) -> int | None:
        """The year the later paper's arXiv identifier carries (``2111.09543``: 2021), or ``None``."""
        return None if self.later is None else 2000 + int(self.later[:2])

    @property
    def cite(self) -> str:
        """The short citation, the first author, the others, the year and a later paper's year
        (``"Devlin et al. 2018"``, ``"He et al. 2020, 2021"``)."""
        years = str(self.year) if self.later is None else f"{self.year}, {self.later_year}"
        return " ".join(part for part in (self.first_author, self.others, years) if part)

    @property
    def module(self) -> str | None:
        """The family's module, relative to the package (``"models.llama"``); ``None`` for the root."""
        return None if self.key == ROOT else f"models.{self.key}"

    def in_transformers(self, version: str | None = None) -> bool:
        """Whether ``transformers`` (this release, or ``version``) has the family's model.

        >>> record("qwen3").in_transformers("4.41.0"), record("qwen3").in_transformers("5.0.0")
        (False, True)
        """
        if self.since is None:
            return False
        version = transformers_version() if version is None else version
        return _release(version) >= _release(self.since)


def _release(version: str) -> tuple[int, ...]:
    """``"4.51.3"`` as ``(4, 51, 3)``; a suffix (``"5.0.0.dev0"``, ``"4.42.0rc1"``) ends the numbers."""
    return tuple(int(number) for number in re.match(r"\d+(?:\.\d+)*", version).group().split("."))


@functools.lru_cache(maxsize=1)
def transformers_version() -> str:
    """The installed ``transformers`` release (read from its metadata: ``transformers`` is not imported)."""
    return importlib.metadata.version("transformers")


def _literal(text: str, where: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError) as error:
        raise ValueError(f'{where} must be a Python literal (24, True, "relu", [...]), got {text!r}') from error


def parse_record(key: str, text: str) -> FamilyRecord:
    """A record from its file's text.

    Args:
        key: The family's key (the file's name without ``.ini``).
        text: The file's text.

    Returns:
        The :class:`FamilyRecord`.

    Raises:
        ValueError: for a file that is not INI, a missing section or field (naming the file and the field), a
            branch not in :data:`BRANCHES`, a year, month or chapter that is not a number, or a literal value
            that does not parse.
    """
    name = f"models/{key}.ini"
    parser = configparser.ConfigParser(interpolation=None, comment_prefixes=("#",), inline_comment_prefixes=None)
    parser.optionxform = str  # keep the case of config fields and legend letters
    try:
        parser.read_string(text, source=name)
    except configparser.Error as error:
        raise ValueError(f"{name} is not a record: {error}") from None

    def section(title: str) -> dict[str, str]:
        return dict(parser[title]) if parser.has_section(title) else {}

    paper = section("paper")
    for required in ("name", "branch", "year", "month", "title", "first_author"):
        if not paper.get(required):
            raise ValueError(f"{name} needs [paper] {required}")
    if paper["branch"] not in BRANCHES:
        raise ValueError(f"{name}: [paper] branch must be one of {BRANCHES}, got {paper['branch']!r}")
    numbers = {}
    for title, field_name in (("paper", "year"), ("paper", "month"), ("chapter", "number"), ("chapter", "order")):
        value = section(title).get(field_name)
        if value is not None and not value.isdigit():
            raise ValueError(f"{name}: [{title}] {field_name} must be a whole number, got {value!r}")
        numbers[field_name] = None if value is None else int(value)
    literal = {
        title: {option: _literal(value, f"{name} [{title}] {option}") for option, value in section(title).items()}
        for title in _LITERAL
    }
    hf, example = section("transformers"), section("example")
    generate = _literal(example["generate"], f"{name} [example] generate") if example.get("generate") else {}
    return FamilyRecord(
        key=key,
        name=paper["name"],
        branch=paper["branch"],
        year=numbers["year"],
        month=numbers["month"],
        title=paper["title"],
        first_author=paper["first_author"],
        others=paper.get("others", "et al."),
        arxiv=paper.get("arxiv") or None,
        parents=tuple(paper.get("parents", "").split()),
        later=paper.get("later") or None,
        hf_module=hf.get("module") or None,
        since=hf.get("since") or None,
        config=hf.get("config") or None,
        models=tuple(hf.get("models", "").split()),
        chapter=numbers["number"],
        order=numbers["order"],
        example=example.get("text") or None,
        example_model=example.get("model") or None,
        generate=generate,
        lens_layer=example.get("lens_layer") or None,
        sizes=literal["sizes"],
        dims=literal["dims"],
        ids=literal["ids"],
        legend=section("legend"),
        training=literal["training"],
        proof=section("proof"),
        static_cache=literal["static_cache"] if parser.has_section("static_cache") else None,
    )


@functools.lru_cache(maxsize=1)
def records() -> dict[str, FamilyRecord]:
    """Every record of the package (the families' and the root's), in order of publication (then by key).

    Read from the ``.ini`` files of :mod:`literate_transformer.models` (nothing imported but that package's
    ``__init__``, which imports no family).
    """
    folder = resources.files(_FOLDER)
    found = [
        parse_record(path.name.removesuffix(".ini"), path.read_text(encoding="utf-8"))
        for path in folder.iterdir()
        if path.name.endswith(".ini")
    ]
    return {found.key: found for found in sorted(found, key=lambda r: (r.year, r.month, r.key))}


def record(key: str) -> FamilyRecord:
    """The record of family ``key`` (``"llama"``).

    Raises:
        KeyError: for a family the package does not build, naming the ones it does.
    """
    found = records()
    if key not in found:
        raise KeyError(f"no record {key!r} (models/{key}.ini); the records: {', '.join(sorted(found))}")
    return found[key]


def config_sizes(family: str | None, dims: Mapping[str, int], **more: Any) -> dict[str, Any]:
    """The sizes ``dims`` gives the legend's letters, under the names of ``family``'s config, and ``more``.

    ``family=None`` gives the standard names (:data:`STANDARD_NAMES`), which every ``transformers`` config
    answers to; a family whose config names them otherwise (DistilBERT's ``dim``) says so in its ``[legend]``.
    """
    names = STANDARD_NAMES if family is None else (record(family).legend or STANDARD_NAMES)
    return {name: dims[letter] for letter, name in names.items()} | more
