"""A clock only the test moves, for the trainer's timers (kan/loop.py reads `time.perf_counter()`
through its module's `time`): the training steps advance it by a known cost, so a test asserts
the recorded times exactly instead of bounding wall-clock time (as tests/unit/test_anatomy.py does
for kan/probes/anatomy.py)."""

from __future__ import annotations

import time

import pytest
import torch

from kan import loop
from kan.models import build_model


class FakeTime:
    """`time` with a perf_counter that moves only by advance(); every other name is the real one."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def __getattr__(self, name: str):
        return getattr(time, name)


def on_loop_clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    """kan.loop's timers read the returned clock for the rest of the test."""
    clock = FakeTime()
    monkeypatch.setattr(loop, "time", clock)
    return clock


def ticking(clock: FakeTime, step_s: float, first_extra_s: float = 0.0):
    """A model factory for kan.train.main: the default model, whose every forward with autograd on
    (a training or start-up step; evaluations run under no_grad) advances `clock` by step_s, the
    first one by first_extra_s more (a one-time cost, as a kernel library loading on first use)."""

    def factory(model_cfg, seed):
        model = build_model(model_cfg, seed)
        state = {"first": True}

        def hook(module, args):
            if torch.is_grad_enabled():
                clock.advance(step_s + (first_extra_s if state["first"] else 0.0))
                state["first"] = False

        model.register_forward_pre_hook(hook)
        return model

    return factory
