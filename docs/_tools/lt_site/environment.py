"""The environment a result was computed in: library versions and the device.

A number on a page is only reproducible together with what computed it.
Every executed chapter and gallery example of the site, and every benchmark
result, states the versions of the libraries that produced it and the
device it ran on, read by :func:`versions` and :func:`describe` at the
moment it ran.

>>> sorted(versions())
['literate_transformer', 'numpy', 'python', 'torch', 'transformers']
>>> describe("cpu").startswith("torch ")
True
"""

from __future__ import annotations

import platform
from importlib import metadata

__all__ = ["versions", "device_name", "describe"]


def versions() -> dict[str, str]:
    """The versions of Python, PyTorch, ``transformers``, NumPy and this package.

    ``transformers``' version is read from its installed metadata, which
    names the same release as ``transformers.__version__`` without importing
    the library (a second, on every start of the docs build that asks).

    >>> versions()["transformers"] == __import__("transformers").__version__
    True
    """
    import numpy
    import torch

    from literate_transformer import __version__

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": metadata.version("transformers"),
        "numpy": numpy.__version__,
        "literate_transformer": __version__,
    }


def device_name(device: str | None = None) -> str:
    """``"CPU"``, or ``"CUDA (<the GPU's name>)"``; by default the device the examples choose.

    Args:
        device: ``"cpu"`` or ``"cuda"``; ``None`` picks ``"cuda"`` when it is available, as every example does.
    """
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if str(device).startswith("cuda"):
        return f"CUDA ({torch.cuda.get_device_name()})"
    return "CPU"


def describe(device: str | None = None) -> str:
    """One line: ``torch 2.13.0, transformers 5.23.0, Python 3.11.7, on CPU``."""
    found = versions()
    return (
        f"torch {found['torch']}, transformers {found['transformers']}, Python {found['python']}, "
        f"on {device_name(device)}"
    )
