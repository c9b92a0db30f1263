"""A proof's result as the proof badges read it: a module of its own, which imports nothing heavy.

The badges' extension runs the proofs in a process of its own; a provider that only returns these records
(a test's) then starts without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Measurement"]


@dataclass
class Measurement:
    """A proof's result on this machine: the difference measured, and whether it is within tolerance."""

    subject: str
    reference: str
    test: str
    max_abs_diff: float
    tolerance: float
    example: str
    dtype: str = "float32"

    @property
    def passed(self) -> bool:
        return self.max_abs_diff <= self.tolerance
