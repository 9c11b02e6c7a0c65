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
*/
#include "ladder.h"
#include "../../llmc/kernels/crossentropy.cuh"

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

static void run_ce(int version, float* losses, floatX* logits, const int* targets, int N, int V, float dloss, int wd) {
    if (version == 1) {
        crossentropy_v1_kernel<<<N, CE_THREADS>>>(losses, logits, targets, V, dloss, wd);
        cudaCheck(cudaGetLastError());
    } else if (version == 2) {
        crossentropy_v2_kernel<<<N, CE_THREADS>>>(losses, logits, targets, V, dloss, wd);
        cudaCheck(cudaGetLastError());
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
    if (version == 3) {  // deterministic: a second run on the same input, bitwise
        std::vector<float> g_losses = download_f(d_losses, N), g_logits = download_x(d_logits, (size_t)N * V);
        upload_x_to(d_buf, padded);
        run_ce(version, d_losses, d_logits, d_tg, N, V, dloss, wd);
        check_same("losses", download_f(d_losses, N), g_losses);
        check_same(wd ? "dlogits" : "logits untouched", download_x(d_logits, (size_t)N * V), g_logits);
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
    ladder_init(argc, argv, "crossentropy", 5);
    // {N, V, offset}: odd V (element path), V a multiple of 8 (16-byte chunks), llama3's
    // V = 128256, V = 1, and rows that are not 16-byte aligned
    const int shapes[][3] = {{7, 67, 0}, {33, 1000, 0}, {5, 32000, 0}, {3, 128256, 0}, {1, 1, 0}, {17, 513, 0},
                             {33, 1000, 1}, {3, 128256, 1}};
    static const char* names[3] = {"block per row, 3 passes", "block per row, online softmax",
                                   "block per row, online softmax, 16-byte chunks (llmc)"};
    for (int version = 1; version <= 3; version++) {
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
