/*
The bias of an nn.Linear, for the video DiT (docs/design.md 9.2; matmul_forward has none).
CPU twin: llmc/kernels/cpu/bias.h. out is [N, OC] row-major.
  bias_forward:  out[r, oc] += bias[oc]. Blocks walk rows (grid-stride), threads walk
                 columns in 16-byte vectors when OC is a multiple of the vector width and
                 both pointers are 16-byte aligned; else one element at a time (any OC,
                 any alignment).
  bias_backward: dbias[oc] += sum_r dout[r, oc], accumulated into the gradient like
                 matmul_backward_weight. Deterministic without atomics: a block owns 32
                 columns (threadIdx.x) and has 16 row slices (threadIdx.y); slice y adds
                 rows y, y+16, ... in order, then one thread per column adds the 16
                 partials in order. With scratch (bias_backward_scratch_floats(N, OC)
                 floats, planned by the caller) and more than one chunk of BIAS_CHUNK
                 rows, in two stages: stage 1 has such a block per (32 columns, chunk)
                 and writes fp32 partials, stage 2 adds each column's chunk partials in
                 chunk order into dbias. One stage has only ceil(OC/32) blocks (36 for
                 OC = 1152 on a 132-SM GPU), each walking N/16 rows. Without scratch, or
                 with one chunk, the one-stage kernel. The partitions are fixed by
                 constants: the same sum on every run and every GPU. Callers of one
                 scratch buffer must stay on one stream.
Both faster paths come from dev/cuda/bias.cu's version 2 (H200, docs/results/
gpu_h200_2026-11-26_call2.log): N = 32768, OC = 1152 forward 0.093 -> 0.039 ms, backward
0.229 -> 0.037 ms; OC = 4608 forward 0.370 -> 0.146, backward 0.250 -> 0.117 ms.
*/
#pragma once
#include "../core/common.h"

static inline void bias_check_sizes(const char* who, int N, int OC) {
    if (N < 0 || OC < 0) FAIL("%s: negative size (N=%d OC=%d)", who, N, OC);
}

#define BIAS_MAX_GRID 65535  // blocks of bias_forward (grid-stride over rows)
#define BIAS_BWD_CH 32       // bias_backward: columns per block (threadIdx.x)
#define BIAS_BWD_SLICES 16   // bias_backward: row slices per block (threadIdx.y)
#define BIAS_CHUNK 256       // bias_backward, two stages: rows per stage-1 block
#define BIAS_VEC (16 / (int)sizeof(floatX))
struct alignas(16) BiasVec { floatX v[BIAS_VEC]; };

static inline int bias_chunks(int N) { return N > 0 ? (int)ceil_div((size_t)N, BIAS_CHUNK) : 1; }
// floats of scratch bias_backward's two stages need (the same on the CPU twin)
static inline size_t bias_backward_scratch_floats(int N, int OC) { return (size_t)bias_chunks(N) * OC; }

__global__ void bias_forward_kernel(floatX* out, const floatX* bias, int N, int OC) {
    for (int r = blockIdx.x; r < N; r += gridDim.x) {
        floatX* o = out + (size_t)r * OC;
        for (int c = threadIdx.x; c < OC; c += blockDim.x) o[c] = (floatX)((float)o[c] + (float)bias[c]);
    }
}

// rows of OC / BIAS_VEC vectors: 16-byte loads, 2-4x fewer memory instructions
__global__ void bias_forward_vec_kernel(floatX* out, const floatX* bias, int N, int OC) {
    const int nvec = OC / BIAS_VEC;
    for (int r = blockIdx.x; r < N; r += gridDim.x) {
        BiasVec* o = (BiasVec*)(out + (size_t)r * OC);
        for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
            BiasVec a = o[v], b = ((const BiasVec*)bias)[v];
            for (int e = 0; e < BIAS_VEC; e++) a.v[e] = (floatX)((float)a.v[e] + (float)b.v[e]);
            o[v] = a;
        }
    }
}

static inline bool bias_aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// threads for rows of n items: 256, or fewer (whole warps) for short rows
static inline unsigned bias_block(int n) { return n >= 256 ? 256u : (unsigned)ceil_div((size_t)n, 32) * 32u; }

static inline void bias_forward(floatX* out, const floatX* bias, int N, int OC, stream_t s) {
    bias_check_sizes("bias_forward", N, OC);
    if (N == 0 || OC == 0) return;
    unsigned grid = (unsigned)(N < BIAS_MAX_GRID ? N : BIAS_MAX_GRID);
    if (OC % BIAS_VEC == 0 && bias_aligned16(out) && bias_aligned16(bias))
        bias_forward_vec_kernel<<<grid, bias_block(OC / BIAS_VEC), 0, s>>>(out, bias, N, OC);
    else
        bias_forward_kernel<<<grid, bias_block(OC), 0, s>>>(out, bias, N, OC);
    cudaCheck(cudaGetLastError());
}

__global__ void bias_backward_kernel(floatX* dbias, const floatX* dout, int N, int OC) {
    __shared__ float part[BIAS_BWD_SLICES][BIAS_BWD_CH];
    int tx = threadIdx.x, ty = threadIdx.y;
    int c = blockIdx.x * BIAS_BWD_CH + tx;
    float acc = 0.0f;
    if (c < OC)
        for (int r = ty; r < N; r += BIAS_BWD_SLICES) acc += (float)dout[(size_t)r * OC + c];
    part[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && c < OC) {
        float sum = 0.0f;
        for (int k = 0; k < BIAS_BWD_SLICES; k++) sum += part[k][tx];
        dbias[c] = (floatX)((float)dbias[c] + sum);
    }
}

// two stages, 1: block (32 columns, chunk blockIdx.y); slice ty adds rows ty, ty+16, ...
// of the chunk in order, then the 16 slices in order, into part[chunk, column]
__global__ void bias_backward_partial_kernel(float* part, const floatX* dout, int N, int OC) {
    __shared__ float p[BIAS_BWD_SLICES][BIAS_BWD_CH];
    int tx = threadIdx.x, ty = threadIdx.y, s = blockIdx.y;
    int c = blockIdx.x * BIAS_BWD_CH + tx;
    int r1 = min(N, (s + 1) * BIAS_CHUNK);
    float acc = 0.0f;
    if (c < OC)
        for (int r = s * BIAS_CHUNK + ty; r < r1; r += BIAS_BWD_SLICES) acc += (float)dout[(size_t)r * OC + c];
    p[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && c < OC) {
        float sum = 0.0f;
        for (int k = 0; k < BIAS_BWD_SLICES; k++) sum += p[k][tx];
        part[(size_t)s * OC + c] = sum;
    }
}

// two stages, 2: one thread per column adds the chunks in chunk order
__global__ void bias_backward_finish_kernel(floatX* dbias, const float* part, int OC, int chunks) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) return;
    float sum = 0.0f;
    for (int s = 0; s < chunks; s++) sum += part[(size_t)s * OC + c];
    dbias[c] = (floatX)((float)dbias[c] + sum);
}

// dbias += column sums of dout. scratch: NULL (one stage) or bias_backward_scratch_floats(N, OC)
// floats of the caller's plan, used by no other stream meanwhile
static inline void bias_backward(floatX* dbias, const floatX* dout, int N, int OC, float* scratch, stream_t s) {
    bias_check_sizes("bias_backward", N, OC);
    if (N == 0 || OC == 0) return;
    dim3 block(BIAS_BWD_CH, BIAS_BWD_SLICES);
    unsigned cols = (unsigned)ceil_div((size_t)OC, BIAS_BWD_CH);
    int chunks = bias_chunks(N);
    if (!scratch || chunks == 1 || chunks > BIAS_MAX_GRID) {  // one chunk: stage 2 would add nothing
        bias_backward_kernel<<<cols, block, 0, s>>>(dbias, dout, N, OC);
        cudaCheck(cudaGetLastError());
        return;
    }
    bias_backward_partial_kernel<<<dim3(cols, (unsigned)chunks), block, 0, s>>>(scratch, dout, N, OC);
    cudaCheck(cudaGetLastError());
    bias_backward_finish_kernel<<<(unsigned)ceil_div((size_t)OC, 256), 256, 0, s>>>(dbias, scratch, OC, chunks);
    cudaCheck(cudaGetLastError());
}
