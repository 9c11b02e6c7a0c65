/*
Ladder for llmc/kernels/swiglu.cuh.
  version 1: one thread per element, scalar loads (the llmc kernels before version 3,
             kept here)
  version 2: 16-byte vector loads/stores (8 bf16 or 4 fp32 per thread) when every
             pointer is 16-byte aligned, the tail and misaligned data by version 1 in
             a second launch: the same math, so results must be bitwise equal to version 1
  version 3: the llmc kernels: version 2's 16-byte chunks and the tail in one launch
             (the tail elements go to the first threads after the chunk loop)
Validated against the CPU twin (llmc/kernels/cpu/swiglu.h) on random data at odd sizes and
misaligned offsets, with dh1 == dout in the backward (allowed by the interface).
*/
#include "ladder.h"
#include "../../llmc/kernels/swiglu.cuh"

__global__ void swiglu_forward_v1_kernel(floatX* out, const floatX* h1, const floatX* h3, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float a = (float)h1[i];
        out[i] = (floatX)(a / (1.0f + expf(-a)) * (float)h3[i]);
    }
}
__global__ void swiglu_backward_v1_kernel(floatX* dh1, floatX* dh3, const floatX* dout, const floatX* h1,
                                          const floatX* h3, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float a = (float)h1[i], b = (float)h3[i], g = (float)dout[i];
        float sig = 1.0f / (1.0f + expf(-a));
        float silu = a * sig;
        dh3[i] = (floatX)(g * silu);
        dh1[i] = (floatX)(g * b * sig * (1.0f + a * (1.0f - sig)));
    }
}
static void forward_v1(floatX* out, const floatX* h1, const floatX* h3, size_t n) {
    if (n == 0) return;
    swiglu_forward_v1_kernel<<<swiglu_blocks(n, 256), 256>>>(out, h1, h3, n);
    cudaCheck(cudaGetLastError());
}
static void backward_v1(floatX* dh1, floatX* dh3, const floatX* dout, const floatX* h1, const floatX* h3, size_t n) {
    if (n == 0) return;
    swiglu_backward_v1_kernel<<<swiglu_blocks(n, 256), 256>>>(dh1, dh3, dout, h1, h3, n);
    cudaCheck(cudaGetLastError());
}

#define VEC (16 / (int)sizeof(floatX))
struct alignas(16) VecX { floatX v[VEC]; };

__device__ __forceinline__ float silu_mul(float a, float b) { return a / (1.0f + expf(-a)) * b; }

// elements [0, n) with n a multiple of VEC handled 16 bytes at a time
__global__ void swiglu_forward_v2_kernel(floatX* out, const floatX* h1, const floatX* h3, size_t nvec) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += (size_t)gridDim.x * blockDim.x) {
        VecX a = ((const VecX*)h1)[i], b = ((const VecX*)h3)[i], o;
        #pragma unroll
        for (int k = 0; k < VEC; k++) o.v[k] = (floatX)silu_mul((float)a.v[k], (float)b.v[k]);
        ((VecX*)out)[i] = o;
    }
}
__global__ void swiglu_backward_v2_kernel(floatX* dh1, floatX* dh3, const floatX* dout, const floatX* h1,
                                          const floatX* h3, size_t nvec) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += (size_t)gridDim.x * blockDim.x) {
        VecX A = ((const VecX*)h1)[i], Bv = ((const VecX*)h3)[i], G = ((const VecX*)dout)[i], o1, o3;
        #pragma unroll
        for (int k = 0; k < VEC; k++) {
            float a = (float)A.v[k], b = (float)Bv.v[k], g = (float)G.v[k];
            float sig = 1.0f / (1.0f + expf(-a));
            float silu = a * sig;
            o3.v[k] = (floatX)(g * silu);
            o1.v[k] = (floatX)(g * b * sig * (1.0f + a * (1.0f - sig)));
        }
        ((VecX*)dh3)[i] = o3;
        ((VecX*)dh1)[i] = o1;
    }
}
static bool aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

static void forward(int version, floatX* out, const floatX* h1, const floatX* h3, size_t n) {
    if (version == 3) { swiglu_forward(out, h1, h3, n, 0); return; }
    if (version == 1 || !aligned16(out) || !aligned16(h1) || !aligned16(h3)) { forward_v1(out, h1, h3, n); return; }
    size_t nvec = n / VEC, done = nvec * VEC;
    if (nvec) {
        swiglu_forward_v2_kernel<<<swiglu_blocks(nvec, 256), 256>>>(out, h1, h3, nvec);
        cudaCheck(cudaGetLastError());
    }
    if (done < n) forward_v1(out + done, h1 + done, h3 + done, n - done);
}
static void backward(int version, floatX* dh1, floatX* dh3, const floatX* dout, const floatX* h1, const floatX* h3,
                     size_t n) {
    if (version == 3) { swiglu_backward(dh1, dh3, dout, h1, h3, n, 0); return; }
    if (version == 1 || !aligned16(dh1) || !aligned16(dh3) || !aligned16(dout) || !aligned16(h1) || !aligned16(h3)) {
        backward_v1(dh1, dh3, dout, h1, h3, n);
        return;
    }
    size_t nvec = n / VEC, done = nvec * VEC;
    if (nvec) {
        swiglu_backward_v2_kernel<<<swiglu_blocks(nvec, 256), 256>>>(dh1, dh3, dout, h1, h3, nvec);
        cudaCheck(cudaGetLastError());
    }
    if (done < n) backward_v1(dh1 + done, dh3 + done, dout + done, h1 + done, h3 + done, n - done);
}

static void run_version(int version, size_t n, int off, uint64_t seed) {
    std::vector<float> h1 = rand_floatX(n + off, -6.0f, 6.0f, seed + 1), h3 = rand_floatX(n + off, -2.0f, 2.0f, seed + 2);
    std::vector<float> g = rand_floatX(n + off, -1.0f, 1.0f, seed + 3);
    floatX *d_h1 = upload_x(h1), *d_h3 = upload_x(h3), *d_g = upload_x(g);
    floatX* d_o = (floatX*)dev_malloc((n + off) * sizeof(floatX));
    floatX* d_d3 = (floatX*)dev_malloc((n + off) * sizeof(floatX));
    std::vector<float> r_o(n), r_d1(n), r_d3(n);
    ref_swiglu_forward(r_o.data(), h1.data() + off, h3.data() + off, n);
    ref_swiglu_backward(r_d1.data(), r_d3.data(), g.data() + off, h1.data() + off, h3.data() + off, n);
    printf("  v%d n=%zu offset=%d\n", version, n, off);
    // Tolerance: the same fp32 formula on identical inputs; CUDA's expf is within 2 ulp
    // of glibc's and FMA contraction may differ: ~1e-6 relative in fp32 builds. bf16
    // builds round the output once: <= 2^-8 relative (8 significant bits) -> rtol 2^-7.
    // atol = rtol/10 * rms: dh1's factor (1 + a(1 - sig)) cancels near a = -1.28, where
    // an ulp of 1 (FMA contraction on the GPU only) is all the difference.
    double rt = LADDER_FP32 ? 1e-5 : ldexp(1.0, -7);
    forward(version, d_o + off, d_h1 + off, d_h3 + off, n);
    std::vector<float> got = download_x(d_o + off, n);
    check("forward", got, r_o, rt * 0.1 * rms_of(r_o), rt);
    backward(version, d_g + off, d_d3 + off, d_g + off, d_h1 + off, d_h3 + off, n);  // dh1 == dout
    check("backward dh1 (=dout)", download_x(d_g + off, n), r_d1, rt * 0.1 * rms_of(r_d1), rt);
    check("backward dh3", download_x(d_d3 + off, n), r_d3, rt * 0.1 * rms_of(r_d3), rt);
    if (version >= 2) {  // same math as v1: must match bitwise
        forward_v1(d_o + off, d_h1 + off, d_h3 + off, n);
        check_same("forward vs v1", download_x(d_o + off, n), got);
    }
    dev_free(d_h1); dev_free(d_h3); dev_free(d_g); dev_free(d_o); dev_free(d_d3);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "swiglu", 3);
    const size_t sizes[] = {1, 61, 7 * 61, 1000003};
    static const char* names[3] = {"scalar, thread per element", "16-byte vectors, tail in a second launch",
                                   "16-byte vectors and the tail in one launch (llmc)"};
    for (int version = 1; version <= 3; version++) {
        if (!want(version)) continue;
        printf("version %d: %s\n", version, names[version - 1]);
        uint64_t seed = 500;
        for (size_t n : sizes)
            for (int off = 0; off <= 1; off++) run_version(version, n, off, seed++);
        if (ladder_quick()) continue;
        size_t n = (size_t)8192 * 8192;
        floatX *a = upload_x(rand_floatX(n, -4.0f, 4.0f, 1)), *b = upload_x(rand_floatX(n, -1.0f, 1.0f, 2));
        floatX *o = (floatX*)dev_malloc(n * sizeof(floatX)), *o3 = (floatX*)dev_malloc(n * sizeof(floatX));
        float tf = bench_ms([&] { forward(version, o, a, b, n); }, 20);
        float tb = bench_ms([&] { backward(version, o, o3, o, a, b, n); }, 20);
        printf("  v%d bench n=%zu: forward %.3f ms (%.0f GB/s), backward %.3f ms (%.0f GB/s)\n", version, n, tf,
               3.0 * n * sizeof(floatX) / tf * 1e-6, tb, 5.0 * n * sizeof(floatX) / tb * 1e-6);
        dev_free(a); dev_free(b); dev_free(o); dev_free(o3);
    }
    return ladder_finish("swiglu");
}
