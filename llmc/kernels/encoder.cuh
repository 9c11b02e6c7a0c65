/*
Token embedding lookup and its backward. CPU twin: llmc/kernels/cpu/encoder.h.

Both work on a vocabulary range (the vocab-parallel embedding, --shard-vocab 1 --tp N):
wte/dwte point at rows v0 ... v0 + n - 1 of the table (row 0 = token v0); a token in the
range reads/updates its row, a token outside it gives a row of zeros in the forward and
nothing in the backward. encoder_forward / encoder_backward are the range versions with
v0 = 0 and n = INT_MAX (every token in range): one kernel each, not two.

Why the backward looks the way it does: the same token appears many times in a
batch, so dwte[token] receives many rows of dout. Float atomics would make the sum
order (and so the result) change from run to run; resume and offload must stay
bit-exact, so the backward is deterministic. It also accumulates every
(token, channel) sum in fp32 and rounds to floatX once, instead of rounding after
each of the (possibly hundreds of) additions into a bf16 gradient.

Up to ENC_SORT_MAX tokens (llama3-1B's 8,192 a micro-batch, stories110M's 16,384), the
tokens are grouped by id on the device, into a static __device__ array of positions
(64 KB; no allocation, the launcher's signature unchanged; like the tile kernels' static
int below, it means two encoder_backward calls must not run concurrently on two streams):
  1. encoder_rank_kernel: each position i gets the rank of (row, i) among all N
     tokens, rows outside the range counted as INT_MAX (so they come last), by counting
     the smaller keys (an O(N^2) count of integers from shared memory: ~67M compares at
     N = 8192, a few microseconds); encoder_sorted[rank] = i. The keys are distinct, so
     this is a permutation, and positions of one token are in increasing order.
  2. encoder_group_kernel: block k (of N) owns sorted entry k if it starts a group of
     equal rows in the range (else it exits); its threads each take a unit of channels
     (a 16-byte chunk when D and the pointers allow, else one channel), start from dwte's
     value and add the group's dout rows in position order (loads of 8 rows issued before
     their additions), rounding once. The same additions in the same order as the tile
     kernel below and the CPU twin: deterministic, bit-equal in fp32.
  Cost: dout read once, each touched row of dwte read and written once; no scan of the
  vocabulary. A very frequent token is summed by one block (300 rows of 4 KB: ~40 us,
  overlapped with the other groups).
Predicted at llama3-1B (N = 8192, D = 2048, V = 128256, bf16) on the H200: the tile
kernel measured 0.88 ms (embedding forward and backward together; its 4,008 tiles of 32
rows each scan all 8,192 token ids); the grouped backward moves ~60 MB (dout 33.6 MB, the
touched rows of dwte read and written) at 2-3 TB/s: 20-30 us, plus ~5 us of ranks: the
backward ~0.03-0.04 ms, the embedding group ~0.1 ms with the forward.

More tokens (the launcher has no vocabulary size and no scratch for them):
  1. encoder_max_token_kernel (one block) finds the largest row (token - v0) that a
     token in the range hits (-1: none) and leaves it in a static __device__ int;
  2. encoder_backward_kernel: blockIdx.y picks ENC_CT channels (one thread each);
     the block walks tiles of ENC_VT rows of the range (tile = blockIdx.x, +gridDim.x,
     ... up to that largest row). For each tile it scans all N tokens in order,
     chunk by chunk, compacts the positions whose token falls in the tile (order
     kept: ballot + prefix count), and each thread adds those rows of dout to its
     channel of an fp32 accumulator in shared memory. A row's accumulator starts
     from the current dwte value the first time the row is hit, and is written
     back once at the end, only for rows that were hit. Every (token, channel) is
     summed by one thread in token order: deterministic, and in fp32 builds the
     same additions in the same order as the CPU twin.
Cost: every (vocab tile, channel block) pair scans the N token ids (cheap, from L2);
each row of dout is read once. The two kernels run in order on the stream; the
static int means two encoder_backward calls must not run concurrently on
different streams.
*/
#pragma once
#include <limits.h>
#include "../core/common.h"

// out[N, D] = wte[tokens[i] - v0] for tokens in [v0, v0 + n), zeros otherwise: one thread
// per element, grid-stride. tokens[i] - v0 cannot overflow (token ids and v0 are >= 0).
__global__ void encoder_forward_kernel(floatX* out, const int* tokens, const floatX* wte, int N, int D, int v0, int n) {
    size_t total = (size_t)N * D;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
        size_t i = idx / D, c = idx % D;
        int r = tokens[i] - v0;
        out[idx] = r >= 0 && r < n ? wte[(size_t)r * D + c] : (floatX)0.0f;
    }
}

static inline void encoder_forward_range(floatX* out, const int* tokens, const floatX* wte, int N, int D, int v0, int n,
                                         stream_t s) {
    if (N <= 0 || D <= 0) return;
    if (v0 < 0 || n < 0) FAIL("encoder_forward_range: range v0 = %d, n = %d", v0, n);
    const int block = 256;
    size_t blocks = ceil_div((size_t)N * D, block);
    if (blocks > 65536) blocks = 65536;
    encoder_forward_kernel<<<(unsigned)blocks, block, 0, s>>>(out, tokens, wte, N, D, v0, n);
    cudaCheck(cudaGetLastError());
}

static inline void encoder_forward(floatX* out, const int* tokens, const floatX* wte, int N, int D, stream_t s) {
    encoder_forward_range(out, tokens, wte, N, D, 0, INT_MAX, s);
}

#define ENC_VT 32    // vocabulary rows per tile: one bit each in a 32-bit mask
#define ENC_CT 256   // channels per block = threads per block (multiple of 32)
#define ENC_GRID_X 256  // blocks along the vocabulary; each walks tiles blockIdx.x + k * ENC_GRID_X

static __device__ int encoder_max_token_dev;

// one block of 1024 threads: the largest row token - v0 of a token in [v0, v0 + n) (-1:
// none), left in encoder_max_token_dev
__global__ void __launch_bounds__(1024) encoder_max_token_kernel(const int* tokens, int N, int v0, int n) {
    __shared__ int wmax[32];
    int mx = -1;
    for (int i = threadIdx.x; i < N; i += blockDim.x) {
        int r = tokens[i] - v0;
        if (r >= 0 && r < n) mx = max(mx, r);
    }
    for (int off = 16; off > 0; off >>= 1) mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    if ((threadIdx.x & 31) == 0) wmax[threadIdx.x >> 5] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        int m = -1;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) m = max(m, wmax[w]);
        encoder_max_token_dev = m;
    }
}

__global__ void __launch_bounds__(ENC_CT) encoder_backward_kernel(floatX* dwte, const floatX* dout, const int* tokens,
                                                                  int N, int D, int v0, int n) {
    __shared__ float acc[ENC_VT][ENC_CT];  // acc[v][tid]: only thread tid touches column tid
    __shared__ int pos[ENC_CT];            // positions i of this chunk whose token is in the tile, in order
    __shared__ int row[ENC_CT];            // and their row - r0
    __shared__ int wcount[ENC_CT / 32];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int c = blockIdx.y * ENC_CT + tid;
    const bool has_c = c < D;
    const int max_row = encoder_max_token_dev;
    if (max_row < 0) return;  // uniform across the grid
    const int n_tiles = max_row / ENC_VT + 1;
    for (int tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const int r0 = tile * ENC_VT;
        uint32_t touched = 0;  // bit v: row r0 + v has been loaded into acc[v]
        for (int base = 0; base < N; base += ENC_CT) {
            int i = base + tid;
            int r = i < N ? tokens[i] - v0 : -1;  // the token's row in the range (< 0 or >= n: not in it)
            bool in = r >= r0 && r - r0 < ENC_VT && r < n;
            uint32_t mask = __ballot_sync(0xffffffffu, in);
            if (lane == 0) wcount[warp] = __popc(mask);
            __syncthreads();
            int offset = 0, total = 0;
            for (int w = 0; w < ENC_CT / 32; w++) {
                if (w < warp) offset += wcount[w];
                total += wcount[w];
            }
            if (in) {
                int slot = offset + __popc(mask & ((1u << lane) - 1u));
                pos[slot] = i;
                row[slot] = r - r0;
            }
            __syncthreads();
            if (has_c) {
                for (int k = 0; k < total; k++) {
                    int ii = pos[k], v = row[k];
                    if (!((touched >> v) & 1u)) {
                        acc[v][tid] = (float)dwte[(size_t)(r0 + v) * D + c];
                        touched |= 1u << v;
                    }
                    acc[v][tid] += (float)dout[(size_t)ii * D + c];
                }
            }
            __syncthreads();  // pos and wcount are rewritten by the next chunk
        }
        if (has_c)
            for (int v = 0; v < ENC_VT; v++)
                if ((touched >> v) & 1u) dwte[(size_t)(r0 + v) * D + c] = (floatX)acc[v][tid];
    }
}

// the tile kernels, for any N (dev/cuda/encoder.cu's version 2)
static inline void encoder_backward_tiles(floatX* dwte, const floatX* dout, const int* tokens, int N, int D, int v0,
                                          int n, stream_t s) {
    encoder_max_token_kernel<<<1, 1024, 0, s>>>(tokens, N, v0, n);
    cudaCheck(cudaGetLastError());
    dim3 grid(ENC_GRID_X, (unsigned)ceil_div((size_t)D, ENC_CT));
    encoder_backward_kernel<<<grid, ENC_CT, 0, s>>>(dwte, dout, tokens, N, D, v0, n);
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------
// the grouped backward (N <= ENC_SORT_MAX)
#define ENC_SORT_MAX 16384
#define ENC_RANK_I 32       // positions a rank block owns (threadIdx.x)
#define ENC_RANK_J 8        // slices of the other positions (threadIdx.y), partial counts added after
#define ENC_RANK_TILE 2048  // token rows staged in shared memory at a time
#define ENC_VEC (16 / (int)sizeof(floatX))
#define ENC_GROUP_THREADS 256
#define ENC_UNROLL 8
struct alignas(16) EncChunk { floatX v[ENC_VEC]; };

static __device__ int encoder_sorted[ENC_SORT_MAX];

// token i's row in the range, INT_MAX outside it
static __device__ __forceinline__ int enc_key(const int* tokens, int i, int v0, int n) {
    int r = tokens[i] - v0;
    return r >= 0 && r < n ? r : INT_MAX;
}

__global__ void __launch_bounds__(ENC_RANK_I * ENC_RANK_J) encoder_rank_kernel(const int* tokens, int N, int v0, int n) {
    __shared__ int tile[ENC_RANK_TILE];
    __shared__ int part[ENC_RANK_J][ENC_RANK_I];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * ENC_RANK_I + tx;
    const int i = blockIdx.x * ENC_RANK_I + tx;
    const int ki = i < N ? enc_key(tokens, i, v0, n) : INT_MAX;
    int rank = 0;
    for (int j0 = 0; j0 < N; j0 += ENC_RANK_TILE) {
        const int m = min(ENC_RANK_TILE, N - j0);
        __syncthreads();  // the previous tile is no longer read
        for (int j = tid; j < m; j += ENC_RANK_I * ENC_RANK_J) tile[j] = enc_key(tokens, j0 + j, v0, n);
        __syncthreads();
        for (int j = ty; j < m; j += ENC_RANK_J) {
            int kj = tile[j];
            rank += kj < ki || (kj == ki && j0 + j < i);
        }
    }
    part[ty][tx] = rank;
    __syncthreads();
    if (ty == 0 && i < N) {
        int r = 0;
        for (int y = 0; y < ENC_RANK_J; y++) r += part[y][tx];
        encoder_sorted[r] = i;
    }
}

// VW channels a thread (ENC_VEC: one 16-byte chunk; 1)
template <int VW>
__device__ __forceinline__ void enc_group_body(floatX* dwte, const floatX* dout, const int* tokens, int N, int D, int v0,
                                               int n) {
    __shared__ int pos[ENC_GROUP_THREADS];
    const int k = blockIdx.x;
    const int row = enc_key(tokens, encoder_sorted[k], v0, n);
    if (row == INT_MAX) return;  // outside the range (uniform over the block)
    if (k > 0 && enc_key(tokens, encoder_sorted[k - 1], v0, n) == row) return;  // not the group's first
    const int c = (blockIdx.y * blockDim.x + threadIdx.x) * VW;
    const bool has_c = c < D;
    float acc[VW];
    floatX* g = dwte + (size_t)row * D + c;
    if (has_c) {
        if (VW > 1) {
            EncChunk a = *(const EncChunk*)g;
#pragma unroll
            for (int e = 0; e < VW; e++) acc[e] = (float)a.v[e];
        } else {
            acc[0] = (float)g[0];
        }
    }
    // the group's positions, blockDim.x at a time (a group is contiguous in the sorted order)
    for (int start = k;; start += blockDim.x) {
        int kk = start + threadIdx.x, p = -1;
        if (kk < N) {
            int ii = encoder_sorted[kk];
            if (enc_key(tokens, ii, v0, n) == row) p = ii;
        }
        pos[threadIdx.x] = p;
        __syncthreads();
        int count = 0, hi = blockDim.x;  // the group's entries are a prefix: find its end
        while (count < hi) {
            int mid = (count + hi) / 2;
            if (pos[mid] >= 0) count = mid + 1;
            else hi = mid;
        }
        if (has_c) {
            for (int m0 = 0; m0 < count; m0 += ENC_UNROLL) {
                float v[ENC_UNROLL][VW];
#pragma unroll
                for (int u = 0; u < ENC_UNROLL; u++) {
                    if (m0 + u < count) {
                        const floatX* d = dout + (size_t)pos[m0 + u] * D + c;
                        if (VW > 1) {
                            EncChunk b = *(const EncChunk*)d;
#pragma unroll
                            for (int e = 0; e < VW; e++) v[u][e] = (float)b.v[e];
                        } else {
                            v[u][0] = (float)d[0];
                        }
                    }
                }
#pragma unroll
                for (int u = 0; u < ENC_UNROLL; u++)
                    if (m0 + u < count)
#pragma unroll
                        for (int e = 0; e < VW; e++) acc[e] += v[u][e];
            }
        }
        __syncthreads();  // pos is rewritten by the next round
        if (count < (int)blockDim.x) break;
    }
    if (has_c) {
        if (VW > 1) {
            EncChunk a;
#pragma unroll
            for (int e = 0; e < VW; e++) a.v[e] = (floatX)acc[e];
            *(EncChunk*)g = a;
        } else {
            g[0] = (floatX)acc[0];
        }
    }
}

__global__ void __launch_bounds__(ENC_GROUP_THREADS) encoder_group_vec_kernel(floatX* dwte, const floatX* dout,
                                                                              const int* tokens, int N, int D, int v0, int n) {
    enc_group_body<ENC_VEC>(dwte, dout, tokens, N, D, v0, n);
}
__global__ void __launch_bounds__(ENC_GROUP_THREADS) encoder_group_kernel(floatX* dwte, const floatX* dout,
                                                                          const int* tokens, int N, int D, int v0, int n) {
    enc_group_body<1>(dwte, dout, tokens, N, D, v0, n);
}

static inline void encoder_backward_grouped(floatX* dwte, const floatX* dout, const int* tokens, int N, int D, int v0,
                                            int n, stream_t s) {
    dim3 rb(ENC_RANK_I, ENC_RANK_J);
    encoder_rank_kernel<<<(unsigned)ceil_div((size_t)N, ENC_RANK_I), rb, 0, s>>>(tokens, N, v0, n);
    cudaCheck(cudaGetLastError());
    const int vec = D % ENC_VEC == 0 && ((uintptr_t)dwte & 15) == 0 && ((uintptr_t)dout & 15) == 0;
    const size_t units = vec ? (size_t)D / ENC_VEC : (size_t)D;
    const unsigned block = (unsigned)(units >= ENC_GROUP_THREADS ? ENC_GROUP_THREADS : ceil_div(units, 32) * 32);
    dim3 grid((unsigned)N, (unsigned)ceil_div(units, block));
    if (vec) encoder_group_vec_kernel<<<grid, block, 0, s>>>(dwte, dout, tokens, N, D, v0, n);
    else encoder_group_kernel<<<grid, block, 0, s>>>(dwte, dout, tokens, N, D, v0, n);
    cudaCheck(cudaGetLastError());
}

// dwte[tokens[i] - v0] += dout[i] for the tokens in [v0, v0 + n), deterministic (see the
// header comment)
static inline void encoder_backward_range(floatX* dwte, const floatX* dout, const int* tokens, int N, int D, int v0, int n,
                                          stream_t s) {
    if (N <= 0 || D <= 0) return;
    if (v0 < 0 || n < 0) FAIL("encoder_backward_range: range v0 = %d, n = %d", v0, n);
    if (N <= ENC_SORT_MAX) encoder_backward_grouped(dwte, dout, tokens, N, D, v0, n, s);
    else encoder_backward_tiles(dwte, dout, tokens, N, D, v0, n, s);
}

static inline void encoder_backward(floatX* dwte, const floatX* dout, const int* tokens, int N, int D, stream_t s) {
    encoder_backward_range(dwte, dout, tokens, N, D, 0, INT_MAX, s);
}
