// All ops of the core.
#pragma once

#include "ngraph/ops/convolution.hpp"
#include "ngraph/ops/dot.hpp"
#include "ngraph/ops/elementwise.hpp"
#include "ngraph/ops/parameter.hpp"
#include "ngraph/ops/pooling.hpp"
#include "ngraph/ops/reduction.hpp"
#include "ngraph/ops/shape_ops.hpp"
#include "ngraph/ops/variable.hpp"
#include "ngraph/ops/collective.hpp"
#include "ngraph/ops/batch_norm.hpp"
#include "ngraph/ops/get_output_element.hpp"
#include "ngraph/ops/indexing.hpp"
#include "ngraph/ops/layer_norm.hpp"
#include "ngraph/ops/random.hpp"
