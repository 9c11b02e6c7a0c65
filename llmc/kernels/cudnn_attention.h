/*
cuDNN's fused attention (SDPA, the cudnn-frontend graph API) behind --attention cudnn, in builds
made with `make USE_CUDNN=1` (bf16 CUDA builds only). The frontend's C++ headers are large and
slow to compile, so the code that uses them is one translation unit of its own,
llmc/kernels/cudnn_attention.cpp, compiled once into build/cudnn_attention.o and linked: the one
exception to header-only llmc/ (docs/design.md 3.1). This header is all the trainers see.

Layouts are those of the other attention kernels: q, out [B, T, H, hd], k, v [B, T, KV, hd]
(bf16, KV divides H: GQA), lse [B, H, T] fp32, the natural-log log-sum-exp of the scaled scores.
cuDNN's softmax statistics (its "Stats" output) are that same quantity, max + ln(sum exp(s - max))
over s = q.k / sqrt(hd) after the mask, so lse goes to and from the library unconverted and the
context-parallel ring merge (llmc/kernels/attention_merge.cuh) combines its blocks as it combines
the other kernels'.

Workspace: the caller passes one buffer it planned (the library is never allowed to allocate):
cudnn_att_workspace_bound() bytes, a formula that needs no device (--plan-only has none), and
every launch FAILs, naming both numbers, when the graph cuDNN built asks for more.
Graphs are built once per shape (B, T, H, KV, hd, causal, direction, determinism) and cached.
*/
#pragma once
#include <stddef.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

// The version of the cuDNN library loaded at run time (cudnnGetVersion: 91900 for 9.19.0), and
// the one the build compiled against (CUDNN_VERSION)
size_t cudnn_att_loaded_version(void);
size_t cudnn_att_compiled_version(void);

// The backward's algorithm: 1 = cuDNN's deterministic one (bitwise reproducible run to run; in
// cuDNN 9.19 on Hopper it keeps dP = dO V^T in the workspace: B*H*T*T bf16), 0 = its default
// (the fp32 dQ accumulation in any order; less memory, not reproducible). Set before the first
// backward; it is part of the cached graphs' key.
void cudnn_att_set_deterministic(int deterministic);

// The planned bound of the workspace one forward or backward of this shape needs (bytes)
size_t cudnn_att_workspace_bound(int B, int T, int H, int KV, int hd, int deterministic);

// causal: the query at position t sees keys 0..t (top-left aligned); else every key
void cudnn_att_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k,
                       const __nv_bfloat16* v, int B, int T, int H, int KV, int hd, int causal, void* workspace,
                       size_t workspace_bytes, cudaStream_t stream);
// dq, dk, dv overwritten
void cudnn_att_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                        const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                        const __nv_bfloat16* out, const float* lse, int B, int T, int H, int KV, int hd, int causal,
                        void* workspace, size_t workspace_bytes, cudaStream_t stream);
