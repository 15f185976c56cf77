"""Rank 0's progress lines while a point trains."""

from __future__ import annotations

import time


class Progress:
    """Rank 0's progress lines: steps done / total, samples/s, ETA."""

    def __init__(self, total_steps: int, global_batch: int, every_s: float, enabled: bool) -> None:
        self.total, self.global_batch, self.every_s, self.enabled = total_steps, global_batch, every_s, enabled
        self.t0 = self.last = time.perf_counter()

    def update(self, step: int) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self.last < self.every_s and step != self.total):
            return
        self.last = now
        rate = step / max(now - self.t0, 1e-9)
        eta = (self.total - step) / max(rate, 1e-9)
        print(f"[kan.train] step {step}/{self.total} ({100 * step / self.total:.0f}%) "
              f"{rate * self.global_batch:,.0f} samples/s ETA {eta:.0f} s", flush=True)
