"""ngraph: a deep-learning graph compiler with a C++ core.

Build a graph with the op functions (``ng.parameter``, ``ng.add``, ``ng.dot``, ...) and
Python operators, compile it with ``ng.runtime().computation(...)``, call it with NumPy
arrays. The API follows the Python API of Intel nGraph.
"""

from ngraph import _ngraph
from ngraph._ngraph import Function, Node, get_num_threads, set_num_threads
from ngraph import exceptions
from ngraph.exceptions import (
    CheckpointError,
    DatasetError,
    DistributedError,
    NgraphError,
    NgraphTypeError,
    NumericsError,
    NoGradientError,
    SerializationError,
    UserInputError,
)
from ngraph.ops import (
    absolute,
    acos,
    asin,
    atan,
    add,
    argmax,
    argmin,
    batch_norm,
    avg_pool,
    broadcast,
    broadcast_to,
    ceiling,
    concat,
    constant,
    convolution,
    convolution_backprop_data,
    convolution_backprop_filters,
    convert,
    cos,
    cosh,
    divide,
    dot,
    dropout,
    embedding_lookup,
    equal,
    erf,
    exp,
    floor,
    gather,
    gelu,
    get_output_element,
    global_avg_pool,
    greater,
    greater_eq,
    layer_norm,
    less,
    less_eq,
    log,
    logical_and,
    logical_not,
    logical_or,
    lrn,
    matmul,
    max,
    max_pool,
    maximum,
    min,
    minimum,
    multiply,
    negative,
    not_equal,
    one_hot,
    pad,
    parameter,
    power,
    prod,
    relu,
    replace_slice,
    reshape,
    reverse,
    scatter_add,
    select,
    sigmoid,
    sign,
    sin,
    sinh,
    slice,
    softmax,
    split,
    sqrt,
    stop_gradient,
    subtract,
    sum,
    tan,
    tanh,
    tile,
    topk,
)
from ngraph.fused import (
    clamp,
    depth_to_space,
    dequantize,
    elu,
    fake_quantize,
    gemm,
    grn,
    hard_sigmoid,
    mvn,
    prelu,
    scale_shift,
    shuffle_channels,
    space_to_depth,
    squared_difference,
    squeeze,
    unsqueeze,
)
from ngraph.runtime import Computation, Runtime, backends, cpu_features, runtime
from ngraph.serializer import deserialize, serialize
from ngraph import autodiff, checkpoint, data, datasets, elastic, losses, optimizers, schedules
from ngraph import nn
from ngraph._ngraph import Variable
from ngraph.checkpoint import load, save
from ngraph import impl, profiling, settings, utils
from ngraph.autodiff import gradients
from ngraph.losses import log_softmax, mean, mean_squared_error, softmax_cross_entropy
from ngraph.optimizers import variable
from ngraph.profiling import detect_anomaly, get_check_numerics, set_check_numerics, timeline
from ngraph.visualize import to_dot, visualize

grad = gradients

abs = absolute
ceil = ceiling

__version__ = "0.1.0"

__all__ = [name for name in dir() if not name.startswith("_")]

from ngraph import distributed  # noqa: E402
from ngraph.distributed import (  # noqa: E402
    allgather,
    allreduce,
    broadcast_distributed,
    recv,
    reduce_scatter,
    send,
)

__all__ = [name for name in dir() if not name.startswith("_")]

profiling._start_from_environment()

# ng.<name> for a name of nGraph's API that ngraph does not provide says why.
from ngraph._not_provided import missing_attribute as __getattr__  # noqa: E402
