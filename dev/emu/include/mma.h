// Shim for host emulation (dev/emu): the subset of CUDA's WMMA API (nvcuda::wmma) that
// tensor-core kernels written with bf16 inputs and fp32 accumulation use:
//   fragment<matrix_a | matrix_b, M, N, K, __nv_bfloat16, row_major | col_major>
//   fragment<accumulator, M, N, K, float>          (M x N x K = 16x16x16, 32x8x16, 8x32x16)
//   load_matrix_sync, store_matrix_sync (mem_row_major | mem_col_major), fill_fragment,
//   mma_sync.
// It checks the LOGIC of such code (tiling, indices, strides, layouts, masks, the
// bookkeeping around the products, synchronisation), NOT the tensor cores' arithmetic: a
// product is computed as fp32 sums of exact bf16 x bf16 products in a fixed order
// (d = c; d += a[i][0] b[0][j]; ... ; d += a[i][K-1] b[K-1][j]), which is not the
// hardware's (unspecified) accumulation order or internal rounding. Compare with
// bf16-level tolerances. See dev/emu/README.md.
//
// Model
//   * Every fragment operation is a warp collective, like a shuffle: the 32 lanes of the
//     warp must all be alive and at the same call site, or it is an error. The pointer,
//     ldm, layout (and the fill value) must be the same in all lanes (it is undefined
//     behaviour on the GPU otherwise).
//   * Every lane holds a full copy of each fragment (the hardware's element-to-lane
//     mapping is unspecified, so portable code never depends on it; per-element access
//     through x[] / num_elements is not provided and the transform rejects it).
//   * Memory is touched the way the hardware's per-lane pieces would touch it, so that
//     a missing __syncwarp shows: load_matrix_sync reads lane l's share of the tile
//     (elements e with e % 32 == l, e = row * cols + col) when lane l ARRIVES, before the
//     other lanes have necessarily run; store_matrix_sync writes lane l's share when lane
//     l LEAVES, so lanes that run later see it only after a __syncwarp/__syncthreads.
//   * Checked as the CUDA documentation requires: pointers 256-bit (32-byte) aligned,
//     ldm a multiple of 16 bytes (8 bf16 elements, 4 floats).
//   * Fragments start poisoned (NaN), so using one before fill/load/mma shows up.
#pragma once
#define EMU_SHIM_MMA 1
#include "cuda_runtime.h"
#include "cuda_bf16.h"
#include <type_traits>

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K> struct emu_dims;
template <int M, int N, int K> struct emu_dims<matrix_a, M, N, K> { static const int rows = M, cols = K; };
template <int M, int N, int K> struct emu_dims<matrix_b, M, N, K> { static const int rows = K, cols = N; };
template <int M, int N, int K> struct emu_dims<accumulator, M, N, K> { static const int rows = M, cols = N; };

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
    static_assert((M == 16 && N == 16 && K == 16) || (M == 32 && N == 8 && K == 16) || (M == 8 && N == 32 && K == 16),
                  "dev/emu wmma shim: only the m16n16k16, m32n8k16 and m8n32k16 shapes are emulated");
    static_assert(std::is_same<Use, accumulator>::value ? std::is_same<T, float>::value && std::is_void<Layout>::value
                                                        : std::is_same<T, __nv_bfloat16>::value &&
                                                              (std::is_same<Layout, row_major>::value ||
                                                               std::is_same<Layout, col_major>::value),
                  "dev/emu wmma shim: only bf16 matrix_a/matrix_b fragments with a row_major/col_major layout and "
                  "float accumulators (no layout) are emulated");

   public:
    typedef Use emu_use;
    typedef T emu_type;
    typedef Layout emu_layout;
    static const int emu_rows = emu_dims<Use, M, N, K>::rows, emu_cols = emu_dims<Use, M, N, K>::cols;
    static const int emu_n = emu_rows * emu_cols;
    T emu_v[emu_n];  // row-major [emu_rows][emu_cols], the whole fragment in every lane
    fragment() { memset((void*)emu_v, 0xFF, sizeof emu_v); }  // poison: NaN in bf16 and fp32
};

namespace emu_impl {
// what a lane deposits (by address) at a fragment collective
struct Op {
    void* frag;         // this lane's fragment (destination of load / fill / mma)
    const void* a;      // mma: a, b, c fragments; store: the source fragment
    const void* b;
    const void* c;
    const void* mem;    // load / store: the matrix in memory
    unsigned ldm;
    int col_major;      // memory layout of load / store
    float value;        // fill
};

inline const Op& op_of(const uint64_t* dep, int lane) { return *(const Op*)(uintptr_t)dep[lane]; }

// the arguments of all 32 lanes must agree (UB on the GPU otherwise), and the memory
// operand must satisfy the documented alignment rules
inline void check_uniform(const uint64_t* dep, const char* what, const char* file, int line, bool mem, size_t elt) {
    const Op& o0 = op_of(dep, 0);
    for (int l = 1; l < 32; l++) {
        const Op& o = op_of(dep, l);
        if (o.mem != o0.mem || o.ldm != o0.ldm || o.col_major != o0.col_major || memcmp(&o.value, &o0.value, 4) != 0)
            ::emu::error("%s at %s:%d: lane %d passes other arguments (ptr %p, ldm %u, layout %d) than lane 0 "
                         "(ptr %p, ldm %u, layout %d): the arguments must be warp-uniform", what, file, line, l, o.mem,
                         o.ldm, o.col_major, o0.mem, o0.ldm, o0.col_major);
    }
    if (!mem) return;
    if ((uintptr_t)o0.mem % 32 != 0)
        ::emu::error("%s at %s:%d: pointer %p is not 256-bit (32-byte) aligned, as wmma requires", what, file, line,
                     o0.mem);
    if ((o0.ldm * elt) % 16 != 0)
        ::emu::error("%s at %s:%d: ldm = %u elements of %zu bytes is not a multiple of 16 bytes, as wmma requires", what,
                     file, line, o0.ldm, elt);
}

template <class Frag>
inline size_t mem_index(int e, unsigned ldm, int col_major) {
    int r = e / Frag::emu_cols, c = e % Frag::emu_cols;
    return col_major ? (size_t)c * ldm + r : (size_t)r * ldm + c;
}

template <class Frag>
inline void load(Frag& f, const typename Frag::emu_type* p, unsigned ldm, int col_major, const char* what,
                 const char* file, int line) {
    int lane = ::emu::cur_fiber & 31;
    // this lane's share, read now (before the other lanes necessarily ran)
    for (int e = lane; e < Frag::emu_n; e += 32) f.emu_v[e] = p[mem_index<Frag>(e, ldm, col_major)];
    Op op{&f, nullptr, nullptr, nullptr, p, ldm, col_major, 0.0f};
    ::emu::warp_collective(0xffffffffu, (uint64_t)(uintptr_t)&op, what, file, line, [](int l) { return l; },
                           [&](const uint64_t* dep) {
                               check_uniform(dep, what, file, line, true, sizeof(typename Frag::emu_type));
                               typename Frag::emu_type full[Frag::emu_n];
                               for (int e = 0; e < Frag::emu_n; e++) full[e] = ((Frag*)op_of(dep, e % 32).frag)->emu_v[e];
                               for (int l = 0; l < 32; l++) memcpy(((Frag*)op_of(dep, l).frag)->emu_v, full, sizeof full);
                           });
}

template <class Frag>
inline void store(float* p, const Frag& f, unsigned ldm, int col_major, const char* what, const char* file, int line) {
    Op op{nullptr, &f, nullptr, nullptr, p, ldm, col_major, 0.0f};
    ::emu::warp_collective(0xffffffffu, (uint64_t)(uintptr_t)&op, what, file, line, [](int l) { return l; },
                           [&](const uint64_t* dep) {
                               check_uniform(dep, what, file, line, true, sizeof(float));
                               const Frag* f0 = (const Frag*)op_of(dep, 0).a;
                               for (int l = 1; l < 32; l++)
                                   if (memcmp(((const Frag*)op_of(dep, l).a)->emu_v, f0->emu_v, sizeof f0->emu_v) != 0)
                                       ::emu::error("%s at %s:%d: the lanes' fragments differ (emulator invariant)",
                                                    what, file, line);
                           });
    // this lane's share, written now (lanes that run before it do not see it)
    int lane = ::emu::cur_fiber & 31;
    for (int e = lane; e < Frag::emu_n; e += 32) p[mem_index<Frag>(e, ldm, col_major)] = f.emu_v[e];
}
}  // namespace emu_impl

#define EMU_WMMA_FRAG(Use, L) fragment<Use, M, N, K, T, L>

// matrix_a / matrix_b: the layout is the fragment's
template <class Use, int M, int N, int K, class T, class L>
inline void emu_load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const T* p, unsigned ldm, const char* file, int line) {
    static_assert(!std::is_same<Use, accumulator>::value, "load_matrix_sync of an accumulator needs a layout_t");
    emu_impl::load(f, p, ldm, std::is_same<L, col_major>::value, "wmma::load_matrix_sync", file, line);
}
// accumulator: the layout is an argument
template <int M, int N, int K>
inline void emu_load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ldm, layout_t layout,
                                 const char* file, int line) {
    emu_impl::load(f, p, ldm, layout == mem_col_major, "wmma::load_matrix_sync", file, line);
}
template <int M, int N, int K>
inline void emu_store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t layout,
                                  const char* file, int line) {
    emu_impl::store(p, f, ldm, layout == mem_col_major, "wmma::store_matrix_sync", file, line);
}

template <class Use, int M, int N, int K, class T, class L>
inline void emu_fill_fragment(fragment<Use, M, N, K, T, L>& f, float v, const char* file, int line) {
    for (int e = 0; e < fragment<Use, M, N, K, T, L>::emu_n; e++) f.emu_v[e] = (T)v;
    emu_impl::Op op{&f, nullptr, nullptr, nullptr, nullptr, 0, 0, v};
    ::emu::warp_collective(0xffffffffu, (uint64_t)(uintptr_t)&op, "wmma::fill_fragment", file, line,
                           [](int l) { return l; }, [&](const uint64_t* dep) {
                               emu_impl::check_uniform(dep, "wmma::fill_fragment", file, line, false, 0);
                           });
}

// d = a b + c, fp32 accumulation of exact bf16 products in the fixed order k = 0 .. K-1,
// computed once per warp (every lane's fragments are identical) and given to every lane
template <int M, int N, int K, class LA, class LB>
inline void emu_mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, __nv_bfloat16, LA>& a,
                         const fragment<matrix_b, M, N, K, __nv_bfloat16, LB>& b,
                         const fragment<accumulator, M, N, K, float>& c, const char* file, int line) {
    typedef fragment<accumulator, M, N, K, float> FC;
    typedef fragment<matrix_a, M, N, K, __nv_bfloat16, LA> FA;
    typedef fragment<matrix_b, M, N, K, __nv_bfloat16, LB> FB;
    emu_impl::Op op{&d, &a, &b, &c, nullptr, 0, 0, 0.0f};
    ::emu::warp_collective(0xffffffffu, (uint64_t)(uintptr_t)&op, "wmma::mma_sync", file, line, [](int l) { return l; },
                           [&](const uint64_t* dep) {
                               const emu_impl::Op& o = emu_impl::op_of(dep, 0);
                               const FA& A = *(const FA*)o.a;
                               const FB& B = *(const FB*)o.b;
                               const FC& C = *(const FC*)o.c;
                               float res[M * N];
                               for (int i = 0; i < M; i++)
                                   for (int j = 0; j < N; j++) {
                                       float acc = C.emu_v[i * N + j];
                                       for (int k = 0; k < K; k++)
                                           acc += (float)A.emu_v[i * K + k] * (float)B.emu_v[k * N + j];
                                       res[i * N + j] = acc;
                                   }
                               for (int l = 0; l < 32; l++) memcpy(((FC*)emu_impl::op_of(dep, l).frag)->emu_v, res, sizeof res);
                           });
}

}  // namespace wmma
}  // namespace nvcuda

// call sites are recorded (file:line) like those of the other warp collectives
#define load_matrix_sync(...) emu_load_matrix_sync(__VA_ARGS__, __FILE__, __LINE__)
#define store_matrix_sync(...) emu_store_matrix_sync(__VA_ARGS__, __FILE__, __LINE__)
#define fill_fragment(...) emu_fill_fragment(__VA_ARGS__, __FILE__, __LINE__)
#define mma_sync(...) emu_mma_sync(__VA_ARGS__, __FILE__, __LINE__)
