"""Runtime shapes beside the code: what each line of the annotated source computed when the site was built.

The annotated-source pages (:mod:`sidebyside`) show each module's code with
its comments; a shape comment such as ``# (B, H, T, D)`` says what a line
produces.  This extension runs a *trace provider* once per build (a function
named by ``runtime_trace_provider``, e.g. ``package.trace:site_trace``) that
runs running examples through the package and records, for every statement
of every function that assigns a tensor, its shape, dtype, first values,
statistics and a small heatmap.  Then:

* each such line of a code block gets, at its end, the runtime shape (e.g.
  ``(1, 12, 7, 32)`` beside ``# (B, H, T, D)``) in a focusable element whose
  preview (statistics, first values, heatmap, how many times the line ran)
  appears on hover, focus or click (``_static/runtime-trace.js``);
* each page says which running example its values come from, with the
  sizes of the legend's letters in that example (``data-dims``, which the
  site tests read).

The provider's result is cached in ``runtime_trace_cache`` (a JSON file),
keyed by what its examples reached (:mod:`lt_site.deps`: the provider takes
the arguments of an :class:`~lt_site.deps.ItemCache` that keeps each
example's trace with the record of its run, and runs again only the
examples whose code changed): an edit that no example reached traces
nothing again, and pages are read again only when the merged result
changes.  The provider returns ``{"examples": {name: {"description",
"dims"}}, "lines": {path relative to runtime_trace_root: {line: record}}}``
(see :func:`annotation_html` for a record's fields).

Nothing here knows the package: every name comes from a config value.
"""

from __future__ import annotations

import html
import importlib
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from docutils import nodes
from extension_metadata import extension_metadata
from lt_site.deps import ItemCache
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: Static files of this extension (under the site's ``_static``), added to pages that show runtime values.
SCRIPT, STYLESHEET = "runtime-trace.js", "runtime-trace.css"


# ---------------------------------------------------------------------------
# Pure parts: the cache key, the cache, the HTML of one line
# ---------------------------------------------------------------------------
def _stored(cache: Path) -> dict[str, Any]:
    """What ``cache`` holds (``{"data"}``), or nothing when it is missing or unreadable."""
    try:
        return json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def load_provider(name: str) -> Callable[..., Any]:
    """``"module:function"`` to the function."""
    module, _, function = name.partition(":")
    if not module or not function:
        raise ValueError(f"a provider is named 'module:function', got {name!r}")
    return getattr(importlib.import_module(module), function)


def shape_text(shape: Iterable[int]) -> str:
    """``(1, 12, 7, 32)``; a one-dimensional shape as ``(7,)``, as Python writes it."""
    return str(tuple(shape))


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else html.escape(str(value))


def annotation_html(record: Mapping[str, Any], examples: Mapping[str, Any]) -> str:
    """The HTML placed at the end of a line: one focusable runtime value per tensor the line assigned.

    Args:
        record: ``names``, ``values`` (per name ``None`` or ``shape``, ``dtype``,
            ``values``, ``stats``, ``heatmap``, ``heatmap_of``), ``calls`` and
            ``example``.
        examples: The provider's examples (for the description of ``record["example"]``).

    Returns:
        One ``<span class="lt-rt">`` per tensor; no newline (the HTML sits inside a ``<pre>``).
    """
    calls = record.get("calls", 1)
    ran = f"first of {calls} calls" if calls > 1 else "ran once"
    example = record.get("example", "")
    parts = []
    for name, value in zip(record["names"], record["values"], strict=True):
        if value is None:
            continue
        shape = shape_text(value["shape"])
        stats = value.get("stats") or {}
        statistics = " · ".join(
            [f"{key} {_number(stats[key])}" for key in ("mean", "std", "min", "max") if key in stats]
            + [f"{stats[key]} entries {key}" for key in ("-inf", "+inf", "nan") if key in stats]
        )
        first = ", ".join(_number(v) for v in value.get("values", []))
        label = f"{name}: shape {shape}, {value['dtype']}, {ran}; open for its values"
        heatmap = ""
        if value.get("heatmap"):
            data = html.escape(json.dumps(value["heatmap"], separators=(",", ":")))
            heatmap = (
                f'<span class="lt-rt-heatmap" data-heatmap="{data}" '
                f'aria-label="heatmap: {html.escape(value.get("heatmap_of") or "")}"></span>'
            )
        parts.append(
            f'<span class="lt-rt" tabindex="0" role="button" aria-expanded="false" '
            f'aria-label="{html.escape(label)}" data-example="{html.escape(example)}">'
            f'<span class="lt-rt-shape">{shape}</span>'
            f'<span class="lt-rt-preview" hidden>'
            f'<span class="lt-rt-title">{html.escape(name)} · {html.escape(value["dtype"])} · {shape}</span>'
            f'<span class="lt-rt-stats">{statistics}</span>'
            f'<span class="lt-rt-values">first values: {first}</span>'
            f'<span class="lt-rt-calls">{ran} on the {html.escape(example)} example</span>'
            f"{heatmap}</span></span>"
        )
    return "".join(parts)


def annotations_for(records: Mapping[str, Mapping[str, Any]], examples: Mapping[str, Any]) -> dict[int, str]:
    """``{line: html}`` for a file's records, each at the statement's last line (where its shape comment sits)."""
    found: dict[int, str] = {}
    for record in records.values():
        line = int(record.get("end_line") or record["line"])
        found[line] = found.get(line, "") + annotation_html(record, examples)
    return found


def hook_html(hook: Mapping[str, Any]) -> str:
    """The HTML placed at the end of a line that called a module: the name the lens caches its result under.

    Args:
        hook: ``name`` (``model.layers.{i}`` for a line that called each layer's module) and ``example``.
    """
    name = html.escape(hook["name"])
    return (
        f'<span class="lt-hook" title="lt.lens.run_with_cache keeps what this line called returned as '
        f'cache[&quot;{name}&quot;] (on the {html.escape(hook.get("example", ""))} example)">'
        f'cache["{name}"]</span>'
    )


def examples_used(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The examples a file's records come from, in first-seen order."""
    return list(dict.fromkeys(record.get("example", "") for record in records.values()))


# ---------------------------------------------------------------------------
# The Sphinx glue
# ---------------------------------------------------------------------------
def trace_cache(app: Sphinx) -> tuple[str, str, list[str], str]:
    """The arguments of the examples' :class:`lt_site.deps.ItemCache`: its file, the checkout, what counts, a salt."""
    config = app.config
    cache = Path(config.runtime_trace_cache)
    checkout = config.runtime_trace_checkout or str(Path(app.confdir).parent)
    examples = str(cache.with_name(cache.stem + ".examples.json"))
    return (examples, checkout, list(config.runtime_trace_sources), config.runtime_trace_provider)


def compute_trace(app: Sphinx) -> None:
    """``builder-inited``: the trace of this build, from the cache or the provider.

    ``runtime_trace_cache`` holds the merged result (what the pages read: rewritten only when it changes);
    ``<it>.key`` the key of the examples' records it was merged from.
    """
    config = app.config
    app.runtime_trace = {"examples": {}, "lines": {}}  # type: ignore[attr-defined]
    if not config.runtime_trace_provider:
        return
    cache, items = Path(config.runtime_trace_cache), trace_cache(app)
    key = cache.with_name(cache.name + ".key")
    examples = ItemCache(*items)
    stored = _stored(cache)
    if examples.all_current() and "data" in stored and key.is_file() and key.read_text() == examples.whole().key():
        logger.info("runtime trace: nothing the examples reached changed, values from %s", cache)
        app.runtime_trace = stored["data"]  # type: ignore[attr-defined]
        return
    logger.info("runtime trace: running the examples of %s whose code changed", config.runtime_trace_provider)
    data = load_provider(config.runtime_trace_provider)(config.runtime_trace_root, items)
    # Through JSON and back, so that this build reads what the next one will.
    data = json.loads(json.dumps(data, sort_keys=True))
    text = json.dumps({"data": data}, sort_keys=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    if not cache.is_file() or cache.read_text(encoding="utf-8") != text:
        cache.write_text(text, encoding="utf-8")
    # A provider that keeps no records (a test's) leaves no key: it runs in every build.
    examples = ItemCache(*items)
    whole = examples.whole()
    costliest = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in examples.costliest(4))
    if costliest:
        logger.info("runtime trace: the costliest examples (CPU): %s", costliest)
    key.write_text(whole.key() if whole is not None else "")
    app.runtime_trace = data  # type: ignore[attr-defined]


def annotate_code(app: Sphinx, doctree: nodes.document) -> None:
    """``doctree-read``: give every code block of an annotated page its lines' runtime values."""
    trace = getattr(app, "runtime_trace", None)
    if not trace or not app.config.runtime_trace_provider:
        return
    root = Path(app.config.runtime_trace_root).resolve()
    used: list[str] = []
    annotated = shows_package_code = False
    for node in doctree.findall(lambda n: isinstance(n, nodes.literal_block) and "source_path" in n):
        try:
            relative = Path(node["source_path"]).resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        shows_package_code = True
        records = (trace.get("lines") or {}).get(relative) or {}
        hooks = (trace.get("hooks") or {}).get(relative) or {}
        if not records and not hooks:
            continue
        lines = set(node["source_lines"])
        mine = {key: record for key, record in records.items() if int(record.get("end_line") or key) in lines}
        annotations = annotations_for(mine, trace["examples"])
        for line, hook in hooks.items():
            if int(line) in lines:
                annotations[int(line)] = annotations.get(int(line), "") + hook_html(hook)
        if annotations:
            node["line_annotations"] = annotations
            used += [name for name in examples_used(mine) if name not in used]
            annotated = True
    # A page that shows the package's code is read again when the trace changes, annotated today or not: an
    # example added later may reach its lines.
    if shows_package_code:
        app.env.note_dependency(str(Path(app.config.runtime_trace_cache).resolve()))
    if annotated:
        _insert_note(doctree, used, trace["examples"])


def _insert_note(doctree: nodes.document, used: list[str], examples: Mapping[str, Any]) -> None:
    """Before the first annotated listing: which running examples the values come from."""
    target = next(doctree.findall(lambda n: isinstance(n, nodes.container) and "lt-sbs" in n["classes"]), None)
    if target is None:
        return
    target.parent.insert(target.parent.index(target), example_note(used, examples))


def example_note(used: Iterable[str], examples: Mapping[str, Any]) -> nodes.container:
    """The note that says what the runtime values are and which running examples (``used``) they come from."""
    note = nodes.container(classes=["lt-rt-note"])
    paragraph = nodes.paragraph()
    paragraph += nodes.strong("Runtime values. ", "Runtime values. ")
    paragraph += nodes.Text(
        "Each line that computes a tensor shows its shape at the end of the line, as it came out when this "
        "page was built; hover over it, focus it (Tab) or click it for its dtype, statistics, first values "
        "and a heatmap. A line that ran more than once (once per layer, say) shows its first call and says so. "
    )
    note += paragraph
    for name in used:
        example = examples.get(name, {})
        item = nodes.paragraph(classes=["lt-rt-example"])
        item += nodes.emphasis(f"The {name} example: ", f"The {name} example: ")
        item += nodes.Text(f"{example.get('description', '')}. ")
        dims = ", ".join(f"{letter} = {size}" for letter, size in example.get("dims", {}).items())
        item += nodes.Text(f"Sizes: {dims}.")
        # The same sizes for programs (the site tests check every shape against its comment with them).
        data = html.escape(json.dumps(example.get("dims", {}), sort_keys=True))
        item += nodes.raw(
            "", f'<span class="lt-rt-dims" data-example="{html.escape(name)}" data-dims="{data}"></span>', format="html"
        )
        note += item
    return note


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("runtime_trace_provider", "", "env", types=frozenset({str}))
    app.add_config_value("runtime_trace_root", "", "env", types=frozenset({str}))
    # The folders whose files count in the examples' records, and the checkout their paths are relative to
    # (default: the folder above conf.py's).
    app.add_config_value("runtime_trace_sources", [], "env", types=frozenset({list, tuple}))
    app.add_config_value("runtime_trace_checkout", "", "env", types=frozenset({str}))
    app.add_config_value("runtime_trace_cache", "", "env", types=frozenset({str}))
    # Before the gallery (priority 500): while the build's processes of their own wait for the forkserver's
    # imports (forked_kernels.worker_context), this process traces.
    app.connect("builder-inited", compute_trace, priority=400)
    app.connect("doctree-read", annotate_code)
    # A few kilobytes; on a page without runtime values the script finds nothing to do.
    app.add_css_file(STYLESHEET)
    app.add_js_file(SCRIPT, loading_method="defer")
    return extension_metadata(__file__)
