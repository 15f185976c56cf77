"""An on/off switch for an optional kernel path (tests and A/B benchmarks use the eager path)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class KernelSwitch:
    def __init__(self) -> None:
        self.enabled = True

    def set_enabled(self, flag: bool) -> None:
        """Switch the optional path on or off for the whole process."""
        self.enabled = bool(flag)

    @contextlib.contextmanager
    def disabled(self) -> Iterator[None]:
        """Use the eager path inside the block."""
        old, self.enabled = self.enabled, False
        try:
            yield
        finally:
            self.enabled = old
