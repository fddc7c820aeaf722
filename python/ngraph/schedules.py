"""Learning-rate schedules: the learning rate as a function of the optimizer's step count.

Give one to an optimizer as its `learning_rate` (``ng.optimizers.SGD(ng.schedules.cosine(0.1,
1000))``): the optimizer computes it in the compiled step from its step-count variable
``opt.step`` (t = 0 for the first update), so nothing is recompiled or set from Python
between steps, and a checkpoint of the optimizer (``ng.save(path, variables, opt)``) holds
where the schedule is. Called on a number, a schedule returns its value at that step, as a
float (for logging or plotting)::

    lr = ng.schedules.warmup(ng.schedules.poly(0.1, 1000), 50)
    [lr(t) for t in (0, 49, 50, 999, 1000)]
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ngraph import ops
from ngraph._ngraph import Node
from ngraph.exceptions import NgraphTypeError, UserInputError

__all__ = ["Schedule", "poly", "cosine", "step", "warmup", "per_epoch"]


class _Graph:
    """The functions a schedule uses, as graph ops (t is a scalar node)."""

    minimum = staticmethod(ops.minimum)
    power = staticmethod(ops.power)
    cos = staticmethod(ops.cos)
    floor = staticmethod(ops.floor)

    @staticmethod
    def const(value: float, t):
        return ops.constant(value, t.dtype)


class _NumPy:
    """The same functions in NumPy (t is a float64)."""

    minimum = staticmethod(np.minimum)
    power = staticmethod(np.power)
    cos = staticmethod(np.cos)
    floor = staticmethod(np.floor)

    @staticmethod
    def const(value: float, t):
        return np.float64(value)


class Schedule:
    """A learning rate as a function of the step count t. ``schedule(t)`` with t a scalar
    float node returns a node of t's dtype; with t a number, the value as a float."""

    def __call__(self, t):
        if isinstance(t, Node):
            if t.shape != [] or t.dtype.kind != "f":
                raise NgraphTypeError(f"[{type(self).__name__}] the step count must be a "
                                      f"scalar float node, got {t.dtype} {t.shape}")
            return self._value(t, _Graph)
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not t >= 0:
            raise UserInputError(f"[{type(self).__name__}] step must be a number >= 0, "
                                 f"got {t!r}")
        return float(self._value(np.float64(t), _NumPy))

    def _value(self, t, xp):
        raise NotImplementedError


def _positive(value, what: str, schedule: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise UserInputError(f"[{schedule}] {what} must be a number > 0, got {value!r}")
    return float(value)


def _count(value, what: str, schedule: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise UserInputError(f"[{schedule}] {what} must be an integer >= 1, got {value!r}")
    return int(value)


def _end(value, lr0: float, schedule: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= lr0:
        raise UserInputError(f"[{schedule}] end must be in [0, lr0] = [0, {lr0}], got "
                             f"{value!r}")
    return float(value)


class _Poly(Schedule):
    def __init__(self, lr0, total_steps, power, end):
        self.lr0 = _positive(lr0, "lr0", "poly")
        self.total_steps = _count(total_steps, "total_steps", "poly")
        self.power = _positive(power, "power", "poly")
        self.end = _end(end, self.lr0, "poly")

    def _value(self, t, xp):
        left = 1 - xp.minimum(t, float(self.total_steps)) / float(self.total_steps)
        return xp.power(left, self.power) * (self.lr0 - self.end) + self.end

    def __repr__(self):
        return (f"poly({self.lr0}, {self.total_steps}, power={self.power}, "
                f"end={self.end})")


class _Cosine(Schedule):
    def __init__(self, lr0, total_steps, end):
        self.lr0 = _positive(lr0, "lr0", "cosine")
        self.total_steps = _count(total_steps, "total_steps", "cosine")
        self.end = _end(end, self.lr0, "cosine")

    def _value(self, t, xp):
        angle = xp.minimum(t, float(self.total_steps)) * (math.pi / self.total_steps)
        return (xp.cos(angle) + 1) * ((self.lr0 - self.end) / 2) + self.end

    def __repr__(self):
        return f"cosine({self.lr0}, {self.total_steps}, end={self.end})"


class _Step(Schedule):
    def __init__(self, lr0, every, gamma):
        self.lr0 = _positive(lr0, "lr0", "step")
        self.every = _count(every, "every", "step")
        self.gamma = _positive(gamma, "gamma", "step")

    def _value(self, t, xp):
        return xp.power(xp.const(self.gamma, t), xp.floor(t / float(self.every))) * self.lr0

    def __repr__(self):
        return f"step({self.lr0}, {self.every}, {self.gamma})"


class _Constant(Schedule):
    def __init__(self, lr):
        self.lr = _positive(lr, "learning rate", "warmup")

    def _value(self, t, xp):
        return xp.const(self.lr, t)

    def __repr__(self):
        return repr(self.lr)


class _Warmup(Schedule):
    def __init__(self, schedule, steps):
        self.schedule = schedule if isinstance(schedule, Schedule) else _Constant(schedule)
        self.steps = _count(steps, "steps", "warmup")

    def _value(self, t, xp):
        # (t + 1) / steps <= 1 exactly when t < steps, so the minimum is the warm-up factor.
        factor = xp.minimum((t + 1) / float(self.steps), 1.0)
        return self.schedule._value(t, xp) * factor

    def __repr__(self):
        return f"warmup({self.schedule!r}, {self.steps})"


class _PerEpoch(Schedule):
    def __init__(self, schedule, steps_per_epoch):
        if not isinstance(schedule, Schedule):
            raise NgraphTypeError(f"[per_epoch] schedule must be an ng.schedules schedule, got "
                                  f"{type(schedule).__name__}")
        self.schedule = schedule
        self.steps_per_epoch = _count(steps_per_epoch, "steps_per_epoch", "per_epoch")

    def _value(self, t, xp):
        # floor of an exact integer quotient is exact in float32 while t < 2**24.
        return self.schedule._value(xp.floor(t / float(self.steps_per_epoch)), xp)

    def __repr__(self):
        return f"per_epoch({self.schedule!r}, {self.steps_per_epoch})"


def poly(lr0: float, total_steps: int, power: float = 2.0, end: float = 0.0) -> Schedule:
    """Polynomial decay: (lr0 - end) * (1 - min(t, total_steps) / total_steps)**power + end."""
    return _Poly(lr0, total_steps, power, end)


def cosine(lr0: float, total_steps: int, end: float = 0.0) -> Schedule:
    """Cosine decay: end + (lr0 - end) * (1 + cos(pi * min(t, total_steps) / total_steps)) / 2."""
    return _Cosine(lr0, total_steps, end)


def step(lr0: float, every: int, gamma: float) -> Schedule:
    """Step decay: lr0 * gamma**floor(t / every) (PyTorch's StepLR counted in steps)."""
    return _Step(lr0, every, gamma)


def warmup(schedule: Schedule | float, steps: int) -> Schedule:
    """Linear warm-up: schedule(t) * (t + 1) / steps for t < steps, then schedule(t).
    `schedule` may be a float (a constant learning rate after the warm-up)."""
    return _Warmup(schedule, steps)


def per_epoch(schedule: Schedule, steps_per_epoch: int) -> Schedule:
    """`schedule` counted in epochs: its value at floor(t / steps_per_epoch), constant within
    an epoch (as a PyTorch scheduler stepped once per epoch). Its steps are epochs:
    ``per_epoch(cosine(0.1, 10), 469)`` decays over 10 epochs of 469 updates."""
    return _PerEpoch(schedule, steps_per_epoch)
