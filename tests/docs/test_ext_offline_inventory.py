"""Offline inventories: reviewed text lists become inventories Sphinx reads, with no network."""

from __future__ import annotations

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

import offline_inventory  # noqa: E402
from sphinx.util.inventory import InventoryFile  # noqa: E402

LIST = """
# PyTorch names used in signatures and prose.
torch.Tensor         py:class     tensors.html#$
torch.nn.functional.softmax py:function generated/torch.nn.functional.softmax.html#$
torch._C.Generator   py:class     generated/torch.Generator.html#torch.Generator
"""


def test_a_list_round_trips_through_sphinxs_inventory_reader(tmp_path):
    source = tmp_path / "torch.txt"
    source.write_text(LIST)
    data = offline_inventory.inventory_bytes(source, "PyTorch", "stable")
    inventory = InventoryFile.loads(data, uri="https://docs.pytorch.org/docs/stable/").data
    tensor = inventory["py:class"]["torch.Tensor"]
    assert tensor.project_name == "PyTorch" and tensor.project_version == "stable"
    assert tensor.uri == "https://docs.pytorch.org/docs/stable/tensors.html#torch.Tensor"
    assert tensor.display_name == "-"
    softmax = inventory["py:function"]["torch.nn.functional.softmax"]
    assert softmax.uri.endswith("generated/torch.nn.functional.softmax.html#torch.nn.functional.softmax")
    # An explicit anchor is kept as written.
    assert inventory["py:class"]["torch._C.Generator"].uri.endswith("torch.Generator.html#torch.Generator")


def test_an_unchanged_list_is_not_rewritten(tmp_path):
    source = tmp_path / "torch.txt"
    source.write_text(LIST)
    target = offline_inventory.write_inventory(source, tmp_path / "out" / "torch.inv", "PyTorch")
    before = target.stat().st_mtime_ns
    offline_inventory.write_inventory(source, target, "PyTorch")
    assert target.stat().st_mtime_ns == before
    source.write_text(LIST + "torch.bmm py:function generated/torch.bmm.html#$\n")
    offline_inventory.write_inventory(source, target, "PyTorch")
    assert b"torch.bmm" not in target.read_bytes()[:200]  # compressed, but rewritten:
    assert "torch.bmm" in InventoryFile.loads(target.read_bytes(), uri="u/").data["py:function"]


def _site(tiny_site, online: bool):
    tiny_site.write("docs/_intersphinx/torch.txt", LIST)
    tiny_site.conf(
        ["sphinx.ext.intersphinx", "offline_inventory"],
        offline_inventories={"torch": ("https://docs.pytorch.org/docs/stable/", "PyTorch", "stable")},
        offline_inventory_online=online,
    )
    tiny_site.write(
        "docs/index.rst", "Tiny\n====\n\nA :class:`torch.Tensor` and :func:`torch.nn.functional.softmax`.\n"
    )


def test_a_site_links_to_the_listed_names_offline(tiny_site):
    _site(tiny_site, online=False)
    app = tiny_site.build()
    assert app.warnings == ""
    index = tiny_site.html("index")
    assert 'href="https://docs.pytorch.org/docs/stable/tensors.html#torch.Tensor"' in index
    assert (tiny_site.build_dir / "doctrees" / "offline-inventories" / "torch.inv").is_file()
    (url, locations) = app.config.intersphinx_mapping["torch"][1]
    assert url == "https://docs.pytorch.org/docs/stable/"
    assert locations == (str(tiny_site.build_dir / "doctrees" / "offline-inventories" / "torch.inv"),)


def test_online_mode_tries_the_projects_inventory_first(tiny_site):
    _site(tiny_site, online=True)
    tiny_site.write("docs/index.rst", "Tiny\n====\n\nText.\n")
    app = tiny_site.build(intersphinx_timeout=0.01)
    locations = app.config.intersphinx_mapping["torch"][1][1]
    assert locations[0] is None and locations[1].endswith("torch.inv")


def test_a_name_missing_from_the_list_is_a_nitpicky_warning(tiny_site):
    _site(tiny_site, online=False)
    tiny_site.write("docs/index.rst", "Tiny\n====\n\nA :class:`torch.NotListed`.\n")
    app = tiny_site.build()
    assert "torch.NotListed" in app.warnings


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Any attempt to fetch an inventory over the network fails loudly instead of waiting."""
    import sphinx.util.requests

    def refuse(*args, **kwargs):
        raise OSError("no network in tests")

    monkeypatch.setattr(sphinx.util.requests, "get", refuse)
