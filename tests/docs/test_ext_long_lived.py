"""What lives as long as a build's process is frozen out of the cycle collector's walks; rings are still freed."""

from __future__ import annotations

import gc
import weakref

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")
import long_lived  # noqa: E402


class Node:
    """An object that can refer to itself: a ring only the cycle collector frees."""


def _rings() -> tuple[weakref.ref, Node]:
    """A ring nothing refers to (a weak reference to it), and a ring that is still referred to."""
    garbage = Node()
    garbage.self = garbage
    gone = weakref.ref(garbage)
    del garbage
    alive = Node()
    alive.self = alive
    return gone, alive


def _survivors_frozen_here() -> bool:
    return long_lived._freeze_after_a_full_pass in gc.callbacks


@pytest.fixture(autouse=True)
def _leave_the_collector_as_it_was():
    """A build with the extension (or the gallery's reset) freezes survivors in this process: not after the test."""
    yield
    while _survivors_frozen_here():
        gc.callbacks.remove(long_lived._freeze_after_a_full_pass)


def test_a_build_freezes_what_it_holds_only_with_the_extension(tiny_site):
    tiny_site.write("docs/index.rst", "Title\n=====\n\nText.\n")
    # A frozen object that dies is still freed, so the count can fall; only a freeze makes it rise.  Each app is
    # kept while counting: what the build froze (its environment among it) is still alive.  The collector is off
    # meanwhile: no pass of its own (nor what a callback does after one) moves the count.
    gc.disable()
    try:
        tiny_site.conf([])
        before = gc.get_freeze_count()
        control = tiny_site.build()
        assert gc.get_freeze_count() <= before  # the control: a build without the extension freezes nothing
        tiny_site.conf(["long_lived"])
        before = gc.get_freeze_count()
        app = tiny_site.build()
        assert gc.get_freeze_count() > before
        assert control.env is not None and app.env is not None
    finally:
        gc.enable()


def test_a_build_freezes_once_loaded_at_its_start_before_the_pages_are_read_and_after(tiny_site, monkeypatch):
    tiny_site.write("docs/index.rst", "Title\n=====\n\nText.\n")
    tiny_site.conf(["long_lived"])
    frozen = []
    monkeypatch.setattr(long_lived.gc, "freeze", lambda: frozen.append(True))
    assert not _survivors_frozen_here()
    tiny_site.build()
    # config-inited, builder-inited, env-before-read-docs and env-updated.
    assert len(frozen) == 4
    assert _survivors_frozen_here()  # and, from config-inited on, after every full pass


@pytest.fixture
def alone():
    """No other gc callback meanwhile: the test process's own (tests/conftest.py) freezes survivors too."""
    others = list(gc.callbacks)
    gc.callbacks.clear()
    yield
    gc.callbacks[:] = others


def test_the_gallerys_reset_frees_the_last_examples_rings_then_freezes_what_lives(alone):
    gone, alive = _rings()
    before = gc.get_freeze_count()
    assert not _survivors_frozen_here()
    long_lived.collect_then_freeze({}, "plot_example.py", "before")
    assert gone() is None  # the ring nothing refers to was collected, not frozen
    assert gc.get_freeze_count() > before  # what is alive (the second ring among it) is frozen
    assert alive.self is alive
    assert _survivors_frozen_here()  # and, in the worker, what survives each full pass until the next example


def test_after_a_full_pass_what_survived_it_is_frozen(alone):
    long_lived.freeze_survivors()
    long_lived.freeze_survivors()  # installed once, however often it is asked for
    assert gc.callbacks == [long_lived._freeze_after_a_full_pass]
    gone, alive = _rings()
    before = gc.get_freeze_count()
    gc.collect()
    assert gone() is None  # the pass still frees the rings nothing refers to
    assert gc.get_freeze_count() > before  # and what survived it (this ring among it) is frozen
    assert alive.self is alive


def test_sphinxs_forked_processes_freeze_what_survives_each_full_pass(tiny_site):
    import multiprocessing

    tiny_site.write("docs/index.rst", "Title\n=====\n\nText.\n")
    tiny_site.conf(["long_lived"])
    tiny_site.build()  # registers the fork handler in this process, once
    gc.callbacks.remove(long_lived._freeze_after_a_full_pass)  # what the build's own process was given
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(_survivors_frozen_here)
