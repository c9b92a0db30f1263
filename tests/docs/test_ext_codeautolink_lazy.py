"""Names in transformers resolve without running its TYPE_CHECKING block; every other module as before."""

from __future__ import annotations

from types import ModuleType, SimpleNamespace

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")
resolve = pytest.importorskip(
    "sphinx_codeautolink.extension.resolve",
    reason="sphinx-codeautolink is not installed (the docs extras); the extension is not tested",
)

import codeautolink_lazy  # noqa: E402


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("transformers", True),
        ("transformers.models.bert.modeling_bert", True),
        ("transformers_stream", False),  # a different package that shares the prefix
        ("torch.nn", False),
        ("", False),
    ],
)
def test_is_lazy_matches_the_package_and_its_submodules_only(name, expected):
    assert codeautolink_lazy.is_lazy(name, ["transformers"]) is expected


def test_the_wrapped_hook_skips_lazy_packages_and_passes_the_rest_through(monkeypatch):
    seen = []
    monkeypatch.setattr(resolve, "populate_type_checking", seen.append)
    app = SimpleNamespace(config=SimpleNamespace(codeautolink_lazy_packages=("transformers",)))

    codeautolink_lazy._wrap_resolver(app)
    codeautolink_lazy._wrap_resolver(app)  # a second build in the same process wraps once
    lazy, other = ModuleType("transformers.models"), ModuleType("torch.nn")
    resolve.populate_type_checking(lazy)
    resolve.populate_type_checking(other)

    assert seen == [other]


def test_a_missing_hook_leaves_the_resolver_unchanged_and_says_so(monkeypatch):
    messages = []
    monkeypatch.setattr(codeautolink_lazy.logger, "info", lambda message, *args: messages.append(message % args))
    monkeypatch.delattr(resolve, "populate_type_checking")
    before = dict(vars(resolve))
    app = SimpleNamespace(config=SimpleNamespace(codeautolink_lazy_packages=("transformers",)))
    codeautolink_lazy._wrap_resolver(app)
    # Nothing of the resolver module was added or replaced (a wrapper put back under any name would show) ...
    assert dict(vars(resolve)) == before
    # ... and the build log says why.
    assert messages == ["codeautolink_lazy: sphinx-codeautolink has no populate_type_checking; unchanged"]
