/*
Ladder for llmc/kernels/flow.cuh (rectified flow: flow_prepare, mse_forward_backward) and
llmc/kernels/timestep.cuh (timestep_embedding).
  version 1: the llmc kernels. flow_prepare one thread per element; mse one block of
             512 threads per sample (B blocks: most SMs idle when B is small);
             timestep_embedding one thread per (b, i) in double
  version 2: flow_prepare with 16-byte vectors (per_sample a multiple of the vector and
             every pointer aligned, else v1); mse split into MSE_V2_SPLIT blocks per
             sample, each writing one partial to a scratch buffer, then one warp per
             sample adds its partials in a fixed order: deterministic, B*MSE_V2_SPLIT
             blocks. Adopting it in llmc needs a scratch buffer of B*MSE_V2_SPLIT
             floats (an argument, or a static __device__ array as global_norm_squared
             has). timestep_embedding has one version (B*dim values: nothing to gain).
Validated against the CPU twins (llmc/kernels/cpu/flow.h, llmc/kernels/cpu/timestep.h) with t = 0, 1 and
random t, odd per_sample, dpred over pred; determinism: mse run twice, bitwise.
*/
#include "ladder.h"
#include "../../llmc/kernels/flow.cuh"
#include "../../llmc/kernels/timestep.cuh"

#define VEC (16 / (int)sizeof(floatX))
struct alignas(16) VecX { floatX v[VEC]; };

// elements [0, nvec * VEC) 16 bytes at a time; per_vec = per_sample / VEC vectors per sample
__global__ void flow_prepare_v2_kernel(floatX* xt, floatX* v, const floatX* x0, const floatX* noise, const float* t,
                                       size_t per_vec, size_t nvec) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += (size_t)gridDim.x * blockDim.x) {
        float tb = t[i / per_vec];
        VecX a = ((const VecX*)x0)[i], e = ((const VecX*)noise)[i], ot, ov;
        #pragma unroll
        for (int k = 0; k < VEC; k++) {
            float a_k = (float)a.v[k], e_k = (float)e.v[k];
            ot.v[k] = (floatX)((1.0f - tb) * a_k + tb * e_k);
            ov.v[k] = (floatX)(e_k - a_k);
        }
        ((VecX*)xt)[i] = ot;
        ((VecX*)v)[i] = ov;
    }
}

#define MSE_V2_SPLIT 32  // blocks per sample: a constant, so the summation order is the same on every GPU

// block (k, b): elements k*512 + tid, stepping by MSE_V2_SPLIT*512, of sample b
__global__ void __launch_bounds__(MSE_THREADS) mse_split_kernel(float* partials, floatX* dpred, const floatX* pred,
                                                                const floatX* target, size_t per_sample,
                                                                float grad_scale) {
    __shared__ float warp_sums[MSE_THREADS / 32];
    size_t base = (size_t)blockIdx.y * per_sample;
    float acc = 0.0f;
    for (size_t j = (size_t)blockIdx.x * MSE_THREADS + threadIdx.x; j < per_sample; j += (size_t)MSE_V2_SPLIT * MSE_THREADS) {
        float d = (float)pred[base + j] - (float)target[base + j];
        acc += d * d;
        if (dpred) dpred[base + j] = (floatX)(grad_scale * d);
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int w = 0; w < MSE_THREADS / 32; w++) total += warp_sums[w];
        partials[(size_t)blockIdx.y * MSE_V2_SPLIT + blockIdx.x] = total;
    }
}
// one warp per sample: lane l adds partials l, l + 32, ... in order, then a fixed xor tree
__global__ void mse_split_final_kernel(float* sq, const float* partials) {
    float acc = 0.0f;
    for (int k = threadIdx.x; k < MSE_V2_SPLIT; k += 32) acc += partials[(size_t)blockIdx.x * MSE_V2_SPLIT + k];
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (threadIdx.x == 0) sq[blockIdx.x] = acc;
}

static bool aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

static void prepare(int version, floatX* xt, floatX* v, const floatX* x0, const floatX* noise, const float* t, int B,
                    size_t per_sample) {
    if (version == 1 || per_sample % VEC || !aligned16(xt) || !aligned16(v) || !aligned16(x0) || !aligned16(noise)) {
        flow_prepare(xt, v, x0, noise, t, B, per_sample, 0);
        return;
    }
    size_t nvec = (size_t)B * per_sample / VEC;
    if (nvec == 0) return;
    size_t blocks = ceil_div(nvec, 256);
    flow_prepare_v2_kernel<<<(unsigned)(blocks > 65536 ? 65536 : blocks), 256>>>(xt, v, x0, noise, t, per_sample / VEC,
                                                                                 nvec);
    cudaCheck(cudaGetLastError());
}

static void mse(int version, float* sq, floatX* dpred, const floatX* pred, const floatX* target, int B, size_t per_sample,
                float dscale, float* scratch) {
    if (version == 1) { mse_forward_backward(sq, dpred, pred, target, B, per_sample, dscale, 0); return; }
    mse_split_kernel<<<dim3(MSE_V2_SPLIT, B), MSE_THREADS>>>(scratch, dpred, pred, target, per_sample, 2.0f * dscale);
    cudaCheck(cudaGetLastError());
    mse_split_final_kernel<<<B, 32>>>(sq, scratch);
    cudaCheck(cudaGetLastError());
}

static std::vector<float> times_for(int B, uint64_t seed) {
    std::vector<float> t = rand_f32(B, 0.0f, 1.0f, seed);
    t[0] = 1.0f;
    if (B > 1) t[1] = 0.0f;
    return t;
}

static void run_version(int version, int B, size_t per_sample, uint64_t seed) {
    size_t n = (size_t)B * per_sample;
    std::vector<float> x0 = rand_floatX(n, -1.0f, 1.0f, seed + 1), e = rand_floatX(n, -3.0f, 3.0f, seed + 2);
    std::vector<float> t = times_for(B, seed + 3);
    printf("  v%d B=%d per_sample=%zu\n", version, B, per_sample);
    std::vector<float> r_xt(n), r_v(n), r_sq(B), r_dp(n);
    ref_flow_prepare(r_xt.data(), r_v.data(), x0.data(), e.data(), t.data(), B, per_sample);
    floatX *d_x0 = upload_x(x0), *d_e = upload_x(e);
    floatX *d_xt = (floatX*)dev_malloc(n * sizeof(floatX)), *d_v = (floatX*)dev_malloc(n * sizeof(floatX));
    float* d_t = upload_f(t);
    float* d_sq = (float*)dev_malloc(B * sizeof(float));
    float* d_scratch = (float*)dev_malloc((size_t)B * MSE_V2_SPLIT * sizeof(float));
    // Tolerances: flow_prepare is the same fp32 formula, rounded once (FMA contraction on the
    // GPU only: ~1e-7 relative in fp32; bf16: 2^-8 -> rtol 2^-7), atol = rtol/10 * rms where
    // (1 - t) x0 and t e cancel. sq is an fp32 sum of per_sample positive terms in a different
    // (fixed) order than the twin's: rtol 2e-4 (the first-order worst case of the two orders
    // at per_sample = 100003: chains of 1627 and 216 additions, 1843 U; typical errors are
    // ~1e-6). dpred: one rounding of the same product: like flow_prepare.
    double rt = LADDER_FP32 ? 1e-5 : ldexp(1.0, -7);
    prepare(version, d_xt, d_v, d_x0, d_e, d_t, B, per_sample);
    std::vector<float> xt = download_x(d_xt, n), v = download_x(d_v, n);
    check("flow_prepare xt", xt, r_xt, rt * 0.1 * rms_of(r_xt), rt);
    check("flow_prepare v", v, r_v, rt * 0.1 * rms_of(r_v), rt);
    // the loss of a "prediction" xt against the target v, and its gradient over the prediction
    float dscale = 1.0f / (float)n;
    ref_mse_forward_backward(r_sq.data(), r_dp.data(), xt.data(), v.data(), B, per_sample, dscale);
    mse(version, d_sq, d_xt, d_xt, d_v, B, per_sample, dscale, d_scratch);  // dpred == pred
    std::vector<float> sq = download_f(d_sq, B);
    check("mse sq", sq, r_sq, 0.0, 2e-4);
    check("mse dpred (=pred)", download_x(d_xt, n), r_dp, rt * 0.1 * rms_of(r_dp), rt);
    upload_x_to(d_xt, xt);
    mse(version, d_sq, nullptr, d_xt, d_v, B, per_sample, dscale, d_scratch);
    check_same("mse sq again", download_f(d_sq, B), sq);
    dev_free(d_x0); dev_free(d_e); dev_free(d_xt); dev_free(d_v); dev_free(d_t); dev_free(d_sq); dev_free(d_scratch);
}

// timestep_embedding: one version. The GPU's double cos/sin/exp are within 2 ulp (double)
// of glibc's, so the fp32 results are equal or one ulp apart: atol 2^-23 (an ulp at 1),
// rtol 0. bf16 builds also round the output once against the fp32 twin: half a bf16 ulp
// (<= 2^-9 below 1) plus one ulp (<= 2^-8): atol 2^-7.
static void run_timestep(int B, int dim, uint64_t seed) {
    std::vector<float> t = times_for(B, seed);
    printf("  v1 timestep B=%d dim=%d\n", B, dim);
    std::vector<float> ref((size_t)B * dim);
    ref_timestep_embedding(ref.data(), t.data(), B, dim);
    float* d_t = upload_f(t);
    floatX* d_o = (floatX*)dev_malloc((size_t)B * dim * sizeof(floatX));
    timestep_embedding(d_o, d_t, B, dim, 0);
    check("timestep embedding", download_x(d_o, (size_t)B * dim), ref, LADDER_FP32 ? ldexp(1.0, -23) : ldexp(1.0, -7), 0.0);
    dev_free(d_t); dev_free(d_o);
}

static void bench(int version, int B, size_t per_sample) {
    size_t n = (size_t)B * per_sample;
    floatX *x0 = upload_x(rand_floatX(n, -1.0f, 1.0f, 1)), *e = upload_x(rand_floatX(n, -1.0f, 1.0f, 2));
    floatX *xt = (floatX*)dev_malloc(n * sizeof(floatX)), *v = (floatX*)dev_malloc(n * sizeof(floatX));
    float* t = upload_f(times_for(B, 3));
    float* sq = (float*)dev_malloc(B * sizeof(float));
    float* scratch = (float*)dev_malloc((size_t)B * MSE_V2_SPLIT * sizeof(float));
    float tp = bench_ms([&] { prepare(version, xt, v, x0, e, t, B, per_sample); }, 50);
    float tm = bench_ms([&] { mse(version, sq, xt, xt, v, B, per_sample, 1.0f / n, scratch); }, 50);
    printf("  v%d bench B=%d per_sample=%zu: flow_prepare %.3f ms (%.0f GB/s), mse with dpred %.3f ms (%.0f GB/s)\n",
           version, B, per_sample, tp, 4.0 * n * sizeof(floatX) / tp * 1e-6, tm, 3.0 * n * sizeof(floatX) / tm * 1e-6);
    dev_free(x0); dev_free(e); dev_free(xt); dev_free(v); dev_free(t); dev_free(sq); dev_free(scratch);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "flow", 2);
    const struct { int B; size_t per_sample; } shapes[] = {
        {3, 1001},     // odd: v2 takes the scalar path of flow_prepare
        {2, 1000},     // vectors in both precisions
        {1, 1},
        {4, 24576},    // several strides of 512 threads x 32 blocks per sample
        {2, 100003},
    };
    for (int version = 1; version <= 2; version++) {
        if (!want(version)) continue;
        printf("version %d: %s\n", version, version == 1 ? "llmc (mse: one block per sample)"
                                                          : "16-byte vectors; mse split over 32 blocks per sample");
        uint64_t seed = 1100;
        for (const auto& s : shapes) run_version(version, s.B, s.per_sample, seed += 10);
        if (version == 1) {
            run_timestep(5, 256, 1200);
            run_timestep(3, 6, 1201);
        }
        if (ladder_quick()) continue;
        bench(version, 2, (size_t)16 * 21 * 60 * 104);  // a Wan-like 480p latent (81 frames)
        bench(version, 8, (size_t)16 * 21 * 60 * 104);
    }
    return ladder_finish("flow");
}
