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
from ngraph.schedules import Schedule

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
    """Base class: `updates(loss, variables)` returns (variable, new value) pairs.

    Every optimizer counts its steps in ``opt.step`` (a float32 scalar variable, 0 before the
    first update, saved with the optimizer's state); a schedule of ``ng.schedules`` given as
    `learning_rate` is computed from it in the compiled step."""

    #: Prefix of the names of the optimizer's own variables (``<prefix>/step``).
    _prefix = "optimizer"
    #: Names of state variables that checkpoints written before they existed lack; loading
    #: such a file leaves them as they are (SGD's step count, added after its momentum).
    _optional_state: tuple[str, ...] = ()

    def __init__(self, learning_rate) -> None:
        # A float; a node (e.g. a scalar ng.variable) for schedules set between calls; or an
        # ng.schedules schedule, computed in the graph from the step count.
        if isinstance(learning_rate, Schedule):
            self.learning_rate = learning_rate
        elif isinstance(learning_rate, Node):
            if learning_rate.shape != []:
                raise UserInputError(f"learning_rate must be a scalar node, got shape "
                                 f"{learning_rate.shape}")
            self.learning_rate = learning_rate
        else:
            if not learning_rate > 0:
                raise UserInputError(f"learning_rate must be > 0, got {learning_rate}")
            self.learning_rate = float(learning_rate)
        #: The optimizer's own variables (step count, momentum buffers, moments), for
        #: checkpoints.
        self.state_variables: list[Variable] = []
        self._slots: dict = {}
        self._lr_nodes: dict = {}
        #: The number of updates applied so far (t of the schedules; float32, exact to 2**24).
        self.step = variable(np.float32(0), name=f"{self._prefix}/step")
        self.state_variables.append(self.step)
        self._t = self.step + np.float32(1)

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
        # The step count's update first: the CPU backend schedules it before the variables'
        # fused update kernels, which must come last to update their variables in place
        # (and to shard the update over a node's ranks).
        out: Updates = list(self._step_updates())
        for v, g in zip(variables, grads):
            out.extend(self._update(v, g))
        return out

    def _update(self, v: Variable, g: Node) -> Updates:
        raise NotImplementedError

    def _step_updates(self) -> Updates:
        return [(self.step, self._t)]

    def learning_rate_node(self, dtype=np.float32) -> Node:
        """The learning rate of the current step as a scalar node of `dtype` (a schedule's
        value at the step count): return it from the training step to log it."""
        from ngraph.utils import to_dtype

        dtype = np.dtype(to_dtype(dtype))
        node = self._lr_nodes.get(dtype)
        if node is None:
            lr = self.learning_rate
            if isinstance(lr, Schedule):
                t = self.step if dtype == np.float32 else ops.convert(self.step, dtype)
                node = lr(t)
            elif isinstance(lr, Node):
                node = lr if lr.dtype == dtype else ops.convert(lr, dtype)
            else:
                node = ops.constant(lr, dtype)
            self._lr_nodes[dtype] = node
        return node

    def _lr(self, v: Variable):
        """The learning rate in v's dtype: a float stays a float (folded into the update)."""
        lr = self.learning_rate
        if isinstance(lr, Node) and lr.dtype == v.dtype:
            return lr
        if isinstance(lr, (Node, Schedule)):
            return self.learning_rate_node(v.dtype)
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

    _prefix = "sgd"
    _optional_state = ("sgd/step",)

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

    _prefix = "adam"

    def __init__(self, learning_rate: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8) -> None:
        super().__init__(learning_rate)
        for name, b in (("beta1", beta1), ("beta2", beta2)):
            if not 0 <= b < 1:
                raise UserInputError(f"{name} must be in [0, 1), got {b}")
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)

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


class AdamW(Optimizer):
    """AdamW (Loshchilov and Hutter), PyTorch's formula: with t the step count,
    w *= 1 - lr * weight_decay (decoupled decay); m = b1 m + (1 - b1) g;
    v = b2 v + (1 - b2) g^2; w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    Variables in `no_decay` (biases, layer-norm gains, as GPT training leaves them) are not
    decayed."""

    _prefix = "adamw"

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


def _norm(x: Node) -> Node:
    """The L2 norm of the whole tensor `x`, a scalar node of its dtype."""
    return ops.sqrt(ops.sum(x * x))


def _ratio(num: Node, den: Node, w_norm: Node, other_norm: Node) -> Node:
    """num / den, and 1 where `w_norm` or `other_norm` is 0 (the other branch's 0 / 0 is
    not selected)."""
    zero = ops.constant(0, num.dtype)
    nonzero = ops.logical_and(ops.greater(w_norm, zero), ops.greater(other_norm, zero))
    return ops.select(nonzero, num / den, ops.constant(1, num.dtype))


def _default_exclude(v: Variable) -> bool:
    return len(v.shape) <= 1


class _LayerwiseOptimizer(Optimizer):
    """LARS and LAMB: per-variable trust ratios; `exclude(v)` says which variables take
    ratio 1 and no weight decay (default: rank <= 1, i.e. biases and normalisation scales
    and shifts)."""

    def __init__(self, learning_rate, weight_decay: float, exclude) -> None:
        super().__init__(learning_rate)
        name = type(self).__name__
        if not weight_decay >= 0:
            raise UserInputError(f"[{name}] weight_decay must be >= 0, got {weight_decay}")
        if exclude is not None and not callable(exclude):
            raise NgraphTypeError(f"[{name}] exclude must be a predicate on a variable (or "
                                  f"None), got {type(exclude).__name__}")
        self.weight_decay = float(weight_decay)
        self.exclude = _default_exclude if exclude is None else exclude

    def _check(self, v: Variable) -> bool:
        """Whether v is excluded; refuses dtypes other than f32 and f64."""
        if v.dtype not in (np.float32, np.float64):
            raise NgraphTypeError(f"[{type(self).__name__}] variable {v.name} is {v.dtype}; "
                                  f"{type(self).__name__} updates f32 and f64 variables")
        return bool(self.exclude(v))


class LARS(_LayerwiseOptimizer):
    """LARS (You, Gitman and Ginsburg, arXiv 1708.03888, Algorithm 1), per variable w with
    gradient g: local = trust_coefficient * |w| / (|g| + weight_decay * |w| + eps), 1 where
    |w| or |g| is 0 (whole-tensor L2 norms); v = momentum * v + lr * local *
    (g + weight_decay * w); w -= v. Excluded variables (`exclude(w)`, default: rank <= 1)
    take local = 1 and no weight decay."""

    _prefix = "lars"

    def __init__(self, learning_rate, momentum: float = 0.9, weight_decay: float = 0.0,
                 trust_coefficient: float = 0.001, eps: float = 1e-9, exclude=None) -> None:
        super().__init__(learning_rate, weight_decay, exclude)
        if not momentum >= 0:
            raise UserInputError(f"[LARS] momentum must be >= 0, got {momentum}")
        if not trust_coefficient > 0:
            raise UserInputError(f"[LARS] trust_coefficient must be > 0, got "
                                 f"{trust_coefficient}")
        if not eps >= 0:
            raise UserInputError(f"[LARS] eps must be >= 0, got {eps}")
        self.momentum = float(momentum)
        self.trust_coefficient = float(trust_coefficient)
        self.eps = float(eps)

    def _update(self, v: Variable, g: Node) -> Updates:
        excluded = self._check(v)
        lr = self._lr(v)
        if excluded:
            step = g * lr
        else:
            w_norm, g_norm = _norm(v), _norm(g)
            den = g_norm + self.eps
            if self.weight_decay:
                den = den + w_norm * self.weight_decay
            local = _ratio(w_norm * self.trust_coefficient, den, w_norm, g_norm)
            if self.weight_decay:
                g = g + v * self.weight_decay
            step = g * (local * lr)
        if self.momentum == 0:
            return [(v, v - step)]
        buf = self._slot(v, "momentum")
        new_buf = buf * self.momentum + step
        return [(buf, new_buf), (v, v - new_buf)]


class LAMB(_LayerwiseOptimizer):
    """LAMB (You et al., arXiv 1904.00962, Algorithm 2), per variable w with gradient g and
    t the step count + 1: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    r = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * w;
    w -= lr * (|w| / |r|) * r, the ratio 1 where |w| or |r| is 0 (whole-tensor L2 norms).
    Excluded variables (`exclude(w)`, default: rank <= 1) take ratio 1 and no weight
    decay."""

    _prefix = "lamb"

    def __init__(self, learning_rate, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-6, weight_decay: float = 0.0, exclude=None) -> None:
        super().__init__(learning_rate, weight_decay, exclude)
        for name, b in (("beta1", beta1), ("beta2", beta2)):
            if not 0 <= b < 1:
                raise UserInputError(f"[LAMB] {name} must be in [0, 1), got {b}")
        if not eps >= 0:
            raise UserInputError(f"[LAMB] eps must be >= 0, got {eps}")
        self.beta1, self.beta2, self.eps = float(beta1), float(beta2), float(eps)

    def _update(self, v: Variable, g: Node) -> Updates:
        excluded = self._check(v)
        b1, b2 = self.beta1, self.beta2
        m, s = self._slot(v, "m"), self._slot(v, "v")
        new_m = m * b1 + g * (1 - b1)
        new_s = s * b2 + g * g * (1 - b2)
        t = self._t if v.dtype == np.float32 else ops.convert(self._t, v.dtype)
        m_hat = new_m / (1 - ops.power(ops.constant(b1, v.dtype), t))
        s_hat = new_s / (1 - ops.power(ops.constant(b2, v.dtype), t))
        r = m_hat / (ops.sqrt(s_hat) + self.eps)
        lr = self._lr(v)
        if excluded:
            step = r * lr
        else:
            if self.weight_decay:
                r = r + v * self.weight_decay
            w_norm, r_norm = _norm(v), _norm(r)
            step = r * (_ratio(w_norm, r_norm, w_norm, r_norm) * lr)
        return [(m, new_m), (s, new_s), (v, v - step)]


class GradientAccumulator:
    """Sums values over micro-batches in variables, for a batch larger than one call takes.

    Make it once with the variables (or any arrays/nodes) whose gradients it sums; then
    compile two steps from the same micro-batch graph (gradients `grads` of a loss scaled
    for the whole accumulated batch, e.g. its sum divided by the global batch size)::

        acc = ng.optimizers.GradientAccumulator(params)
        micro = rt.computation(loss, x, y, updates=acc.add(grads))
        total = [ng.allreduce(g, "sum") for g in acc.total(grads)]
        final = rt.computation(loss, x, y,
                               updates=opt.updates(loss, params, grads=total) + acc.reset())

    and call `micro` for the first k - 1 micro-batches and `final` for the k-th: `add`
    adds each micro-batch's values into the buffers in place, without communicating;
    `total` is buffer + the k-th micro-batch's values, summed across ranks once by the
    final step's allreduce, which then updates and clears the buffers. The result equals
    one step on the k micro-batches together (up to the order of the float sums).
    """

    def __init__(self, like: Sequence, name: str = "accumulated") -> None:
        self.buffers: list[Variable] = []
        for i, x in enumerate(like):
            shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
            if shape is None or dtype is None:
                raise NgraphTypeError(f"[GradientAccumulator] like[{i}] ({x!r}) has no shape "
                                      "and dtype: pass variables, nodes or arrays")
            label = getattr(x, "name", "") or f"value{i}"
            self.buffers.append(variable(np.zeros(tuple(shape), np.dtype(dtype)),
                                         name=f"{label}/{name}"))

    def _check(self, values: Sequence[Node], what: str) -> list:
        values = list(values)
        if len(values) != len(self.buffers):
            raise UserInputError(f"[GradientAccumulator.{what}] got {len(values)} values for "
                                 f"{len(self.buffers)} buffers")
        for i, (b, v) in enumerate(zip(self.buffers, values)):
            if not isinstance(v, Node):
                raise NgraphTypeError(f"[GradientAccumulator.{what}] values[{i}] is a "
                                      f"{type(v).__name__}, not a node")
            if list(v.shape) != list(b.shape) or v.dtype != b.dtype:
                raise UserInputError(f"[GradientAccumulator.{what}] values[{i}] is {v.dtype} "
                                     f"{list(v.shape)}; buffer {b.name} is {b.dtype} "
                                     f"{list(b.shape)}")
        return values

    def add(self, values: Sequence[Node]) -> Updates:
        """Update pairs adding `values` into the buffers (a micro-batch's step)."""
        return [(b, b + v) for b, v in zip(self.buffers, self._check(values, "add"))]

    def total(self, values: Sequence[Node]) -> list:
        """The buffers plus `values`: the sums over the micro-batches, the last one's
        `values` included (read in the final step)."""
        return [b + v for b, v in zip(self.buffers, self._check(values, "total"))]

    def reset(self) -> Updates:
        """Update pairs setting the buffers to zero (with the final step's update)."""
        return [(b, ops.broadcast(ops.constant(0, b.dtype), list(b.shape)))
                for b in self.buffers]
