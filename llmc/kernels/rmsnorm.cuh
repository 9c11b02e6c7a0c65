/*
RMSNorm forward and backward. CPU twin: llmc/kernels/cpu/rmsnorm.h.
y = x * rstd * w with rstd = 1/sqrt(mean(x^2) + eps); statistics in fp32.

Layout of the work. A row is cut into 16-byte chunks (RMS_VEC = 8 bf16 or 4 fp32
elements; the last chunk of a row may be partial). A group of L lanes owns a row,
L = the smallest power of two >= the chunks per row, at most 32, so a warp holds
32/L rows at once (hd = 64 q/k norms of the DiT: 8 lanes per row, 4 rows per warp;
C = 2048: a whole warp per row). Lane l of a group takes chunks l, l + L, l + 2L, ...
Sums: each lane in chunk order, then a xor-shuffle tree inside the group: a fixed
order, deterministic.
When every row starts on a 16-byte boundary (the base pointers are 16-byte aligned and
C is a multiple of RMS_VEC) each chunk is one 16-byte load/store; otherwise the same
chunks are loaded element by element, so both paths do the same arithmetic in the
same order (bit-equal in the emulator's checks).
The number of chunks a lane keeps in registers is a compile-time variant picked at
launch from C (a uniform branch inside one kernel: the emulator and the coverage check
name kernels without template arguments).

Forward: one pass: x kept in registers (up to 8 chunks per lane, C <= 2048 in bf16)
between the sum of squares and the output, so a row is read from memory once.
  rows of at least 32 chunks on the 16-byte path (the trainers' model widths):
  rmsnorm_forward_stream_kernel, a persistent grid with the weight in shared memory and
  two rows a warp in flight (its comment below); other rows: rmsnorm_forward_kernel
  (101 registers), L lanes a row as above. Both do the same arithmetic in the same order.

Backward (rmsnorm_backward_kernel): one kernel computes dinp and dw.
  rows of 32 to 256 chunks on the 16-byte path (256 <= C <= 2048 in bf16: llama3-1B's
  width) take rmsnorm_backward_stream_kernel instead: the same grid, row slots, arithmetic
  and dw tree (bitwise the same dinp and dw), each warp's row of dy and x kept in registers
  and its next row's loaded while the current one is reduced and written (its comment
  below). What follows on registers is the per-row kernel's; the dw reduction is both's.
  dinp += r*w*dy - k*x with k = r^3/C * sum(dy*w*x) (the residual stream's gradient
  accumulates), per row as above; dy and x stay in registers between the dot product
  and the update up to 2 chunks per lane (C <= 512 in bf16, the DiT's q/k norms);
  longer rows are read again in the second pass, from L1/L2 since the row was just
  read (4 chunks in registers would take the kernel to ~160 registers, one block per
  SM; now 116). __launch_bounds__(256, 2) states the two blocks per SM that the shared
  memory allows anyway: without it ptxas stopped the FP32 build at 80 registers with a
  4-byte spill; with it, 110 and no spill (dev/test/ptxas_gate.py).
  dw += sum_i dy_i * x_i * rstd_i without a second pass over dy and x: a fixed grid of
  G blocks (G depends only on N and C, never on the GPU) walks the rows in a fixed
  partition; each row group ("slot") of a block adds its rows' dy*x*r into its own fp32
  slice of shared memory, the block adds its slots in slot order and writes one fp32
  partial row [C] to a static scratch array. Partials are then reduced in a fixed tree:
  blocks form groups of RMS_GROUP in block order; the last block of a group to finish
  (an atomic ticket) adds the group's partials in block order; the last group to finish
  adds the group sums in group order and adds the total to dw (one rounding). Which
  block happens to be last changes only who adds, never the order of the additions, so
  dw is the same on every run and every device. No float atomics.
  The scratch (RMS_SCRATCH_FLOATS fp32 + counters, rmsnorm_scratch_bytes()) is a static
  __device__ array: no allocation, no setup call, the trainers' calls are unchanged. As
  with the cuBLASLt workspace and global_norm_squared, two rmsnorm_backward calls must
  not run concurrently on two streams.
  Rows longer than the fused kernel's shared memory allows (C above about 24500, or
  more than the device's opt-in limit) take the old two-kernel path
  (rmsnorm_backward_dinp_kernel + rmsnorm_backward_dw_kernel): deterministic too.

Predicted for the streaming forward (dev/cuda/rmsnorm.cu version 4, before it ran on a
GPU): llama3-1B's 67 MB a call at 3.2-3.6 TB/s (75-85% of copy), 19-21 us against the
per-row kernel's measured 34 us, ~0.45 ms less a step (33 calls).
Predicted for the streaming backward (dev/cuda/rmsnorm.cu version 5, before it ran on a
GPU): llama3-1B's 134 MB a call at 2.6-2.9 TB/s (61-69% of copy), 46-52 us against the
per-row kernel's measured 72 us in the ladder, ~0.7-0.85 ms less a step (33 calls).
Predicted gain at llama3-1B, B=4 T=2048 (N = 8192 rows, C = 2048, bf16), H100 SXM at an
achievable ~2.9 TB/s. Predicted before the first GPU run; measured on an H200 (docs/results/gpu_h200_2026-11-26.md section 3:
33 calls each way, B=4 T=2048): forward 34 us a call at 2.0 TB/s (47% of copy), backward
1.73 TB/s (40%), so both are further from the copy rate than predicted. The prediction:
  forward: 67 MB from HBM (x read once, y written) before and after; before, 2-byte
    loads and a second read of x from L1/L2: ~30-38 us -> after ~23-25 us.
  backward: before 201 MB (dinp kernel: dy, x, dinp read + dinp written, 134 MB;
    dw kernel: dy and x read again, 67 MB, by only C/32 = 64 blocks with 64-byte warp
    loads, so bound by memory-level parallelism): ~155-265 us -> after 134 MB + 2 MB
    of partials: ~47 us plus a ~3 us reduction tail.
Where the residual add went: the forward add x + f(x) is done by the GEMM that
produces f(x) (matmul_forward_residual), so it costs no extra kernel and no extra pass;
the backward add is the "dinp +=" above, so the residual gradient and the norm's
gradient are summed in the same pass over the row.
*/
#pragma once
#include "../core/common.h"

#define RMS_VEC (16 / (int)sizeof(floatX))  // elements per 16-byte chunk
struct alignas(16) RmsChunk { floatX v[RMS_VEC]; };

#define RMS_WARPS 8             // warps per block (the backward uses fewer when C is large)
#define RMS_MAX_NPL 8           // forward: chunks per lane kept in registers (C <= 8 * 32 * RMS_VEC)
// backward: dy and x stay in registers up to 2 chunks per lane (C <= 512 in bf16); longer
// rows are read again in the second pass, from L1/L2 (the row was just read). 4 chunks
// would make the kernel ~160 registers (one block per SM), 8 ~250.
#define RMS_BWD_MAX_NPL 2
#define RMS_GROUP 16            // partial rows added per group in the backward's reduction tree
#define RMS_BWD_MAX_BLOCKS 256  // G: at most 16 groups of 16
#define RMS_BWD_ROWS_PER_SLOT 4 // G is chosen so that each row slot gets about this many rows
#define RMS_BWD_SMEM_MAX (96 * 1024)  // fused backward: shared memory per block, 2 blocks per SM
#define RMS_SCRATCH_FLOATS (RMS_BWD_MAX_BLOCKS * 2048)  // partial rows [G, C], G * C <= this

static __device__ float rmsnorm_dw_partials[RMS_SCRATCH_FLOATS];
static __device__ unsigned int rmsnorm_tickets[RMS_BWD_MAX_BLOCKS / RMS_GROUP + 1];  // per group, then the final

// bytes of device memory the backward's static scratch holds (for the memory plan)
static inline size_t rmsnorm_scratch_bytes(void) {
    return sizeof(float) * (size_t)RMS_SCRATCH_FLOATS + sizeof(unsigned int) * (RMS_BWD_MAX_BLOCKS / RMS_GROUP + 1);
}

// lanes per row: the smallest power of two >= the chunks of a row, at most 32
static inline int rms_lanes(int nch) {
    int L = 1;
    while (L < 32 && L < nch) L <<= 1;
    return L;
}
// chunks per lane to keep in registers: 1, 2, 4, ... up to max, or 0 (more: re-read the row)
static inline int rms_npl(int nch, int L, int max) {
    int per = (int)ceil_div((size_t)nch, (size_t)L);
    int npl = 1;
    while (npl < per) npl <<= 1;
    return npl <= max ? npl : 0;
}
static inline bool rms_aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// Floats per row slot in the backward's shared memory. Element k of chunk q sits at
// k * nchp + q: the lanes of a group hold consecutive chunks, so they hit consecutive
// banks; nchp % 32 == 32 / RMS_VEC makes the block's final pass (consecutive channels
// c = q * RMS_VEC + k across lanes) hit 32 different banks too; the extra (L % 32) floats
// put the row groups of one warp on different banks.
static __host__ __device__ __forceinline__ int rms_nchp(int nch) { return nch + ((32 / RMS_VEC - nch % 32) % 32 + 32) % 32; }
static __host__ __device__ __forceinline__ int rms_slice(int nch, int L) { return RMS_VEC * rms_nchp(nch) + (L & 31); }

template <bool VEC>
static __device__ __forceinline__ RmsChunk rms_load(const floatX* p, int valid) {
    RmsChunk c;
    if (VEC) {
        c = *(const RmsChunk*)p;
    } else {
        for (int k = 0; k < RMS_VEC; k++) c.v[k] = k < valid ? p[k] : (floatX)0.0f;
    }
    return c;
}
template <bool VEC>
static __device__ __forceinline__ void rms_store(floatX* p, const RmsChunk& c, int valid) {
    if (VEC) {
        *(RmsChunk*)p = c;
    } else {
        for (int k = 0; k < RMS_VEC; k++)
            if (k < valid) p[k] = c.v[k];
    }
}
// sum over the L lanes of a group (xor offsets below L stay inside the group)
static __device__ __forceinline__ float rms_group_sum(float v, int L) {
    for (int off = L >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
static __device__ __forceinline__ int rms_valid(int q, int C) {
    int left = C - q * RMS_VEC;
    return left < RMS_VEC ? left : RMS_VEC;
}

// ---------------------------------------------------------------------------------
// forward
template <bool VEC, int NPL>
static __device__ void rms_forward_rows(floatX* out, float* rstd, const floatX* inp, const floatX* w, int N, int C,
                                        float eps, int L) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int sub = lane / L, sl = lane % L, rpw = 32 / L;
    int nch = (C + RMS_VEC - 1) / RMS_VEC;
    int row = (blockIdx.x * (blockDim.x >> 5) + warp) * rpw + sub;
    bool ok = row < N;  // lanes past the end still take part in the shuffles
    const floatX* x = inp + (size_t)(ok ? row : 0) * C;
    RmsChunk xs[NPL > 0 ? NPL : 1];
    float ss = 0.0f;
    if (NPL > 0) {
#pragma unroll
        for (int t = 0; t < NPL; t++) {
            int q = sl + t * L;
            if (ok && q < nch) {
                int valid = VEC ? RMS_VEC : rms_valid(q, C);
                xs[t] = rms_load<VEC>(x + q * RMS_VEC, valid);
                for (int k = 0; k < RMS_VEC; k++) if (k < valid) { float xv = (float)xs[t].v[k]; ss += xv * xv; }
            }
        }
    } else if (ok) {
        for (int q = sl; q < nch; q += L) {
            int valid = VEC ? RMS_VEC : rms_valid(q, C);
            RmsChunk c = rms_load<VEC>(x + q * RMS_VEC, valid);
            for (int k = 0; k < RMS_VEC; k++) if (k < valid) { float xv = (float)c.v[k]; ss += xv * xv; }
        }
    }
    ss = rms_group_sum(ss, L);
    if (!ok) return;  // after the last shuffle
    float r = 1.0f / sqrtf(ss / C + eps);
    floatX* y = out + (size_t)row * C;
    if (NPL > 0) {
#pragma unroll
        for (int t = 0; t < NPL; t++) {
            int q = sl + t * L;
            if (q < nch) {
                int valid = VEC ? RMS_VEC : rms_valid(q, C);
                RmsChunk wc = rms_load<VEC>(w + q * RMS_VEC, valid), yc;
                for (int k = 0; k < RMS_VEC; k++) yc.v[k] = (floatX)((float)xs[t].v[k] * r * (float)wc.v[k]);
                rms_store<VEC>(y + q * RMS_VEC, yc, valid);
            }
        }
    } else {
        for (int q = sl; q < nch; q += L) {
            int valid = VEC ? RMS_VEC : rms_valid(q, C);
            RmsChunk xc = rms_load<VEC>(x + q * RMS_VEC, valid), wc = rms_load<VEC>(w + q * RMS_VEC, valid), yc;
            for (int k = 0; k < RMS_VEC; k++) yc.v[k] = (floatX)((float)xc.v[k] * r * (float)wc.v[k]);
            rms_store<VEC>(y + q * RMS_VEC, yc, valid);
        }
    }
    if (sl == 0) rstd[row] = r;
}

// vec and npl are uniform over the grid: one kernel, the branch picks a compiled variant
__global__ void __launch_bounds__(32 * RMS_WARPS) rmsnorm_forward_kernel(floatX* out, float* rstd, const floatX* inp,
                                                                         const floatX* w, int N, int C, float eps,
                                                                         int vec, int npl, int L) {
    if (vec) {
        switch (npl) {
            case 1: rms_forward_rows<true, 1>(out, rstd, inp, w, N, C, eps, L); break;
            case 2: rms_forward_rows<true, 2>(out, rstd, inp, w, N, C, eps, L); break;
            case 4: rms_forward_rows<true, 4>(out, rstd, inp, w, N, C, eps, L); break;
            case 8: rms_forward_rows<true, 8>(out, rstd, inp, w, N, C, eps, L); break;
            default: rms_forward_rows<true, 0>(out, rstd, inp, w, N, C, eps, L); break;
        }
    } else {
        switch (npl) {
            case 1: rms_forward_rows<false, 1>(out, rstd, inp, w, N, C, eps, L); break;
            case 2: rms_forward_rows<false, 2>(out, rstd, inp, w, N, C, eps, L); break;
            case 4: rms_forward_rows<false, 4>(out, rstd, inp, w, N, C, eps, L); break;
            case 8: rms_forward_rows<false, 8>(out, rstd, inp, w, N, C, eps, L); break;
            default: rms_forward_rows<false, 0>(out, rstd, inp, w, N, C, eps, L); break;
        }
    }
}

// Rows of at least 32 chunks on the 16-byte path (C >= 256 in bf16: the trainers' model
// width): a persistent grid of RMS_STREAM_BLOCKS_PER_SM blocks an SM, the weight staged
// once a block in shared memory, and each warp (a whole warp a row) loads its next row
// before it reduces and writes the current one, so two rows a warp are in flight. The
// per-row kernel above launches a block per 8 rows instead (llama3-1B: 1,024 blocks, 3.9
// waves, each warp loading, reducing, storing, then exiting), which measured 34 us a call
// on the H200 (47% of the copy rate). The same arithmetic in the same order as
// rms_forward_rows<true, NPL> with L = 32: bitwise its results (the emulator's unaligned
// checks compare the two). The grid depends on the GPU, the result does not (a row's
// arithmetic never depends on which block takes it).
#define RMS_STREAM_BLOCKS_PER_SM 2
template <int NPL>
static __device__ void rms_forward_stream(floatX* out, float* rstd, const floatX* inp, const floatX* w, int N, int C,
                                          float eps) {
    extern __shared__ RmsChunk rms_wsh[];  // C / RMS_VEC chunks of w
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nch = C / RMS_VEC;
    for (int q = threadIdx.x; q < nch; q += blockDim.x) rms_wsh[q] = ((const RmsChunk*)w)[q];
    __syncthreads();
    const int stride = gridDim.x * RMS_WARPS;
    int row = blockIdx.x * RMS_WARPS + warp;
    RmsChunk cur[NPL], nxt[NPL];
    if (row < N) {
        const RmsChunk* x = (const RmsChunk*)(inp + (size_t)row * C);
#pragma unroll
        for (int t = 0; t < NPL; t++) if (lane + t * 32 < nch) cur[t] = x[lane + t * 32];
    }
    for (; row < N; row += stride) {  // uniform over the warp
        const int next = row + stride;
        if (next < N) {  // in flight while this row is reduced and written
            const RmsChunk* x = (const RmsChunk*)(inp + (size_t)next * C);
#pragma unroll
            for (int t = 0; t < NPL; t++) if (lane + t * 32 < nch) nxt[t] = x[lane + t * 32];
        }
        float ss = 0.0f;
#pragma unroll
        for (int t = 0; t < NPL; t++)
            if (lane + t * 32 < nch)
                for (int k = 0; k < RMS_VEC; k++) { float xv = (float)cur[t].v[k]; ss += xv * xv; }
        ss = rms_group_sum(ss, 32);
        float r = 1.0f / sqrtf(ss / C + eps);
        RmsChunk* y = (RmsChunk*)(out + (size_t)row * C);
#pragma unroll
        for (int t = 0; t < NPL; t++) {
            int q = lane + t * 32;
            if (q < nch) {
                RmsChunk wc = rms_wsh[q], yc;
                for (int k = 0; k < RMS_VEC; k++) yc.v[k] = (floatX)((float)cur[t].v[k] * r * (float)wc.v[k]);
                y[q] = yc;
            }
        }
        if (lane == 0) rstd[row] = r;
#pragma unroll
        for (int t = 0; t < NPL; t++) cur[t] = nxt[t];
    }
}
// npl is uniform over the grid: one kernel, the branch picks a compiled variant
__global__ void __launch_bounds__(32 * RMS_WARPS, RMS_STREAM_BLOCKS_PER_SM) rmsnorm_forward_stream_kernel(
        floatX* out, float* rstd, const floatX* inp, const floatX* w, int N, int C, float eps, int npl) {
    switch (npl) {
        case 1: rms_forward_stream<1>(out, rstd, inp, w, N, C, eps); break;
        case 2: rms_forward_stream<2>(out, rstd, inp, w, N, C, eps); break;
        case 4: rms_forward_stream<4>(out, rstd, inp, w, N, C, eps); break;
        default: rms_forward_stream<8>(out, rstd, inp, w, N, C, eps); break;
    }
}

// the 16-byte path: every row of every tensor starts on a 16-byte boundary
static inline int rms_vec_ok(int C, const void* a, const void* b, const void* c, const void* d) {
    return C % RMS_VEC == 0 && rms_aligned16(a) && rms_aligned16(b) && rms_aligned16(c) && rms_aligned16(d);
}

static inline void rmsnorm_forward(floatX* out, float* rstd, const floatX* inp, const floatX* w, int N, int C, float eps,
                                   stream_t s) {
    if (N <= 0 || C <= 0) return;
    int nch = (int)ceil_div((size_t)C, RMS_VEC), L = rms_lanes(nch), npl = rms_npl(nch, L, RMS_MAX_NPL);
    int vec = rms_vec_ok(C, out, inp, w, inp);
    if (vec && nch >= 32 && npl > 0) {  // L = 32 here, so npl is rms_forward_rows<true, npl>'s
        size_t blocks = ceil_div((size_t)N, (size_t)RMS_WARPS), cap = (size_t)device_sm_count() * RMS_STREAM_BLOCKS_PER_SM;
        unsigned grid = (unsigned)(blocks < cap ? blocks : cap);
        rmsnorm_forward_stream_kernel<<<grid, 32 * RMS_WARPS, (size_t)nch * sizeof(RmsChunk), s>>>(out, rstd, inp, w, N,
                                                                                                  C, eps, npl);
        cudaCheck(cudaGetLastError());
        return;
    }
    size_t rows_per_block = (size_t)RMS_WARPS * (32 / L);
    unsigned grid = (unsigned)ceil_div((size_t)N, rows_per_block);
    rmsnorm_forward_kernel<<<grid, 32 * RMS_WARPS, 0, s>>>(out, rstd, inp, w, N, C, eps, vec, npl, L);
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------
// backward, fused. Shared memory: one fp32 slice (rms_slice floats) per row slot.
template <bool VEC, int NPL>
static __device__ void rms_backward_rows(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* w,
                                         const float* rstd, int N, int C, int L, float* dwp) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    int sub = lane / L, sl = lane % L, rpw = 32 / L;
    int nch = (C + RMS_VEC - 1) / RMS_VEC, nchp = rms_nchp(nch);
    float* mine = dwp + (size_t)(warp * rpw + sub) * rms_slice(nch, L);
    for (int q = sl; q < nch; q += L)
        for (int k = 0; k < RMS_VEC; k++) mine[k * nchp + q] = 0.0f;
    size_t step = (size_t)gridDim.x * nwarps * rpw;
    for (size_t base = ((size_t)blockIdx.x * nwarps + warp) * rpw; base < (size_t)N; base += step) {
        size_t row = base + sub;
        bool ok = row < (size_t)N;
        const floatX* x = inp + (ok ? row : 0) * C;
        const floatX* dy = dout + (ok ? row : 0) * C;
        float r = ok ? rstd[row] : 0.0f;
        RmsChunk xs[NPL > 0 ? NPL : 1], dys[NPL > 0 ? NPL : 1];
        float dot = 0.0f;  // sum_k dy_k w_k x_k
        if (NPL > 0) {
#pragma unroll
            for (int t = 0; t < NPL; t++) {
                int q = sl + t * L;
                if (ok && q < nch) {
                    int valid = VEC ? RMS_VEC : rms_valid(q, C);
                    xs[t] = rms_load<VEC>(x + q * RMS_VEC, valid);
                    dys[t] = rms_load<VEC>(dy + q * RMS_VEC, valid);
                    RmsChunk wc = rms_load<VEC>(w + q * RMS_VEC, valid);
                    for (int k = 0; k < RMS_VEC; k++) if (k < valid) dot += (float)dys[t].v[k] * (float)wc.v[k] * (float)xs[t].v[k];
                }
            }
        } else if (ok) {
            for (int q = sl; q < nch; q += L) {
                int valid = VEC ? RMS_VEC : rms_valid(q, C);
                RmsChunk xc = rms_load<VEC>(x + q * RMS_VEC, valid), dc = rms_load<VEC>(dy + q * RMS_VEC, valid);
                RmsChunk wc = rms_load<VEC>(w + q * RMS_VEC, valid);
                for (int k = 0; k < RMS_VEC; k++) if (k < valid) dot += (float)dc.v[k] * (float)wc.v[k] * (float)xc.v[k];
            }
        }
        dot = rms_group_sum(dot, L);
        if (!ok) continue;  // the loop bound is uniform over the warp: no shuffle is skipped
        float kk = dot * r * r * r / C;
        floatX* dx = dinp + row * C;
        if (NPL > 0) {
#pragma unroll
            for (int t = 0; t < NPL; t++) {
                int q = sl + t * L;
                if (q < nch) {
                    int valid = VEC ? RMS_VEC : rms_valid(q, C);
                    RmsChunk wc = rms_load<VEC>(w + q * RMS_VEC, valid), dxc = rms_load<VEC>(dx + q * RMS_VEC, valid);
                    for (int k = 0; k < RMS_VEC; k++) {
                        float xv = (float)xs[t].v[k], g = (float)dys[t].v[k];
                        dxc.v[k] = (floatX)((float)dxc.v[k] + (r * (float)wc.v[k] * g - kk * xv));
                        mine[k * nchp + q] += g * xv * r;
                    }
                    rms_store<VEC>(dx + q * RMS_VEC, dxc, valid);
                }
            }
        } else {
            for (int q = sl; q < nch; q += L) {
                int valid = VEC ? RMS_VEC : rms_valid(q, C);
                RmsChunk xc = rms_load<VEC>(x + q * RMS_VEC, valid), dc = rms_load<VEC>(dy + q * RMS_VEC, valid);
                RmsChunk wc = rms_load<VEC>(w + q * RMS_VEC, valid), dxc = rms_load<VEC>(dx + q * RMS_VEC, valid);
                for (int k = 0; k < RMS_VEC; k++) {
                    float xv = (float)xc.v[k], g = (float)dc.v[k];
                    dxc.v[k] = (floatX)((float)dxc.v[k] + (r * (float)wc.v[k] * g - kk * xv));
                    mine[k * nchp + q] += g * xv * r;
                }
                rms_store<VEC>(dx + q * RMS_VEC, dxc, valid);
            }
        }
    }
}

// Adds rows row0, row0 + step, ... (nrows of them, in that order) of the partials, for
// every channel: into row row0 (dw == NULL), or onto dw. The partials were written by other
// blocks: read through a volatile pointer (from L2, never a stale L1 line). Eight channels
// per thread and four rows loaded before they are added, so ~32 loads are in flight per
// thread: this runs on one SM while the others may be idle.
static __device__ void rms_sum_rows(int C, int row0, int step, int nrows, floatX* dw) {
    const volatile float* part = rmsnorm_dw_partials;
    constexpr int J = 8, U = 4;
    const int nt = blockDim.x;
    for (int c0 = threadIdx.x; c0 < C; c0 += J * nt) {
        float acc[J];
#pragma unroll
        for (int j = 0; j < J; j++) acc[j] = 0.0f;
        int r = 0;
        for (; r + U <= nrows; r += U) {
            float v[U][J];
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int j = 0; j < J; j++) {
                    int c = c0 + j * nt;
                    v[u][j] = c < C ? part[(size_t)(row0 + (r + u) * step) * C + c] : 0.0f;
                }
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int j = 0; j < J; j++) acc[j] += v[u][j];
        }
        for (; r < nrows; r++)
#pragma unroll
            for (int j = 0; j < J; j++) {
                int c = c0 + j * nt;
                if (c < C) acc[j] += part[(size_t)(row0 + r * step) * C + c];
            }
#pragma unroll
        for (int j = 0; j < J; j++) {
            int c = c0 + j * nt;
            if (c >= C) continue;
            if (dw) dw[c] = (floatX)((float)dw[c] + acc[j]);
            else rmsnorm_dw_partials[(size_t)row0 * C + c] = acc[j];
        }
    }
}

// The end of a fused backward block: its partial of dw, its slots [blockDim.x / 32 * (32 / L)]
// of rms_slice floats at dwp added in slot order, then the fixed tree over the blocks.
// ticket: a __shared__ word of the kernel.
static __device__ void rms_backward_finish(floatX* dw, int C, int L, const float* dwp, unsigned int* ticket) {
    int nch = (C + RMS_VEC - 1) / RMS_VEC, nchp = rms_nchp(nch), slots = (blockDim.x >> 5) * (32 / L);
    size_t slice = (size_t)rms_slice(nch, L);
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        size_t at = (size_t)(c % RMS_VEC) * nchp + c / RMS_VEC;
        float sum = 0.0f;
        for (int sl = 0; sl < slots; sl++) sum += dwp[sl * slice + at];
        rmsnorm_dw_partials[(size_t)blockIdx.x * C + c] = sum;
    }
    // the last block of each group adds the group's partials, in block order, into the
    // group's first row; the last group adds the group rows, in group order, into dw
    __threadfence();  // this block's partials are visible before its ticket is taken
    __syncthreads();
    int G = gridDim.x, g = blockIdx.x / RMS_GROUP, first = g * RMS_GROUP;
    int gsize = G - first < RMS_GROUP ? G - first : RMS_GROUP, ngroups = (G + RMS_GROUP - 1) / RMS_GROUP;
    if (threadIdx.x == 0) *ticket = atomicAdd(&rmsnorm_tickets[g], 1u);
    __syncthreads();
    if (*ticket != (unsigned)gsize - 1) return;  // block-uniform
    if (threadIdx.x == 0) rmsnorm_tickets[g] = 0;  // every block of the group has taken its ticket: reset for the next call
    rms_sum_rows(C, first, 1, gsize, NULL);  // into row `first`
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) *ticket = atomicAdd(&rmsnorm_tickets[RMS_BWD_MAX_BLOCKS / RMS_GROUP], 1u);
    __syncthreads();
    if (*ticket != (unsigned)ngroups - 1) return;
    if (threadIdx.x == 0) rmsnorm_tickets[RMS_BWD_MAX_BLOCKS / RMS_GROUP] = 0;
    rms_sum_rows(C, 0, RMS_GROUP, ngroups, dw);
}

__global__ void __launch_bounds__(32 * RMS_WARPS, 2) rmsnorm_backward_kernel(floatX* dinp, floatX* dw, const floatX* dout,
                                                                             const floatX* inp, const floatX* w,
                                                                             const float* rstd, int N, int C, int vec,
                                                                             int npl, int L) {
    extern __shared__ float dwp[];  // [slots][rms_slice(nch, L)]
    __shared__ unsigned int ticket;
    if (vec) {
        switch (npl) {
            case 1: rms_backward_rows<true, 1>(dinp, dout, inp, w, rstd, N, C, L, dwp); break;
            case 2: rms_backward_rows<true, 2>(dinp, dout, inp, w, rstd, N, C, L, dwp); break;
            default: rms_backward_rows<true, 0>(dinp, dout, inp, w, rstd, N, C, L, dwp); break;
        }
    } else {
        switch (npl) {
            case 1: rms_backward_rows<false, 1>(dinp, dout, inp, w, rstd, N, C, L, dwp); break;
            case 2: rms_backward_rows<false, 2>(dinp, dout, inp, w, rstd, N, C, L, dwp); break;
            default: rms_backward_rows<false, 0>(dinp, dout, inp, w, rstd, N, C, L, dwp); break;
        }
    }
    rms_backward_finish(dw, C, L, dwp, &ticket);
}

// The backward's streaming schedule, for rows of 32 to 8 * 32 chunks on the 16-byte path
// (256 <= C <= 2048 in bf16; dev/cuda/rmsnorm.cu version 5). The partition of the rows, the
// slots and the tree are rmsnorm_backward_kernel's (rms_backward_shape: G blocks, a warp a
// slot, slot s of block b takes rows b * warps + s, + G * warps, ...), so dw is summed in
// its order; a row's arithmetic is its too (chunk q of lane l is q = l + 32 t in both), so
// dinp and dw are its bit for bit (the emulator compares each aligned shape with its
// unaligned twin, which runs rmsnorm_backward_kernel). What changes: the row's dy and x
// stay in registers between the dot product and the update (the per-row kernel keeps them
// only up to 2 chunks a lane and reads longer rows again), the next row's dy and x are
// loaded before the current one is reduced and written, and w sits in shared memory once a
// block. dinp is loaded in the update, not before the dot product: holding it too (32
// registers more) spilled 224 bytes at the 255-register cap. Two rows of dy and x a warp in
// registers (128 at 8 chunks a lane; 235 in all) leave one block of 8 warps an SM, so the
// grid of up to 256 blocks runs in two waves on 132 SMs.
template <int NPL>
static __device__ void rms_backward_stream(floatX* dinp, const floatX* dout, const floatX* inp, const RmsChunk* wsh,
                                           const float* rstd, int N, int C, float* mine) {
    const int lane = threadIdx.x & 31, nwarps = blockDim.x >> 5, nch = C / RMS_VEC, nchp = rms_nchp(nch);
    for (int q = lane; q < nch; q += 32)
        for (int k = 0; k < RMS_VEC; k++) mine[k * nchp + q] = 0.0f;
    const size_t step = (size_t)gridDim.x * nwarps;
    size_t row = (size_t)blockIdx.x * nwarps + (threadIdx.x >> 5);
    RmsChunk xc[NPL], dc[NPL], xn[NPL], dn[NPL];
    float r = 0.0f, rn = 0.0f;
    if (row < (size_t)N) {
        const RmsChunk *x = (const RmsChunk*)(inp + row * C), *dy = (const RmsChunk*)(dout + row * C);
#pragma unroll
        for (int t = 0; t < NPL; t++) if (lane + t * 32 < nch) { xc[t] = x[lane + t * 32]; dc[t] = dy[lane + t * 32]; }
        r = rstd[row];
    }
    for (; row < (size_t)N; row += step) {  // uniform over the warp
        const size_t next = row + step;
        if (next < (size_t)N) {  // in flight while this row is reduced and written
            const RmsChunk *x = (const RmsChunk*)(inp + next * C), *dy = (const RmsChunk*)(dout + next * C);
#pragma unroll
            for (int t = 0; t < NPL; t++) if (lane + t * 32 < nch) { xn[t] = x[lane + t * 32]; dn[t] = dy[lane + t * 32]; }
            rn = rstd[next];
        }
        RmsChunk* dx = (RmsChunk*)(dinp + row * C);
        float dot = 0.0f;  // sum_k dy_k w_k x_k
#pragma unroll
        for (int t = 0; t < NPL; t++) {
            int q = lane + t * 32;
            if (q < nch) {
                RmsChunk wc = wsh[q];
                for (int k = 0; k < RMS_VEC; k++) dot += (float)dc[t].v[k] * (float)wc.v[k] * (float)xc[t].v[k];
            }
        }
        dot = rms_group_sum(dot, 32);
        float kk = dot * r * r * r / C;
#pragma unroll
        for (int t = 0; t < NPL; t++) {
            int q = lane + t * 32;
            if (q < nch) {
                RmsChunk wc = wsh[q], dxc = dx[q];
                for (int k = 0; k < RMS_VEC; k++) {
                    float xv = (float)xc[t].v[k], g = (float)dc[t].v[k];
                    dxc.v[k] = (floatX)((float)dxc.v[k] + (r * (float)wc.v[k] * g - kk * xv));
                    mine[k * nchp + q] += g * xv * r;
                }
                dx[q] = dxc;
            }
        }
#pragma unroll
        for (int t = 0; t < NPL; t++) { xc[t] = xn[t]; dc[t] = dn[t]; }
        r = rn;
    }
}
// npl is uniform over the grid: one kernel, the branch picks a compiled variant
__global__ void __launch_bounds__(32 * RMS_WARPS, 1) rmsnorm_backward_stream_kernel(floatX* dinp, floatX* dw,
                                                                                   const floatX* dout,
                                                                                   const floatX* inp, const floatX* w,
                                                                                   const float* rstd, int N, int C,
                                                                                   int npl) {
    extern __shared__ float dwp[];  // C / RMS_VEC chunks of w, then [warps][rms_slice(nch, 32)]
    __shared__ unsigned int ticket;
    const int nch = C / RMS_VEC;
    RmsChunk* wsh = (RmsChunk*)dwp;
    for (int q = threadIdx.x; q < nch; q += blockDim.x) wsh[q] = ((const RmsChunk*)w)[q];
    __syncthreads();
    float* slots = (float*)(wsh + nch);
    float* mine = slots + (threadIdx.x >> 5) * rms_slice(nch, 32);
    switch (npl) {
        case 1: rms_backward_stream<1>(dinp, dout, inp, wsh, rstd, N, C, mine); break;
        case 2: rms_backward_stream<2>(dinp, dout, inp, wsh, rstd, N, C, mine); break;
        case 4: rms_backward_stream<4>(dinp, dout, inp, wsh, rstd, N, C, mine); break;
        default: rms_backward_stream<8>(dinp, dout, inp, wsh, rstd, N, C, mine); break;
    }
    rms_backward_finish(dw, C, 32, slots, &ticket);
}
// --- the two-kernel path, for rows too long for the fused kernel's shared memory
__global__ void rmsnorm_backward_dinp_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* w,
                                             const float* rstd, int N, int C) {
    int lane = threadIdx.x & 31;
    int i = blockIdx.x * RMS_WARPS + (threadIdx.x >> 5);
    if (i >= N) return;
    const floatX* x = inp + (size_t)i * C;
    const floatX* dy = dout + (size_t)i * C;
    floatX* dx = dinp + (size_t)i * C;
    float r = rstd[i];
    float dot = 0.0f;  // sum_k dy_k w_k x_k
    for (int c = lane; c < C; c += 32) dot += (float)dy[c] * (float)w[c] * (float)x[c];
    dot = rms_group_sum(dot, 32);
    float k = dot * r * r * r / C;
    for (int c = lane; c < C; c += 32)
        dx[c] = (floatX)((float)dx[c] + (r * (float)w[c] * (float)dy[c] - k * (float)x[c]));
}

#define RMSNORM_DW_CH 32      // channels per block (threadIdx.x)
#define RMSNORM_DW_SLICES 16  // row slices per block (threadIdx.y)

// A block owns 32 channels (threadIdx.x) and has 16 row slices (threadIdx.y): slice y
// sums rows y, y+16, ... in order, then one thread per channel adds the 16 partials in order.
__global__ void rmsnorm_backward_dw_kernel(floatX* dw, const floatX* dout, const floatX* inp, const float* rstd, int N,
                                           int C) {
    __shared__ float part[RMSNORM_DW_SLICES][RMSNORM_DW_CH];
    int tx = threadIdx.x, ty = threadIdx.y;
    int c = blockIdx.x * RMSNORM_DW_CH + tx;
    float acc = 0.0f;
    if (c < C)
        for (int i = ty; i < N; i += RMSNORM_DW_SLICES)
            acc += (float)dout[(size_t)i * C + c] * (float)inp[(size_t)i * C + c] * rstd[i];
    part[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && c < C) {
        float sum = 0.0f;
        for (int y = 0; y < RMSNORM_DW_SLICES; y++) sum += part[y][tx];
        dw[c] = (floatX)((float)dw[c] + sum);
    }
}

// the fused kernel's shape: warps per block (0: C too large, use the two-kernel path) and blocks
static inline void rms_backward_shape(int N, int C, int* warps, int* blocks, size_t* smem) {
    int nch = (int)ceil_div((size_t)C, RMS_VEC), L = rms_lanes(nch);
    size_t per_warp = (size_t)(32 / L) * rms_slice(nch, L) * sizeof(float);
    size_t w = RMS_BWD_SMEM_MAX / per_warp;
    *warps = (int)(w < RMS_WARPS ? w : RMS_WARPS);
    *smem = (size_t)*warps * per_warp;
    if (*warps == 0) { *blocks = 0; return; }
    size_t rows_per_block = (size_t)*warps * (32 / L) * RMS_BWD_ROWS_PER_SLOT;
    size_t g = ceil_div((size_t)N, rows_per_block);
    size_t gmax = RMS_SCRATCH_FLOATS / (size_t)C;
    if (g > RMS_BWD_MAX_BLOCKS) g = RMS_BWD_MAX_BLOCKS;
    if (g > gmax) g = gmax;
    *blocks = (int)g;
}

// The fused kernels' shared memory, opted in once a process up to what the device allows:
// *fused for rmsnorm_backward_kernel (the dw slots), *stream for the streaming kernel (the
// slots and w). A device that allows less than a shape needs gets the two-kernel path or the
// per-row kernel (the shape itself never depends on the device, so neither does the order of
// dw's sums, and the per-row kernel gives the streaming kernel's bits).
static inline void rms_backward_smem_allowed(int* fused, int* stream) {
    static int f = -1, st = -1;
    if (f < 0) {
        int dev = 0, optin = 0;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        const int smax = RMS_BWD_SMEM_MAX + 32 * RMS_MAX_NPL * (int)sizeof(RmsChunk);
        f = optin < RMS_BWD_SMEM_MAX ? optin : RMS_BWD_SMEM_MAX;
        st = optin < smax ? optin : smax;
        if (f > 48 * 1024)
            cudaCheck(cudaFuncSetAttribute(rmsnorm_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, f));
        else f = 48 * 1024;
        if (st > 48 * 1024)
            cudaCheck(cudaFuncSetAttribute(rmsnorm_backward_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           st));
        else st = 48 * 1024;
    }
    *fused = f;
    *stream = st;
}

// dinp += dL/dx, dw += dL/dw
static inline void rmsnorm_backward(floatX* dinp, floatX* dw, const floatX* dout, const floatX* inp, const floatX* w,
                                    const float* rstd, int N, int C, stream_t s) {
    if (N <= 0 || C <= 0) return;
    int fused, stream;
    rms_backward_smem_allowed(&fused, &stream);
    int warps, blocks;
    size_t smem;
    rms_backward_shape(N, C, &warps, &blocks, &smem);
    if (warps == 0 || smem > (size_t)fused) {
        unsigned grid = (unsigned)ceil_div((size_t)N, RMS_WARPS);
        rmsnorm_backward_dinp_kernel<<<grid, 32 * RMS_WARPS, 0, s>>>(dinp, dout, inp, w, rstd, N, C);
        cudaCheck(cudaGetLastError());
        dim3 block(RMSNORM_DW_CH, RMSNORM_DW_SLICES);
        unsigned grid_dw = (unsigned)ceil_div((size_t)C, RMSNORM_DW_CH);
        rmsnorm_backward_dw_kernel<<<grid_dw, block, 0, s>>>(dw, dout, inp, rstd, N, C);
        cudaCheck(cudaGetLastError());
        return;
    }
    int vec = rms_vec_ok(C, dinp, dout, inp, w);
    int nch = (int)ceil_div((size_t)C, RMS_VEC), L = rms_lanes(nch);
    int spl = nch >= 32 ? rms_npl(nch, 32, RMS_MAX_NPL) : 0;  // L = 32 from 32 chunks on
    size_t ssmem = smem + (size_t)nch * sizeof(RmsChunk);
    if (vec && spl > 0 && ssmem <= (size_t)stream) {
        rmsnorm_backward_stream_kernel<<<blocks, 32 * warps, ssmem, s>>>(dinp, dw, dout, inp, w, rstd, N, C, spl);
        cudaCheck(cudaGetLastError());
        return;
    }
    int npl = rms_npl(nch, L, RMS_BWD_MAX_NPL);
    rmsnorm_backward_kernel<<<blocks, 32 * warps, smem, s>>>(dinp, dw, dout, inp, w, rstd, N, C, vec, npl, L);
    cudaCheck(cudaGetLastError());
}
