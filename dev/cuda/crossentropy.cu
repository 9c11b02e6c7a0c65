/*
Ladder for llmc/kernels/crossentropy.cuh (fused softmax + cross-entropy + dlogits, in place).
  version 1: one block per row, three passes over the row: max, sum of exp, write, with
             2-byte loads (the llmc kernel before version 3, kept here)
  version 2: one block per row, max and sum in one pass (online softmax: each thread
             keeps a running max and a sum rescaled when the max grows), then write:
             one read of the row fewer; 2-byte loads
  version 3: the llmc kernel: version 2's two passes over 16-byte chunks (one load per
             8 bf16), element by element when the row is not 16-byte aligned (same
             arithmetic: bitwise the same result)
Validated against the CPU twin (llmc/kernels/cpu/crossentropy.h) on random logits, odd V,
with and without dlogits; offset=1 shapes start the logits one element into their
allocation (no row 16-byte aligned).

Vocabulary-parallel cross-entropy (--shard-vocab 1 --tp N: each rank holds a logit shard
[N, Vs], Vs = ceil(V / tp), the last one padded; three launches with the trainer's
all-reduces between them, see llmc/kernels/crossentropy.cuh):
  version 4: one block per row, 2-byte loads, a shared-memory block reduction per pass
  version 5: the llmc launchers crossentropy_vp_max / _sums / _finish (16-byte chunks
             when Vs is a multiple of 8 bf16 and the shard is aligned)
Validated by running every shard of a random [N, V] matrix, the MAX and SUM all-reduces
done on the host in rank order: against the twins run the same way, and the losses and
the concatenated dlogits against the whole-vocabulary twin; the padding columns (filled
with logits larger than any real one) must come back exactly 0.

  version 6: version 3 with the row read from global memory once: it stays on chip from
             the loads to the dlogits stores, so 2 bytes a logit are read and 2 written
             instead of 4 read (version 3 reads the row again to write it) and 2 written.
Layout: version 3's threads and chunks (CE_THREADS = 512, thread t takes the 16-byte chunks
t, t + 512, ...: round j is chunk t + 512 j), so the online (max, sum) sees the same chunks
in the same order and the reductions are version 3's: the losses and dlogits are bitwise
version 3's (the ladder compares them at every validation shape: under dev/emu that checks
the order of the arithmetic, on the GPU also nvcc's contraction choices). Rows of up to 32 rounds
(16384 chunks: 131072 bf16 columns, 65536 fp32) whose length is a multiple of 8 bf16 and
that are 16-byte aligned; any other row goes to version 3.
  Why a split: llama3's row is 128256 bf16 = 16032 chunks = 32 rounds (the last one 160
  threads wide) = 250.5 KB. An SM has 64K 32-bit registers (256 KB) and at most 227 KB of
  shared memory per block; at 512 threads a thread may have 128 registers, and 32 rounds of
  4 words are all 128. Rounds 0-15 live in registers (64 words, kept as 32-bit words: a
  bf16 chunk loaded as 8 bf16 is unpacked into 8 registers, and the row then spills), rounds
  16-31 in dynamic shared memory (16 x 512 x 16 B = 128 KB, only the rounds the row has).
  ptxas (sm_90): 96 registers, no spills, 256 B static shared memory. One block an SM
  (48K registers and 128 KB: no room for a second row).
  The shared-memory rounds go global -> shared by cp.async, issued before the register
  loads, so the whole row (256 KB an SM, ~33 MB on 132 SMs) is in flight at once; the
  online sum starts on round 0 while later rounds land.
  Rows of up to 8 rounds (32768 bf16 columns: llama2's 32000 = 4000 chunks, 8 rounds) take
  a second kernel: registers only (32 words), 64 registers, two blocks an SM, so one row's
  reduction and stores overlap the other's loads.
Predicted before any GPU ran it (H200, copy rate measured 4.25 TB/s, 132 SMs, ~1.98 GHz):
  llama3-1B, N = 8192, V = 128256: 2.1 GB read + 2.1 GB written = 4.2 GB. The SM alternates
  between a read phase (the row's loads issued at once, pass 1's max/sum as they land) and
  a write phase (exp, stores), with one barrier between. The SM's own work: ~12
  instructions a logit a pass (a non-fast-math expf is ~8 with one MUFU.EX2), 2 passes x
  128256 / 128 lanes a clock = ~24K cycles = ~12 us a row, against the row's 500 KB at
  its share of 4.25 TB/s (1/132): 15.6 us. Pass 1's half hides under its own arrival; the
  write half (~6 us) has no loads of that SM in flight. That costs little as long as the
  SMs drift out of step (rows finish at different times after the first): at any moment
  some SMs read with up to 256 KB outstanding each, far above the ~30 KB an SM needs at
  ~1 us of loaded latency, while others write, so HBM sees a steady mix. The risk: 12 us
  of compute against 15.6 us of memory leaves little slack, so the kernel is close to
  compute-bound. Predicted: ~78% of the copy rate, 3.3 TB/s r+w, 4.2 GB / 3.3 TB/s =
  1.27 ms plus the 63rd wave (8 rows) = ~1.3 ms a step (range 1.2-1.5 ms) against version
  3's 2.14 ms in the trainer's profile (1.96 TB/s counted as r+w, 46%).
  V = 32000 (llama2/stories), N = 8192: 1.05 GB r+w, two rows an SM: ~0.33 ms (3.2 TB/s).
  This ladder's timing shapes: N = 1024, V = 128256 with dlogits ~0.16 ms (3.3 TB/s r+w;
  version 3: 0.260 ms), loss only ~0.09 ms (2.9 TB/s of logits: one read, pass 1's work
  under the arrival; version 3: 0.127 ms); N = 4096, V = 32000 with dlogits ~0.17 ms
  (version 3: 0.278 ms), loss only ~0.09 ms (version 3: 0.165 ms).
*/
#include "ladder.h"
#include "../../llmc/kernels/crossentropy.cuh"
#include "../../llmc/kernels/tensorcore.cuh"  // cp.async (version 6)

// version 1: block reduction (op 0: sum, 1: max) through shared memory, every thread gets the result
static __device__ float ce_v1_reduce(float v, int op, float* shared) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int off = 16; off > 0; off >>= 1) {
        float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = op ? fmaxf(v, o) : v + o;
    }
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = shared[0];
    for (int w = 1; w < nwarps; w++) v = op ? fmaxf(v, shared[w]) : v + shared[w];
    return v;
}
// the row's loss from its log-sum-exp, then (training) dlogits = (softmax - onehot) * dloss
// in place; versions 1 and 2 differ only in how they find lse
static __device__ void ce_finish_row(float* losses, floatX* x, const int* targets, int i, int V, float lse, float dloss,
                                     int write_dlogits) {
    int tgt = targets[i];
    if (threadIdx.x == 0) losses[i] = lse - (float)x[tgt];
    __syncthreads();
    if (write_dlogits)
        for (int j = threadIdx.x; j < V; j += blockDim.x) {
            float p = expf((float)x[j] - lse) * dloss;
            x[j] = (floatX)(j == tgt ? p - dloss : p);
        }
}

__global__ void __launch_bounds__(CE_THREADS) crossentropy_v1_kernel(float* losses, floatX* logits, const int* targets,
                                                                     int V, float dloss, int write_dlogits) {
    __shared__ float red[32];
    int i = blockIdx.x;
    floatX* x = logits + (size_t)i * V;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, (float)x[j]);
    m = ce_v1_reduce(m, 1, red);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) sum += expf((float)x[j] - m);
    sum = ce_v1_reduce(sum, 0, red);
    ce_finish_row(losses, x, targets, i, V, m + logf(sum), dloss, write_dlogits);
}

__global__ void __launch_bounds__(CE_THREADS) crossentropy_v2_kernel(float* losses, floatX* logits, const int* targets,
                                                                     int V, float dloss, int write_dlogits) {
    __shared__ float sm[32], ss[32];
    int i = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    floatX* x = logits + (size_t)i * V;
    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        float xj = (float)x[j];
        if (xj > m) { s = s * expf(m - xj) + 1.0f; m = xj; }  // m = -inf the first time: s = 0 * 0 + 1
        else s += expf(xj - m);
    }
    // combine (m, s) pairs: warp tree, then warps in order
    for (int off = 16; off > 0; off >>= 1) {
        float mo = __shfl_xor_sync(0xffffffffu, m, off), so = __shfl_xor_sync(0xffffffffu, s, off);
        float mn = fmaxf(m, mo);
        s = (m == -INFINITY ? 0.0f : s * expf(m - mn)) + (mo == -INFINITY ? 0.0f : so * expf(mo - mn));
        m = mn;
    }
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    m = sm[0]; s = ss[0];
    for (int w = 1; w < nw; w++) {
        float mn = fmaxf(m, sm[w]);
        s = (m == -INFINITY ? 0.0f : s * expf(m - mn)) + (sm[w] == -INFINITY ? 0.0f : ss[w] * expf(sm[w] - mn));
        m = mn;
    }
    ce_finish_row(losses, x, targets, i, V, m + logf(s), dloss, write_dlogits);
}

// ---------------------------------------------------------------------------------
// version 6: the row read from global memory once and kept on chip (see the top comment)
#define CE6_R_SMALL 8  // rounds in registers, the small variant (no shared memory)
#define CE6_R 16       // rounds in registers, the large variant
#define CE6_S 16       // rounds in dynamic shared memory, the large variant

// a chunk as four 32-bit words: a bf16 chunk loaded as CeChunk is unpacked into 16-bit
// halves, one register each (8 a chunk), which doubles the registers the row needs;
// words are unpacked at each use (a shift or a mask: the exact bf16 -> fp32 conversion)
struct alignas(16) Ce6Chunk { unsigned w[4]; };
static __device__ __forceinline__ float ce6_get(const Ce6Chunk& c, int k) {
    if (sizeof(floatX) == 4) return __uint_as_float(c.w[k]);
    unsigned w = c.w[k >> 1];
    return __uint_as_float(k & 1 ? w & 0xffff0000u : w << 16);
}
// version 3's pass-1 step on one whole chunk (the row is a multiple of CE_VEC here)
static __device__ __forceinline__ void ce6_accumulate(float& m, float& s, const Ce6Chunk& c) {
    float f[CE_VEC];
    for (int k = 0; k < CE_VEC; k++) f[k] = ce6_get(c, k);
    float cm = f[0];
    for (int k = 1; k < CE_VEC; k++) cm = fmaxf(cm, f[k]);
    if (cm > m) {
        s = m == -INFINITY ? 0.0f : s * expf(m - cm);
        m = cm;
    }
    for (int k = 0; k < CE_VEC; k++) s += expf(f[k] - m);
}
// version 3's dlogits of one chunk, from its on-chip copy c; element k is the target when
// k == tk (tk outside 0 .. CE_VEC - 1: none)
static __device__ __forceinline__ void ce6_store(Ce6Chunk* dst, const Ce6Chunk& c, float lse, float dloss, int tk) {
    CeChunk o;
    for (int k = 0; k < CE_VEC; k++) {
        float pk = expf(ce6_get(c, k) - lse) * dloss;
        o.v[k] = (floatX)(k == tk ? pk - dloss : pk);
    }
    *(CeChunk*)dst = o;
}

// thread t's chunks are version 3's: t + j * CE_THREADS, j = 0 .. rounds - 1; rounds
// j < R live in registers (fully unrolled: constant indices), rounds R .. rounds - 1 in
// dynamic shared memory, slot (j - R) * CE_THREADS + t (a warp's 16-byte slots are
// consecutive: no bank conflicts). Chunk j of the thread is xc[j * CE_THREADS]: one base
// and constant offsets, so no per-chunk address stays live from the loads to the stores.
template <int R>
static __device__ void ce6_row(float* losses, floatX* logits, const int* targets, int V, float dloss, int write_dlogits,
                               Ce6Chunk* ce6_rest, float* sm, float* ss) {
    int i = blockIdx.x, t = threadIdx.x, lane = t & 31, warp = t >> 5, nwarps = blockDim.x >> 5;
    floatX* x = logits + (size_t)i * V;
    Ce6Chunk* xc = (Ce6Chunk*)x + t;
    int nch = V / CE_VEC, rounds = (nch + CE_THREADS - 1) / CE_THREADS;
    int mine = nch - t;  // the thread has round j when j * CE_THREADS < mine
    int tgt = targets[i];
    // with the row, before the reduction's barrier: the writes after it need no other
    float xt = t == 0 ? (float)x[tgt] : 0.0f;
    // the shared-memory rounds first: they travel without registers while the register rounds load
    for (int j = R; j < rounds; j++)
        if (j * CE_THREADS < mine) tc_cp_async_16(&ce6_rest[(j - R) * CE_THREADS + t], xc + j * CE_THREADS, true);
    tc_cp_async_commit();
    Ce6Chunk reg[R];
#pragma unroll
    for (int j = 0; j < R; j++)
        if (j * CE_THREADS < mine) reg[j] = xc[j * CE_THREADS];
    float m = -INFINITY, s = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++)
        if (j * CE_THREADS < mine) ce6_accumulate(m, s, reg[j]);
    tc_cp_async_wait<0>();  // this thread's own copies: no barrier needed to read them
    for (int j = R; j < rounds; j++)
        if (j * CE_THREADS < mine) ce6_accumulate(m, s, ce6_rest[(j - R) * CE_THREADS + t]);
    // ce_row's combination line for line (its bits); one helper serves both once llmc takes this version
    for (int off = 16; off > 0; off >>= 1) {
        float mo = __shfl_xor_sync(0xffffffffu, m, off), so = __shfl_xor_sync(0xffffffffu, s, off);
        ce_combine(m, s, mo, so);
    }
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    m = sm[0]; s = ss[0];
    for (int w = 1; w < nwarps; w++) ce_combine(m, s, sm[w], ss[w]);
    float lse = m + logf(s);
    if (t == 0) losses[i] = lse - xt;
    if (!write_dlogits) return;
    int tk = tgt - t * CE_VEC;  // the target's offset from the thread's round-0 chunk
#pragma unroll
    for (int j = 0; j < R; j++)
        if (j * CE_THREADS < mine) ce6_store(xc + j * CE_THREADS, reg[j], lse, dloss, tk - j * CE_THREADS * CE_VEC);
    for (int j = R; j < rounds; j++)
        if (j * CE_THREADS < mine)
            ce6_store(xc + j * CE_THREADS, ce6_rest[(j - R) * CE_THREADS + t], lse, dloss, tk - j * CE_THREADS * CE_VEC);
}
// rows of up to CE6_R_SMALL rounds: registers only, two blocks an SM
__global__ void __launch_bounds__(CE_THREADS, 2) crossentropy_v6_small_kernel(float* losses, floatX* logits,
                                                                              const int* targets, int V, float dloss,
                                                                              int write_dlogits) {
    __shared__ float sm[32], ss[32];
    ce6_row<CE6_R_SMALL>(losses, logits, targets, V, dloss, write_dlogits, nullptr, sm, ss);
}
// rows of up to CE6_R + CE6_S rounds: one block an SM
__global__ void __launch_bounds__(CE_THREADS, 1) crossentropy_v6_kernel(float* losses, floatX* logits, const int* targets,
                                                                        int V, float dloss, int write_dlogits) {
    extern __shared__ Ce6Chunk ce6_rest[];
    __shared__ float sm[32], ss[32];
    ce6_row<CE6_R>(losses, logits, targets, V, dloss, write_dlogits, ce6_rest, sm, ss);
}

// the llmc kernel (version 3) for rows that are not whole aligned chunks, that exceed the
// on-chip capacity of CE6_R + CE6_S rounds, or whose shared-memory rounds exceed what the
// device lets a block have (H100/H200: 227 KB, enough for CE6_S = 16 rounds: 128 KB)
static void crossentropy_v6(float* losses, floatX* logits, const int* targets, int N, int V, float dloss, int wd) {
    int nch = V / CE_VEC, rounds = (nch + CE_THREADS - 1) / CE_THREADS, dev = 0, optin = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    int smem_rounds = rounds > CE6_R ? rounds - CE6_R : 0;
    if (N <= 0 || V <= 0 || V % CE_VEC != 0 || ((uintptr_t)logits & 15) != 0 || rounds > CE6_R + CE6_S ||
        (size_t)smem_rounds * CE_THREADS * sizeof(Ce6Chunk) + 2 * 32 * sizeof(float) > (size_t)optin) {  // + sm, ss
        crossentropy_forward_backward(losses, logits, targets, N, V, dloss, wd, 0);
        return;
    }
    if (rounds <= CE6_R_SMALL) {
        crossentropy_v6_small_kernel<<<N, CE_THREADS>>>(losses, logits, targets, V, dloss, wd);
    } else {
        size_t smem = (size_t)smem_rounds * CE_THREADS * sizeof(Ce6Chunk);
        cudaCheck(cudaFuncSetAttribute(crossentropy_v6_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        crossentropy_v6_kernel<<<N, CE_THREADS, smem>>>(losses, logits, targets, V, dloss, wd);
    }
    cudaCheck(cudaGetLastError());
}

static void run_ce(int version, float* losses, floatX* logits, const int* targets, int N, int V, float dloss, int wd) {
    if (version == 1) {
        crossentropy_v1_kernel<<<N, CE_THREADS>>>(losses, logits, targets, V, dloss, wd);
        cudaCheck(cudaGetLastError());
    } else if (version == 2) {
        crossentropy_v2_kernel<<<N, CE_THREADS>>>(losses, logits, targets, V, dloss, wd);
        cudaCheck(cudaGetLastError());
    } else if (version == 6) {
        crossentropy_v6(losses, logits, targets, N, V, dloss, wd);
    } else {
        crossentropy_forward_backward(losses, logits, targets, N, V, dloss, wd, 0);
    }
}

static void run_version(int version, int N, int V, int wd, int off, uint64_t seed) {
    std::vector<float> logits = rand_floatX((size_t)N * V, -4.0f, 4.0f, seed + 1);
    LadderRng r(seed);
    std::vector<int> tg(N);
    for (int i = 0; i < N; i++) tg[i] = r.below(V);
    float dloss = 1.0f / N;
    float* d_losses = (float*)dev_malloc(N * sizeof(float));
    std::vector<float> padded(off, 1.0f);
    padded.insert(padded.end(), logits.begin(), logits.end());
    floatX* d_buf = upload_x(padded);
    floatX* d_logits = d_buf + off;
    int* d_tg = upload_i(tg);
    std::vector<float> r_losses(N), r_logits = logits;
    ref_crossentropy_forward_backward(r_losses.data(), r_logits.data(), tg.data(), N, V, dloss, wd);
    run_ce(version, d_losses, d_logits, d_tg, N, V, dloss, wd);
    printf("  v%d N=%d V=%d write_dlogits=%d offset=%d\n", version, N, V, wd, off);
    // losses: fp32 on identical inputs; the sum of V exp terms in another order, expf
    // within 2 ulp: relative error ~ 1e-6 of lse; loss = lse - x is O(1..10): atol 1e-5.
    check("losses", download_f(d_losses, N), r_losses, 1e-5, 1e-5);
    // dlogits = dloss * (p - onehot): p relative error ~1e-6 (fp32) plus, in bf16
    // builds, one rounding (<= 2^-8 relative: 8 significant bits; rtol 2^-7); values are >= 0 except the target: atol tiny.
    double rt = LADDER_FP32 ? 2e-5 : ldexp(1.0, -7);
    check(wd ? "dlogits" : "logits untouched", download_x(d_logits, (size_t)N * V), r_logits, 1e-3 * dloss / V, rt);
    if (version == 3 || version == 6) {  // deterministic: a second run on the same input, bitwise
        std::vector<float> g_losses = download_f(d_losses, N), g_logits = download_x(d_logits, (size_t)N * V);
        upload_x_to(d_buf, padded);
        run_ce(version, d_losses, d_logits, d_tg, N, V, dloss, wd);
        check_same("losses", download_f(d_losses, N), g_losses);
        check_same(wd ? "dlogits" : "logits untouched", download_x(d_logits, (size_t)N * V), g_logits);
        if (version == 6) {  // the same arithmetic in the same order as the llmc kernel: its bits
            upload_x_to(d_buf, padded);
            run_ce(3, d_losses, d_logits, d_tg, N, V, dloss, wd);
            check_same("losses vs v3 (llmc)", download_f(d_losses, N), g_losses);
            check_same(wd ? "dlogits vs v3 (llmc)" : "logits vs v3 (llmc)", download_x(d_logits, (size_t)N * V), g_logits);
        }
    }
    dev_free(d_losses); dev_free(d_buf); dev_free(d_tg);
}

// ---------------------------------------------------------------------------------
// vocabulary-parallel cross-entropy: version 4 (simple), version 5 (llmc)
__global__ void __launch_bounds__(CE_THREADS) crossentropy_vp_v4_max_kernel(float* rowmax, const floatX* logits, int Vs,
                                                                            int n_valid) {
    __shared__ float red[32];
    const floatX* x = logits + (size_t)blockIdx.x * Vs;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n_valid; j += blockDim.x) m = fmaxf(m, (float)x[j]);
    m = ce_v1_reduce(m, 1, red);
    if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}
__global__ void __launch_bounds__(CE_THREADS) crossentropy_vp_v4_sums_kernel(float* sums, const floatX* logits,
                                                                             const float* rowmax, const int* targets,
                                                                             int N, int Vs, int v0, int n_valid) {
    __shared__ float red[32];
    int i = blockIdx.x;
    const floatX* x = logits + (size_t)i * Vs;
    float s = 0.0f;
    for (int j = threadIdx.x; j < n_valid; j += blockDim.x) s += expf((float)x[j] - rowmax[i]);
    s = ce_v1_reduce(s, 0, red);
    if (threadIdx.x == 0) {
        int t = targets[i] - v0;
        sums[i] = s;
        sums[N + i] = t >= 0 && t < n_valid ? (float)x[t] : 0.0f;
    }
}
__global__ void __launch_bounds__(CE_THREADS) crossentropy_vp_v4_finish_kernel(float* losses, floatX* logits,
                                                                               const float* rowmax, const float* sums,
                                                                               const int* targets, int N, int Vs, int v0,
                                                                               int n_valid, float dloss, int wd) {
    int i = blockIdx.x;
    float M = rowmax[i], S = sums[i];
    if (threadIdx.x == 0) losses[i] = logf(S) + M - sums[N + i];
    if (!wd) return;
    floatX* x = logits + (size_t)i * Vs;
    int t = targets[i] - v0;
    for (int j = threadIdx.x; j < Vs; j += blockDim.x) {
        float p = j < n_valid ? expf((float)x[j] - M) * (dloss / S) : 0.0f;
        x[j] = (floatX)(j == t && j < n_valid ? p - dloss : p);
    }
}

// pass 0: max, 1: sums, 2: finish, of one rank's shard
static void run_vp_pass(int version, int pass, float* out, floatX* logits, const float* rowmax, const float* sums,
                        const int* targets, int N, int Vs, int v0, int nv, float dloss, int wd) {
    if (version == 4) {
        if (pass == 0) crossentropy_vp_v4_max_kernel<<<N, CE_THREADS>>>(out, logits, Vs, nv);
        if (pass == 1) crossentropy_vp_v4_sums_kernel<<<N, CE_THREADS>>>(out, logits, rowmax, targets, N, Vs, v0, nv);
        if (pass == 2)
            crossentropy_vp_v4_finish_kernel<<<N, CE_THREADS>>>(out, logits, rowmax, sums, targets, N, Vs, v0, nv, dloss, wd);
        cudaCheck(cudaGetLastError());
    } else {
        if (pass == 0) crossentropy_vp_max(out, logits, N, Vs, nv, 0);
        if (pass == 1) crossentropy_vp_sums(out, logits, rowmax, targets, N, Vs, v0, nv, 0);
        if (pass == 2) crossentropy_vp_finish(out, logits, rowmax, sums, targets, N, Vs, v0, nv, dloss, wd, 0);
    }
}

static void run_vp_version(int version, int N, int V, int tp, int off, uint64_t seed) {
    const int Vs = (V + tp - 1) / tp;
    std::vector<float> logits = rand_floatX((size_t)N * V, -4.0f, 4.0f, seed + 1);
    LadderRng r(seed);
    std::vector<int> tg(N);
    for (int i = 0; i < N; i++) tg[i] = r.below(V);
    tg[0] = V - 1;  // the last shard's last valid column
    const float dloss = 1.0f / N;
    printf("  v%d N=%d V=%d tp=%d Vs=%d offset=%d\n", version, N, V, tp, Vs, off);
    // shards with padding columns larger than any logit: a kernel that reads them is far off
    std::vector<std::vector<float>> sh(tp), ref_sh;
    std::vector<int> nvs(tp);
    for (int k = 0; k < tp; k++) {
        int v0 = k * Vs;
        nvs[k] = V - v0 < 0 ? 0 : (V - v0 < Vs ? V - v0 : Vs);
        sh[k] = rand_floatX((size_t)N * Vs, 20.0f, 30.0f, seed + 10 + k);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < nvs[k]; j++) sh[k][(size_t)i * Vs + j] = logits[(size_t)i * V + v0 + j];
    }
    ref_sh = sh;
    int* d_tg = upload_i(tg);
    std::vector<floatX*> d_buf(tp);
    for (int k = 0; k < tp; k++) {
        std::vector<float> padded(off, 1.0f);
        padded.insert(padded.end(), sh[k].begin(), sh[k].end());
        d_buf[k] = upload_x(padded);
    }
    float* d_part = (float*)dev_malloc(2 * (size_t)N * sizeof(float));
    float* d_M = (float*)dev_malloc((size_t)N * sizeof(float));
    float* d_S = (float*)dev_malloc(2 * (size_t)N * sizeof(float));
    float* d_losses = (float*)dev_malloc((size_t)N * sizeof(float));
    // the trainer's all-reduces, on the host in rank order: MAX of the row maxima, SUM of the sums
    std::vector<float> M(N, -INFINITY), S(2 * (size_t)N, 0.0f), rM(N, -INFINITY), rS(2 * (size_t)N, 0.0f), part(2 * (size_t)N);
    std::vector<float> losses0, first_max, first_sums, first_x;  // the last rank's, for the determinism check
    int losses_differ = 0;
    for (int k = 0; k < tp; k++) {
        run_vp_pass(version, 0, d_part, d_buf[k] + off, nullptr, nullptr, d_tg, N, Vs, k * Vs, nvs[k], dloss, 1);
        std::vector<float> got = download_f(d_part, N);
        if (k == tp - 1) first_max = got;
        ref_crossentropy_vp_max(part.data(), ref_sh[k].data(), N, Vs, nvs[k]);
        for (int i = 0; i < N; i++) { M[i] = fmaxf(M[i], got[i]); rM[i] = fmaxf(rM[i], part[i]); }
    }
    upload_f_to(d_M, M);
    for (int k = 0; k < tp; k++) {
        run_vp_pass(version, 1, d_part, d_buf[k] + off, d_M, nullptr, d_tg, N, Vs, k * Vs, nvs[k], dloss, 1);
        std::vector<float> got = download_f(d_part, 2 * (size_t)N);
        if (k == tp - 1) first_sums = got;
        ref_crossentropy_vp_sums(part.data(), ref_sh[k].data(), rM.data(), tg.data(), N, Vs, k * Vs, nvs[k]);
        for (int i = 0; i < 2 * N; i++) { S[i] += got[i]; rS[i] += part[i]; }
    }
    upload_f_to(d_S, S);
    std::vector<float> cat((size_t)N * V), rcat((size_t)N * V), pad, r_losses(N);
    for (int k = 0; k < tp; k++) {
        run_vp_pass(version, 2, d_losses, d_buf[k] + off, d_M, d_S, d_tg, N, Vs, k * Vs, nvs[k], dloss, 1);
        std::vector<float> ls = download_f(d_losses, N), x = download_x(d_buf[k] + off, (size_t)N * Vs);
        ref_crossentropy_vp_finish(r_losses.data(), ref_sh[k].data(), rM.data(), rS.data(), tg.data(), N, Vs, k * Vs, nvs[k],
                                   dloss, 1);
        if (k == tp - 1) first_x = x;
        if (k == 0) losses0 = ls;
        else losses_differ += memcmp(ls.data(), losses0.data(), N * sizeof(float)) != 0;
        for (int i = 0; i < N; i++)
            for (int j = 0; j < Vs; j++) {
                if (j < nvs[k]) {
                    cat[(size_t)i * V + k * Vs + j] = x[(size_t)i * Vs + j];
                    rcat[(size_t)i * V + k * Vs + j] = ref_sh[k][(size_t)i * Vs + j];
                } else pad.push_back(x[(size_t)i * Vs + j]);
            }
    }
    std::vector<float> w_losses(N), w_logits = logits;
    ref_crossentropy_forward_backward(w_losses.data(), w_logits.data(), tg.data(), N, V, dloss, 1);
    // the max is exact; the sums: V exp terms in another order, expf within 2 ulp (rtol 1e-5);
    // losses and dlogits at the tolerances of versions 1-3 (see run_version), against the
    // twins run shard by shard and against the whole-vocabulary twin
    check("global row max", M, rM, 0.0, 0.0);
    check("sums", S, rS, 1e-6, 1e-5);
    double rt = LADDER_FP32 ? 2e-5 : ldexp(1.0, -7);
    check("losses", download_f(d_losses, N), r_losses, 1e-5, 1e-5);
    check("losses vs whole V", download_f(d_losses, N), w_losses, 1e-5, 1e-5);
    check("dlogits", cat, rcat, 1e-3 * dloss / V, rt);
    check("dlogits vs whole V", cat, w_logits, 1e-3 * dloss / V, rt);
    check("padding is zero", pad, std::vector<float>(pad.size(), 0.0f), 0.0, 0.0);
    printf("    %-22s every rank's losses bitwise identical: %s\n", "ranks", losses_differ ? "FAIL" : "PASS");
    if (losses_differ) ladder_failures++;
    if (version == 5) {  // deterministic: the last rank's three passes again on the same input, bitwise
        int k = tp - 1;
        std::vector<float> padded(off, 1.0f);
        padded.insert(padded.end(), sh[k].begin(), sh[k].end());
        upload_x_to(d_buf[k], padded);
        run_vp_pass(version, 0, d_part, d_buf[k] + off, nullptr, nullptr, d_tg, N, Vs, k * Vs, nvs[k], dloss, 1);
        check_same("row max", download_f(d_part, N), first_max);
        run_vp_pass(version, 1, d_part, d_buf[k] + off, d_M, nullptr, d_tg, N, Vs, k * Vs, nvs[k], dloss, 1);
        check_same("sums", download_f(d_part, 2 * (size_t)N), first_sums);
        run_vp_pass(version, 2, d_losses, d_buf[k] + off, d_M, d_S, d_tg, N, Vs, k * Vs, nvs[k], dloss, 1);
        check_same("dlogits", download_x(d_buf[k] + off, (size_t)N * Vs), first_x);
    }
    for (int k = 0; k < tp; k++) dev_free(d_buf[k]);
    dev_free(d_tg); dev_free(d_part); dev_free(d_M); dev_free(d_S); dev_free(d_losses);
}

// one rank's shard of llama3's vocabulary at tp = 8: each pass on its own, GB/s of the shard
static void bench_vp(int version, int N, int V, int tp) {
    const int Vs = (V + tp - 1) / tp, nv = V - (tp - 1) * Vs;  // the last rank: the most padding
    floatX* d_x = upload_x(rand_floatX((size_t)N * Vs, -4.0f, 4.0f, 3));
    std::vector<int> tg(N);
    for (int i = 0; i < N; i++) tg[i] = (i * 7919) % V;
    int* d_tg = upload_i(tg);
    float* d_M = upload_f(std::vector<float>(N, 4.0f));
    float* d_S = upload_f(std::vector<float>(2 * (size_t)N, 1000.0f));
    float* d_out = (float*)dev_malloc(2 * (size_t)N * sizeof(float));
    int v0 = (tp - 1) * Vs;
    float t0 = bench_ms([&] { run_vp_pass(version, 0, d_out, d_x, d_M, d_S, d_tg, N, Vs, v0, nv, 1.0f / N, 1); }, 20);
    float t1 = bench_ms([&] { run_vp_pass(version, 1, d_out, d_x, d_M, d_S, d_tg, N, Vs, v0, nv, 1.0f / N, 1); }, 20);
    // write_dlogits = 1 rewrites the shard with small finite numbers: later calls still see valid data
    float t2 = bench_ms([&] { run_vp_pass(version, 2, d_out, d_x, d_M, d_S, d_tg, N, Vs, v0, nv, 1.0f / N, 1); }, 20);
    double b = (double)N * Vs * sizeof(floatX);
    printf("  v%d bench N=%d V=%d tp=%d (shard Vs=%d, %d valid): max %.3f ms (%.0f GB/s), sums %.3f ms (%.0f GB/s), "
           "finish with dlogits %.3f ms (%.0f GB/s r+w), all three %.3f ms\n",
           version, N, V, tp, Vs, nv, t0, b / t0 * 1e-6, t1, b / t1 * 1e-6, t2, 2.0 * b / t2 * 1e-6, t0 + t1 + t2);
    dev_free(d_x); dev_free(d_tg); dev_free(d_M); dev_free(d_S); dev_free(d_out);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "crossentropy", 6);
    // {N, V, offset}: odd V (element path), V a multiple of 8 (16-byte chunks), llama3's
    // V = 128256, V = 1, and rows that are not 16-byte aligned. Version 6's rounds of
    // 512 chunks (bf16 | fp32): 1000 and 32000 take 1 and 8 | 1 and 16 (registers only),
    // 50304 13 | 25 (fp32: shared memory, the last round ragged), 65536 16 | 32 (both
    // variants full), 128256 32 (ragged) | 63 (the fallback), 131072 32 (full) | 64,
    // 131080 33 (the fallback); odd V and offset 1 take the fallback
    const int shapes[][3] = {{7, 67, 0}, {33, 1000, 0}, {5, 32000, 0}, {3, 128256, 0}, {1, 1, 0}, {17, 513, 0},
                             {33, 1000, 1}, {3, 128256, 1}, {2, 50304, 0}, {2, 65536, 0}, {1, 131072, 0},
                             {1, 131080, 0}};
    static const char* names[6] = {"block per row, 3 passes", "block per row, online softmax",
                                   "block per row, online softmax, 16-byte chunks (llmc)", "", "",
                                   "block per row, the row read once and kept in registers and shared memory"};
    for (int version : {1, 2, 3, 6}) {
        if (!want(version)) continue;
        printf("version %d: %s\n", version, names[version - 1]);
        uint64_t seed = 600;
        for (auto& s : shapes)
            for (int wd = 0; wd <= 1; wd++) run_version(version, s[0], s[1], wd, s[2], seed++);
        if (ladder_quick()) continue;
        for (int V : {32000, 128256}) {
            int N = V == 32000 ? 4096 : 1024;  // 1024 rows of llama3's vocabulary: 263 MB of bf16 logits
            floatX* d_logits = upload_x(rand_floatX((size_t)N * V, -4.0f, 4.0f, 1));
            std::vector<int> tg(N);
            for (int i = 0; i < N; i++) tg[i] = (i * 7919) % V;
            int* d_tg = upload_i(tg);
            float* d_losses = (float*)dev_malloc(N * sizeof(float));
            // write_dlogits = 0 keeps the logits unchanged, so repeated calls see the same data
            float t0 = bench_ms([&] { run_ce(version, d_losses, d_logits, d_tg, N, V, 1.0f / N, 0); }, 20);
            float t1 = bench_ms([&] { run_ce(version, d_losses, d_logits, d_tg, N, V, 1.0f / N, 1); }, 5);
            double b = (double)N * V * sizeof(floatX);
            printf("  v%d bench N=%d V=%d: loss only %.3f ms (%.0f GB/s of logits), with dlogits %.3f ms (%.0f GB/s r+w)\n",
                   version, N, V, t0, b / t0 * 1e-6, t1, 2.0 * b / t1 * 1e-6);
            dev_free(d_logits); dev_free(d_tg); dev_free(d_losses);
        }
    }
    // {N, V, tp, offset}: Vs = 23 (the last shard 21 valid), 334, 4000 and 16032 (16-byte
    // chunks), Vs = 3 with an empty last shard, Vs = 512 with one padding column, and
    // shards that start one element into their allocation (the element path)
    const int vp_shapes[][4] = {{7, 67, 3, 0}, {33, 1000, 3, 0}, {5, 32000, 8, 0}, {3, 128256, 8, 0}, {5, 9, 4, 0},
                                {4, 1023, 2, 0}, {3, 128256, 8, 1}, {4, 1023, 2, 1}};
    for (int version = 4; version <= 5; version++) {
        if (!want(version)) continue;
        printf("version %d: %s\n", version, version == 4 ? "vocab-parallel, block per row, 2-byte loads"
                                                          : "vocab-parallel, 16-byte chunks (llmc crossentropy_vp_*)");
        uint64_t seed = 700;
        for (auto& s : vp_shapes) run_vp_version(version, s[0], s[1], s[2], s[3], seed++);
        if (!ladder_quick()) bench_vp(version, 8192, 128256, 8);
    }
    return ladder_finish("crossentropy");
}
