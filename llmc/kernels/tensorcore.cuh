/*
The tensor-core instructions the flash-attention kernels use (llmc/kernels/attention_tc.cuh and
llmc/kernels/attention_tc_backward.cuh), each behind a small __device__ function: mma.sync
m16n8k16 bf16 -> fp32, ldmatrix (x2, x4, plain and .trans) and cp.async (16 bytes, with
zero fill, commit, wait). On the GPU they are inline PTX for sm_80 and later.

Why wrappers: dev/emu cannot run PTX, and a tensor-core kernel is only as right as the
per-lane fragment layout it assumes. dev/emu/transform.py replaces this whole file by
dev/emu/include/tensorcore_emu.h, a host model of the DOCUMENTED layouts below (PTX ISA,
"Matrix Fragments for mma.m16n8k16" with .bf16, and ldmatrix), so that the kernels'
index arithmetic around the instructions is checked against the CPU twin. The transform
also checks that both files define the same tc_* functions. Kernels must use these
wrappers and nothing else of the tensor cores; a wrong assumption about the layout then
gives wrong numbers in the emulator, as it would on the GPU.

Fragment layouts (lane = 0..31, g = lane >> 2, t = lane % 4; a tc_u32 packs two bf16,
the lower column index in the low 16 bits):
  A (16x16, row):  a[0] = A[g][2t, 2t+1]    a[1] = A[g+8][2t, 2t+1]
                   a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
  B (16x8, col):   b[0] = B[2t, 2t+1][g]    b[1] = B[2t+8, 2t+9][g]
  C/D (16x8 f32):  d[0], d[1] = D[g][2t, 2t+1]   d[2], d[3] = D[g+8][2t, 2t+1]
  ldmatrix: lane l passes the address of row (l % 8) of 8x8 matrix (l / 8) (16-byte rows
  of 8 bf16, 16-byte aligned, in shared memory; x2: lanes 0..15 count, the others'
  addresses are ignored but must be valid); r[i] of lane l receives elements
  (row l >> 2, cols 2 (l % 4), +1) of matrix i; .trans the same of the transpose, i.e.
  (rows 2 (l % 4), +1 of column l >> 2).
Consequences the kernels rely on: the C layout of two n8 tiles side by side is the A
layout of one k16 slice (so P = softmax(S) goes from accumulators to an A operand
without shared memory), and x4 of four 8x8 quadrants in the order (rows 0-7, cols 0-7),
(rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15) yields a[0..3].
*/
#pragma once
#include "../core/common.h"

typedef uint32_t tc_u32;  // two bf16, the lower column index in the low 16 bits

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "llmc/kernels/tensorcore.cuh needs sm_80 or later (mma.m16n8k16 with bf16, ldmatrix, cp.async)"
#endif

// round to nearest even to bf16 and pack (lo in the low half)
static __device__ __forceinline__ tc_u32 tc_pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo, the low 16 bits
    return (tc_u32)__bfloat16_as_ushort(v.x) | ((tc_u32)__bfloat16_as_ushort(v.y) << 16);
}

// d += A (16x16, row) * B (16x8, col), fp32 accumulation in place
static __device__ __forceinline__ void tc_mma_bf16_16816(float d[4], const tc_u32 a[4], const tc_u32 b[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

static __device__ __forceinline__ void tc_ldmatrix_x4(tc_u32 r[4], const void* row_addr) {
    unsigned s = (unsigned)__cvta_generic_to_shared(row_addr);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
static __device__ __forceinline__ void tc_ldmatrix_x4_trans(tc_u32 r[4], const void* row_addr) {
    unsigned s = (unsigned)__cvta_generic_to_shared(row_addr);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
static __device__ __forceinline__ void tc_ldmatrix_x2(tc_u32 r[2], const void* row_addr) {
    unsigned s = (unsigned)__cvta_generic_to_shared(row_addr);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
}
static __device__ __forceinline__ void tc_ldmatrix_x2_trans(tc_u32 r[2], const void* row_addr) {
    unsigned s = (unsigned)__cvta_generic_to_shared(row_addr);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
}

// 16 bytes global -> shared, asynchronous; !valid writes 16 zero bytes and reads nothing
// (src-size 0), but gmem_src must still be a global address (pass the tensor's base)
static __device__ __forceinline__ void tc_cp_async_16(void* smem_dst, const void* gmem_src, bool valid) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem_dst);
    int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem_src), "r"(n) : "memory");
}
static __device__ __forceinline__ void tc_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// until at most N of this thread's committed groups are pending; the copies are then
// visible to this thread only: other threads read them after a __syncthreads
template <int N>
static __device__ __forceinline__ void tc_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
