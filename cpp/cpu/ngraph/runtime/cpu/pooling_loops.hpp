// Max pooling's loops on f32 and bf16 values (pooling_kernels.cpp): included three times
// there, in namespaces compiled for the build's instruction set, AVX2 and AVX-512 (GCC's
// target pragma), so that each copy's vector types (and the lambdas) are lowered for its
// instruction set: always-inline helpers compiled for the build's would split a 16-lane
// compare into scalars before being inlined into an AVX-512 function. No include guard;
// it includes nothing (pooling_kernels.cpp does, before the namespaces: bf16_convert.hpp too).

// Vectors of L lanes (GCC's vector types): f32 values, their bits, bf16 bits.
// (Specialised: GCC drops vector_size on a type that depends on a template parameter.)
template <size_t L>
struct Lanes;
template <>
struct Lanes<8> {
  using f = float __attribute__((vector_size(32)));
  using i = int32_t __attribute__((vector_size(32)));
  using u = uint32_t __attribute__((vector_size(32)));
  using h = uint16_t __attribute__((vector_size(16)));
  // Unaligned, for typed loads and stores (a memcpy store may alias anything, the grid too).
  using fu = float __attribute__((vector_size(32), aligned(4)));
  using iu = int32_t __attribute__((vector_size(32), aligned(4)));
  using hu = uint16_t __attribute__((vector_size(16), aligned(2)));
};
template <>
struct Lanes<16> {
  using f = float __attribute__((vector_size(64)));
  using i = int32_t __attribute__((vector_size(64)));
  using u = uint32_t __attribute__((vector_size(64)));
  using h = uint16_t __attribute__((vector_size(32)));
  // Unaligned, for typed loads and stores (a memcpy store may alias anything, the grid too).
  using fu = float __attribute__((vector_size(64), aligned(4)));
  using iu = int32_t __attribute__((vector_size(64), aligned(4)));
  using hu = uint16_t __attribute__((vector_size(32), aligned(2)));
};

// The loops, written once with GCC's vector types and always inlined into the entry points
// below, so that each is compiled for its caller's instruction set (the build's, or the AVX2
// and AVX-512 twins). L lanes, N vectors per cell (a block of L * N channels); L == 0: one
// lane (plain). Values are loaded as f32 from f32 or bf16 and stored as f32 or bf16; vectors
// are only passed by reference (no ABI change between the twins).

// bf16 bits of an f32: rounded to nearest even (bf16_convert.hpp's f32_to_bf16: denormals to
// signed zero, NaN kept quiet, the fused loops' and oneDNN's conversion), or, for a value that
// was loaded from bf16 (`exact`), its upper half.
NGRAPH_POOL_LOOP bf16_bits to_bf16(float v, bool exact) {
  return exact ? static_cast<bf16_bits>(__builtin_bit_cast(uint32_t, v) >> 16) : f32_to_bf16(v);
}
NGRAPH_POOL_LOOP float load1(const float* p) { return *p; }
NGRAPH_POOL_LOOP float load1(const bf16_bits* p) { return __builtin_bit_cast(float, static_cast<uint32_t>(*p) << 16); }
NGRAPH_POOL_LOOP void store1(float* p, float v, bool) { *p = v; }
NGRAPH_POOL_LOOP void store1(bf16_bits* p, float v, bool exact) { *p = to_bf16(v, exact); }

template <size_t L>
NGRAPH_POOL_LOOP void loadv(typename Lanes<L>::f& v, const float* p) {
  v = *reinterpret_cast<const typename Lanes<L>::fu*>(p);
}
template <size_t L>
NGRAPH_POOL_LOOP void loadv(typename Lanes<L>::f& v, const bf16_bits* p) {
  typename Lanes<L>::h b = *reinterpret_cast<const typename Lanes<L>::hu*>(p);
  typename Lanes<L>::u w = __builtin_convertvector(b, typename Lanes<L>::u) << 16;
  v = reinterpret_cast<typename Lanes<L>::f>(w);
}
template <size_t L>
NGRAPH_POOL_LOOP void storev(float* p, const typename Lanes<L>::f& v, bool) {
  *reinterpret_cast<typename Lanes<L>::fu*>(p) = v;
}
template <size_t L>
NGRAPH_POOL_LOOP void storev(bf16_bits* p, const typename Lanes<L>::f& v, bool exact) {
  using U = typename Lanes<L>::u;
  U w = reinterpret_cast<U>(v), r = w >> 16;
  if (!exact) {
    r = (w + 0x7fffu + ((w >> 16) & 1u)) >> 16;
    r = (w & 0x7fffffffu) > 0x7f800000u ? (w >> 16) | 0x40u : r;
    r = (w & 0x7f800000u) == 0 ? (w >> 16) & 0x8000u : r;
  }
  *reinterpret_cast<typename Lanes<L>::hu*>(p) = __builtin_convertvector(r, typename Lanes<L>::h);
}

// f(offset in the plane) for each data cell of the window at output position (a, b, c), in
// row-major order. The lambdas passed are always inlined too (NGRAPH_POOL_LAMBDA).
template <typename F>
NGRAPH_POOL_LOOP void for_each_window_cell(const Grid& g, size_t a, size_t b, size_t c, F&& f) {
  auto [d0, d1] = g.cells[0][a];
  auto [h0, h1] = g.cells[1][b];
  auto [w0, w1] = g.cells[2][c];
  for (size_t d = d0; d < d1; ++d)
    for (size_t h = h0; h < h1; ++h)
      for (size_t w = w0; w < w1; ++w) f((d * g.in[1] + h) * g.in[2] + w);
}

// f(plane, a, b, c, o) for every output cell o at window position (a, b, c) of its plane.
template <typename F>
NGRAPH_POOL_LOOP void for_each_output(const Grid& g, F&& f) {
  size_t o = 0;
  for (size_t plane = 0; plane < g.planes; ++plane)
    for (size_t a = 0; a < g.out[0]; ++a)
      for (size_t b = 0; b < g.out[1]; ++b)
        for (size_t c = 0; c < g.out[2]; ++c, ++o) f(plane, a, b, c, o);
}

// y and the workspace (the first maximum's offset in the plane, NaN first) of each window.
template <size_t L, size_t N, typename TX, typename TY>
NGRAPH_POOL_LOOP void max_forward_loop(const Grid& g, const TX* x, TY* y, int32_t* ws) {
  constexpr size_t B = L * N;
  constexpr bool exact = std::is_same_v<TX, bf16_bits>;  // a maximum of bf16 values is one
  using F = typename Lanes<L>::f;
  using I = typename Lanes<L>::i;
  size_t o = 0;
  for (size_t plane = 0; plane < g.planes; ++plane) {
    const TX* xp = x + plane * g.in_plane() * B;
    for (size_t a = 0; a < g.out[0]; ++a)
      for (size_t b = 0; b < g.out[1]; ++b)
        for (size_t c = 0; c < g.out[2]; ++c, ++o) {
          F acc[N];
          I best[N];
          for (size_t k = 0; k < N; ++k) {
            acc[k] = F{} - std::numeric_limits<float>::infinity();
            best[k] = I{} - 1;
          }
          for_each_window_cell(g, a, b, c, [&](size_t s) NGRAPH_POOL_LAMBDA {
            I sv = I{} + static_cast<int32_t>(s);
            for (size_t k = 0; k < N; ++k) {
              F v;
              loadv<L>(v, xp + s * B + L * k);
              I take = ~(v <= acc[k]) & (acc[k] == acc[k]);  // greater, or v NaN and acc not
              acc[k] = take ? v : acc[k];
              best[k] = take ? sv : best[k];
            }
          });
          for (size_t k = 0; k < N; ++k) {
            storev<L>(y + o * B + L * k, acc[k], exact);
            *reinterpret_cast<typename Lanes<L>::iu*>(ws + o * B + L * k) = best[k];
          }
        }
  }
}

template <typename TX, typename TY>
NGRAPH_POOL_LOOP void max_forward_plain(const Grid& g, const TX* x, TY* y, int32_t* ws) {
  constexpr bool exact = std::is_same_v<TX, bf16_bits>;
  for_each_output(g, [&](size_t plane, size_t a, size_t b, size_t c, size_t o) NGRAPH_POOL_LAMBDA {
    const TX* xp = x + plane * g.in_plane();
    float acc = -std::numeric_limits<float>::infinity();
    int32_t best = -1;
    for_each_window_cell(g, a, b, c, [&](size_t s) NGRAPH_POOL_LAMBDA {
      float v = load1(xp + s);
      if (v > acc || (v != v && acc == acc)) {
        acc = v;
        best = static_cast<int32_t>(s);
      }
    });
    store1(y + o, acc, exact);
    ws[o] = best;
  });
}

// Windows that share no cell: each data cell takes its window's delta or zero, written once
// (0 + delta: the sum's bits); cells in no window are zeroed first.
template <size_t L, size_t N, typename TD, typename TDX>
NGRAPH_POOL_LOOP void max_backward_disjoint(const Grid& g, const TD* delta, const int32_t* ws, TDX* dx) {
  constexpr size_t B = L * N;
  constexpr bool exact = std::is_same_v<TD, bf16_bits>;
  using F = typename Lanes<L>::f;
  using I = typename Lanes<L>::i;
  if (!g.covers) std::memset(dx, 0, g.planes * g.in_plane() * B * sizeof(TDX));
  for_each_output(g, [&](size_t plane, size_t a, size_t b, size_t c, size_t o) NGRAPH_POOL_LAMBDA {
    TDX* dp = dx + plane * g.in_plane() * B;
    F dv[N];
    I wv[N];
    for (size_t k = 0; k < N; ++k) {
      loadv<L>(dv[k], delta + o * B + L * k);
      wv[k] = *reinterpret_cast<const typename Lanes<L>::iu*>(ws + o * B + L * k);
    }
    for_each_window_cell(g, a, b, c, [&](size_t s) NGRAPH_POOL_LAMBDA {
      I sv = I{} + static_cast<int32_t>(s);
      for (size_t k = 0; k < N; ++k) {
        F v = F{} + reinterpret_cast<F>(reinterpret_cast<I>(dv[k]) & (wv[k] == sv));
        storev<L>(dp + s * B + L * k, v, exact);
      }
    });
  });
}

// Overlapping windows: acc = 0, then each delta added at its window's maximum (f32 sums).
template <size_t L, size_t N, typename TD>
NGRAPH_POOL_LOOP void max_backward_sum(const Grid& g, const TD* delta, const int32_t* ws, float* acc) {
  constexpr size_t B = L * N;
  using F = typename Lanes<L>::f;
  using I = typename Lanes<L>::i;
  std::memset(acc, 0, g.planes * g.in_plane() * B * sizeof(float));
  for_each_output(g, [&](size_t plane, size_t a, size_t b, size_t c, size_t o) NGRAPH_POOL_LAMBDA {
    float* dp = acc + plane * g.in_plane() * B;
    F dv[N];
    I wv[N];
    for (size_t k = 0; k < N; ++k) {
      loadv<L>(dv[k], delta + o * B + L * k);
      wv[k] = *reinterpret_cast<const typename Lanes<L>::iu*>(ws + o * B + L * k);
    }
    for_each_window_cell(g, a, b, c, [&](size_t s) NGRAPH_POOL_LAMBDA {
      I sv = I{} + static_cast<int32_t>(s);
      for (size_t k = 0; k < N; ++k) {
        F v;
        loadv<L>(v, dp + s * B + L * k);
        v += reinterpret_cast<F>(reinterpret_cast<I>(dv[k]) & (wv[k] == sv));
        storev<L>(dp + s * B + L * k, v, false);
      }
    });
  });
}

template <typename TD, typename TDX>
NGRAPH_POOL_LOOP void max_backward_plain(const Grid& g, const TD* delta, const int32_t* ws, TDX* dx, float* acc) {
  constexpr bool exact = std::is_same_v<TD, bf16_bits>;
  size_t n = g.planes * g.in_plane();
  if (g.disjoint && !g.covers) std::memset(dx, 0, n * sizeof(TDX));
  if (!g.disjoint) std::memset(acc, 0, n * sizeof(float));
  for_each_output(g, [&](size_t plane, size_t a, size_t b, size_t c, size_t o) NGRAPH_POOL_LAMBDA {
    size_t base = plane * g.in_plane();
    float d = load1(delta + o);
    if (!g.disjoint) {
      if (ws[o] >= 0) acc[base + static_cast<size_t>(ws[o])] += d;
      return;
    }
    for_each_window_cell(g, a, b, c, [&](size_t s) NGRAPH_POOL_LAMBDA {
      store1(dx + base + s, 0.0f + (ws[o] == static_cast<int32_t>(s) ? d : 0.0f), exact);
    });
  });
  if (!g.disjoint && !std::is_same_v<TDX, float>)
    for (size_t j = 0; j < n; ++j) store1(dx + j, acc[j], false);
}

// dx from delta and the workspace. `acc`: f32 sums of overlapping windows (dx itself when it
// is f32), then rounded to bf16.
template <size_t L, size_t N, typename TD, typename TDX>
NGRAPH_POOL_LOOP void max_backward_loop(const Grid& g, const TD* delta, const int32_t* ws, TDX* dx, float* acc) {
  if constexpr (L == 0) {
    max_backward_plain(g, delta, ws, dx, std::is_same_v<TDX, float> ? reinterpret_cast<float*>(dx) : acc);
  } else if (g.disjoint) {
    max_backward_disjoint<L, N>(g, delta, ws, dx);
  } else if constexpr (std::is_same_v<TDX, float>) {
    max_backward_sum<L, N>(g, delta, ws, dx);
  } else {
    max_backward_sum<L, N>(g, delta, ws, acc);
    size_t n = g.planes * g.in_plane() * L * N;
    for (size_t j = 0; j < n; j += L) {
      typename Lanes<L>::f v;
      loadv<L>(v, acc + j);
      storev<L>(dx + j, v, false);
    }
  }
}

template <size_t L, size_t N, typename TX, typename TY>
NGRAPH_POOL_LOOP void max_forward_any(const Grid& g, const void* x, void* y, int32_t* ws) {
  if constexpr (L == 0)
    max_forward_plain(g, static_cast<const TX*>(x), static_cast<TY*>(y), ws);
  else
    max_forward_loop<L, N>(g, static_cast<const TX*>(x), static_cast<TY*>(y), ws);
}

template <size_t L, size_t N, typename TX, typename TY>
void max_forward(const Grid& g, const void* x, void* y, int32_t* ws) {
  max_forward_any<L, N, TX, TY>(g, x, y, ws);
}
template <size_t L, size_t N, typename TD, typename TDX>
void max_backward(const Grid& g, const void* d, const int32_t* ws, void* dx, float* acc) {
  max_backward_loop<L, N>(g, static_cast<const TD*>(d), ws, static_cast<TDX*>(dx), acc);
}
