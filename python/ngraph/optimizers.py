"""Optimizers that build update pairs for ``runtime.computation(..., updates=...)``.

Their state (momentum buffers, Adam's moments and step count) is made of variables, so a
whole training step - forward, backward, optimizer update - is one compiled executable and
nothing round-trips through Python between steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ngraph import ops
from ngraph._ngraph import Node, Variable
from ngraph.autodiff import gradients
from ngraph.exceptions import NgraphTypeError, UserInputError

Updates = list  # list[tuple[Variable, Node]]


def variable(initial_value, dtype=None, name: str | None = None) -> Variable:
    """A variable holding `initial_value` (an array or scalar; converted to `dtype` if
    given). Use it wherever a node is; read it with get_value(), replace it with set_value()."""
    from ngraph._ngraph import make_variable
    from ngraph.utils import to_dtype

    value = np.asarray(initial_value, dtype=None if dtype is None else to_dtype(dtype))
    if dtype is None and value.dtype == np.float64 and not isinstance(
            initial_value, (np.ndarray, np.generic)):
        value = value.astype(np.float32)  # Python floats become float32, as for parameters
    return make_variable(np.array(value, order="C"), name or "")


class Optimizer:
    """Base class: `updates(loss, variables)` returns (variable, new value) pairs."""

    def __init__(self, learning_rate) -> None:
        # A float, or a node (e.g. a scalar ng.variable) for schedules set between calls.
        if isinstance(learning_rate, Node):
            if learning_rate.shape != []:
                raise UserInputError(f"learning_rate must be a scalar node, got shape "
                                 f"{learning_rate.shape}")
            self.learning_rate = learning_rate
        else:
            if not learning_rate > 0:
                raise UserInputError(f"learning_rate must be > 0, got {learning_rate}")
            self.learning_rate = float(learning_rate)
        #: The optimizer's own variables (momentum buffers, moments, step count), for
        #: checkpoints.
        self.state_variables: list[Variable] = []
        self._slots: dict = {}

    def updates(self, loss: Node, variables: Sequence[Variable],
                grads: Sequence[Node] | None = None) -> Updates:
        """Update pairs minimising `loss` over `variables`. Pass `grads` to use gradients
        computed elsewhere (for example averaged across ranks)."""
        variables = list(variables)
        for i, v in enumerate(variables):
            if not isinstance(v, Variable):
                raise NgraphTypeError(f"[{type(self).__name__}] variables[{i}] ({v!r}) is not a "
                                "variable; make it with ng.variable")
        if grads is None:
            grads = gradients(loss, variables)
        elif len(grads) != len(variables):
            raise UserInputError(f"[{type(self).__name__}] got {len(grads)} gradients for "
                             f"{len(variables)} variables")
        out: Updates = []
        for v, g in zip(variables, grads):
            out.extend(self._update(v, g))
        out.extend(self._step_updates())
        return out

    def _update(self, v: Variable, g: Node) -> Updates:
        raise NotImplementedError

    def _step_updates(self) -> Updates:
        return []

    def _lr(self, v: Variable):
        """The learning rate in v's dtype."""
        lr = self.learning_rate
        if isinstance(lr, Node) and lr.dtype != v.dtype:
            return ops.convert(lr, v.dtype)
        return lr

    def _slot(self, v: Variable, what: str) -> Variable:
        # One slot per variable: updates() called again (another step shape) shares state.
        key = (v.get_instance_id(), what)
        slot = self._slots.get(key)
        if slot is None:
            slot = variable(np.zeros(v.shape, v.dtype), name=f"{v.name}/{what}")
            self._slots[key] = slot
            self.state_variables.append(slot)
        return slot


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with (Nesterov) momentum and L2 weight decay,
    as in PyTorch: g += weight_decay * w; buf = momentum * buf + g;
    w -= lr * (g + momentum * buf if nesterov else buf)."""

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0,
                 nesterov: bool = False, weight_decay: float = 0.0) -> None:
        super().__init__(learning_rate)
        if momentum < 0:
            raise UserInputError(f"momentum must be >= 0, got {momentum}")
        if nesterov and momentum == 0:
            raise UserInputError("nesterov momentum needs momentum > 0")
        if weight_decay < 0:
            raise UserInputError(f"weight_decay must be >= 0, got {weight_decay}")
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self.weight_decay = float(weight_decay)

    def _update(self, v: Variable, g: Node) -> Updates:
        lr = self._lr(v)
        if self.weight_decay:
            g = g + v * self.weight_decay
        if self.momentum == 0:
            return [(v, v - g * lr)]
        buf = self._slot(v, "momentum")
        new_buf = buf * self.momentum + g
        step = g + new_buf * self.momentum if self.nesterov else new_buf
        return [(buf, new_buf), (v, v - step * lr)]


class Adam(Optimizer):
    """Adam (Kingma and Ba), with bias correction folded into the step size."""

    def __init__(self, learning_rate: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8) -> None:
        super().__init__(learning_rate)
        for name, b in (("beta1", beta1), ("beta2", beta2)):
            if not 0 <= b < 1:
                raise UserInputError(f"{name} must be in [0, 1), got {b}")
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)
        self.step = variable(np.float32(0), name="adam/step")
        self.state_variables.append(self.step)
        self._t = self.step + np.float32(1)

    def _update(self, v: Variable, g: Node) -> Updates:
        b1, b2 = self.beta1, self.beta2
        m, s = self._slot(v, "m"), self._slot(v, "v")
        new_m = m * b1 + g * (1 - b1)
        new_s = s * b2 + g * g * (1 - b2)
        t = self._t if v.dtype == np.float32 else ops.convert(self._t, v.dtype)
        # lr * sqrt(1 - b2^t) / (1 - b1^t), computed in the graph from the step count.
        corr = ops.sqrt(1 - ops.power(ops.constant(b2, v.dtype), t)) / (
            1 - ops.power(ops.constant(b1, v.dtype), t))
        step = new_m * (corr * self._lr(v)) / (ops.sqrt(new_s) + self.epsilon)
        return [(m, new_m), (s, new_s), (v, v - step)]

    def _step_updates(self) -> Updates:
        return [(self.step, self._t)]


class AdamW(Optimizer):
    """AdamW (Loshchilov and Hutter), PyTorch's formula: with t the step count,
    w *= 1 - lr * weight_decay (decoupled decay); m = b1 m + (1 - b1) g;
    v = b2 v + (1 - b2) g^2; w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    Variables in `no_decay` (biases, layer-norm gains, as GPT training leaves them) are not
    decayed."""

    def __init__(self, learning_rate=1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, weight_decay: float = 0.01,
                 no_decay: Sequence[Variable] = ()) -> None:
        super().__init__(learning_rate)
        for name, b in (("beta1", beta1), ("beta2", beta2)):
            if not 0 <= b < 1:
                raise UserInputError(f"[AdamW] {name} must be in [0, 1), got {b}")
        if not weight_decay >= 0:
            raise UserInputError(f"[AdamW] weight_decay must be >= 0, got {weight_decay}")
        if not epsilon >= 0:
            raise UserInputError(f"[AdamW] epsilon must be >= 0, got {epsilon}")
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)
        self.weight_decay = float(weight_decay)
        self._no_decay = {v.get_instance_id() for v in no_decay}
        self.step = variable(np.float32(0), name="adamw/step")
        self.state_variables.append(self.step)
        self._t = self.step + np.float32(1)

    def _update(self, v: Variable, g: Node) -> Updates:
        if v.dtype not in (np.float32, np.float64):
            raise NgraphTypeError(f"[AdamW] variable {v.name} is {v.dtype}; AdamW updates f32 "
                                  "and f64 variables")
        b1, b2 = self.beta1, self.beta2
        m, s = self._slot(v, "m"), self._slot(v, "v")
        new_m = m * b1 + g * (1 - b1)
        new_s = s * b2 + g * g * (1 - b2)
        t = self._t if v.dtype == np.float32 else ops.convert(self._t, v.dtype)
        lr = self._lr(v)
        bias1 = 1 - ops.power(ops.constant(b1, v.dtype), t)
        bias2 = ops.sqrt(1 - ops.power(ops.constant(b2, v.dtype), t))
        step = new_m * (lr / bias1) / (ops.sqrt(new_s) / bias2 + self.epsilon)
        decayed = v
        if self.weight_decay and v.get_instance_id() not in self._no_decay:
            decayed = v * (1 - lr * self.weight_decay)
        return [(m, new_m), (s, new_s), (v, decayed - step)]

    def _step_updates(self) -> Updates:
        return [(self.step, self._t)]
