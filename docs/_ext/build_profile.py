"""Where a build's time goes: every handler of the build's own process timed, and the phases between them.

A clean build of this site spends its minutes in a few places: the gallery's
examples, the runtime values, the proofs (in a process of their own), the
two browser exports, the chapters' execution (in the reading processes) and
the writing of the pages.  This extension times them without touching them:
once the configuration is read, it wraps every handler connected to one of
Sphinx's events, and it notes when reading and writing start and end.  At
the end of the build the log gets one table, the slowest handlers first,
and the same figures go to ``build_profile_file`` (JSON) when it is set, so
a contributor can compare two builds.

Handlers that run in the reading and writing processes (``-j``) are not in
the table (their time is inside "reading" and "writing"); the executed
pages' own times are in the table of :mod:`executed_pages`.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: Handlers shorter than this are summed into one line of the table.
SHOWN = 0.5


def _name(handler: Any) -> str:
    """``module.function`` (or ``module.Class.method``) of a handler."""
    target = getattr(handler, "__func__", handler)
    target = getattr(target, "func", target)  # functools.partial
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def wrap_listeners(app: Sphinx, config: Any = None) -> None:
    """``config-inited`` (last): time every handler connected from now on to an event, by event and name."""
    app.lt_profile = {"started": getattr(app, "lt_profile_started", time.time()), "handlers": {}, "marks": {}}  # type: ignore[attr-defined]
    handlers = app.lt_profile["handlers"]  # type: ignore[attr-defined]

    def timed(event: str, handler: Any) -> Any:
        @functools.wraps(handler)
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return handler(*args, **kwargs)
            finally:
                key = f"{event}: {_name(handler)}"
                handlers[key] = handlers.get(key, 0.0) + time.perf_counter() - start

        run.lt_profiled = True  # type: ignore[attr-defined]
        return run

    for event, listeners in app.events.listeners.items():
        if event == "config-inited":
            continue
        listeners[:] = [
            listener
            if getattr(listener.handler, "lt_profiled", False)
            else listener._replace(handler=timed(event, listener.handler))
            for listener in listeners
        ]


def _mark(name: str):
    def note(app: Sphinx, *args: Any) -> None:
        profile = getattr(app, "lt_profile", None)
        if profile is not None:
            profile["marks"].setdefault(name, time.time())

    note.lt_profiled = True  # type: ignore[attr-defined]
    return note


def profile_rows(profile: dict[str, Any], finished: float) -> list[tuple[str, float]]:
    """The table's rows: the phases, then the handlers that took at least :data:`SHOWN` seconds, slowest first."""
    marks, started = profile["marks"], profile["started"]
    rows = []
    if "reading" in marks and "read" in marks:
        rows.append(("reading the pages (parsing, executing; every reading process)", marks["read"] - marks["reading"]))
    if "read" in marks:
        rows.append(("after reading: consistency, writing the pages, copying files", finished - marks["read"]))
    handlers = sorted(profile["handlers"].items(), key=lambda item: -item[1])
    rows += [(name, seconds) for name, seconds in handlers if seconds >= SHOWN]
    small = sum(seconds for _, seconds in handlers if seconds < SHOWN)
    rows.append((f"every other handler of this process ({sum(s < SHOWN for _, s in handlers)})", small))
    rows.append(("the whole build", finished - started))
    return rows


def report(app: Sphinx, exception: Exception | None) -> None:
    """``build-finished``: the table, and the JSON file."""
    profile = getattr(app, "lt_profile", None)
    if profile is None:
        return
    finished = time.time()
    rows = profile_rows(profile, finished)
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {seconds:8.2f}" for name, seconds in rows]
    logger.info("\nbuild profile (seconds of wall time in the build's own process)\n" + "\n".join(lines))
    if app.config.build_profile_file:
        path = Path(app.confdir, app.config.build_profile_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"rows": rows, "handlers": profile["handlers"]}, indent=1), encoding="utf-8")


report.lt_profiled = True  # type: ignore[attr-defined]


def setup(app: Sphinx) -> dict[str, object]:
    app.lt_profile_started = time.time()  # type: ignore[attr-defined]
    app.add_config_value("build_profile_file", "", "", types=frozenset({str}))
    # Last of config-inited: every extension has connected its handlers by then.
    app.connect("config-inited", wrap_listeners, priority=1000)
    app.connect("env-before-read-docs", _mark("reading"), priority=0)
    app.connect("env-updated", _mark("read"), priority=0)
    app.connect("build-finished", report, priority=1000)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
