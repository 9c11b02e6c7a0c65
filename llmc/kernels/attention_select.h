/*
Which attention implementation the trainers run: --attention auto|fp32|tc|tc2|cudnn.
  fp32   the kernels of llmc/kernels/attention.cuh (fp32 math on CUDA cores, any head dim <= 256);
         in the CPU build, its twin llmc/kernels/cpu/attention.h (the CPU build has only this one)
  tc     the tensor-core kernels of llmc/kernels/attention_tc.cuh (bf16 builds, every head dim
         that is a multiple of 8 from 32 to 256)
  tc2    their second design, FlashAttention-2's (llmc/kernels/attention_tc2.cuh: larger query
         tiles, the heaviest first; llmc/kernels/attention_tc2_backward.cuh: the one-pass backward,
         five matmuls, dQ summed in a fixed order through a planned fp32 workspace, so still
         bitwise reproducible); the same head dims and builds as tc. Passed on an H200
         (2026-11-30) at every head dim of the ladder; faster than tc forward everywhere, backward
         at hd 72 and full 16K-token shapes only (docs/results/gpu_h200_2026-11-30.md); auto does
         not pick it
  cudnn  cuDNN's fused attention (llmc/kernels/cudnn_attention.h), in bf16 builds made with
         `make USE_CUDNN=1`; any head dim the library takes (it says so at the first call when
         not). --cudnn-deterministic 1 (the default) runs its deterministic backward, 0 its
         faster default one, which is not bitwise reproducible (docs/design.md 3.1)
  auto   the fastest kernel that has PASSED ON A GPU at this head dim, by the speeds measured
         there (att_measured below, each row with the run and log lines it came from), whose
         plan fits: tc2 or cudnn where they were timed faster than tc in the same call, tc at
         the head dims of att_tc_gpu_passed, else fp32. The ranking counts one forward and one
         backward at FlashAttention's FLOPs (the backward 2.5x the forward's): time per FLOP
         1/fwd + 2.5/bwd. tc2 and cudnn buy their speed with memory that grows with the
         sequence (tc2's dQ workspace of 5 to 19 fp32 copies of dq, cuDNN's reproducible
         backward a T x T workspace, both in the plan), so the runner keeps auto's choice only
         where it fits (llmc/train/runner.h, runner_attention_auto): on a device, its plan plus
         --fit-memory's reserve within the device's memory and its plan within what is free;
         otherwise the next candidate, down to tc, which adds nothing. Under --fit-memory auto
         takes tc (the search spends the budget on the batch and the memory flags; it does not
         weigh attention kernels). --plan-only has no device: it plans the fastest and names
         the fallback. cudnn competes only in builds made with USE_CUDNN=1, with its
         reproducible backward unless --cudnn-deterministic 0 is given.
         The choices, from att_measured (H200, 2026-11-30; time per FLOP against tc's): hd 64
         causal cudnn 0.47, else tc2 0.94; hd 64 full cudnn 0.53, else tc (tc2 1.14); hd 72
         tc2 0.86 full, 0.87 causal (cudnn passed no test at 72); hd 128 tc2 0.97 causal, 0.94
         full; every other head dim tc (nothing else timed there).
All implementations give lse the same meaning (natural-log log-sum-exp of the scaled
scores; cuDNN's softmax statistics are that quantity), so a forward of one and a backward of
another are consistent, and the ring merge of context parallelism works on any of them.

Use (one process, one model):
  g_attention_impl = attention_impl_parse(arg);   // at flag parsing; FAILs on anything else
  attention_select(g_attention_impl, hd, causal); // once the head dim is known: resolves
                                                  // auto, FAILs if the choice cannot run
  attention_dispatch_forward(...)        instead of attention_forward(...)
  attention_dispatch_full_forward(...)   instead of attention_full_forward(...)
(same arguments), and
  attention_dispatch_backward(dq, dk, dv, dout, q, k, v, out, lse, delta_scratch, B, T, H, KV, hd, s)
  attention_dispatch_full_backward(...the same...)
instead of attention_backward / attention_full_backward: one more argument, a scratch
buffer of attention_dispatch_scratch_floats(B, T, H, KV, hd) floats (0, and NULL is fine,
unless a tensor-core backward runs: tc's delta rows, tc2's delta and dQ partials, for
either mode), planned by the caller like any activation.
cudnn also needs its workspace, planned like any scratch: attention_workspace_bytes(B, T, H,
KV, hd) for the largest call (0 unless cudnn is selected), handed over with
attention_use_workspace(ptr, bytes) before the calls that use it (llmc/parallel/attention_op.h
does both for the trainers, the context-parallel calls included).
attention_impl_name(g_attention_impl) names the choice for the log.
Backward with tc: the tensor-core backward (llmc/kernels/attention_tc_backward.cuh, which
kernels.h includes in every CUDA build).
RoPE: when attention_fuses_rope() (tc selected and ATTENTION_TC_FUSE_ROPE 1), the rotation of
q and k is done inside the tensor-core kernels: call
  attention_dispatch_forward_rope(out, lse, q, k, v, rope_cos, rope_sin, B, T, H, KV, hd, s)
  attention_dispatch_backward_rope(dq, dk, dv, dout, q, k, v, out, lse, delta_scratch,
                                   rope_cos, rope_sin, B, T, H, KV, hd, s)
(and the _full_ ones) with the UNROTATED q, k, instead of rope_forward on q and k before
attention_dispatch_forward and rope_backward on dq and dk after attention_dispatch_backward:
the same results, bit for bit, two passes over q and k fewer each way. Otherwise (fp32,
cudnn) keep the separate rope launches: these four FAIL when tc is not selected.
The fusion is off (ATTENTION_TC_FUSE_ROPE 0) by measurement: on the H200 the fused kernels
were slower than the rope launches plus the plain tc kernels at every benchmark shape of the
ladder (llama3-1B's heads, causal B=4 T=2048 H=32 KV=8 hd 64: forward 0.535 ms fused against
0.438 unfused, backward 1.907 against 1.419; dev/cuda/attention.cu version 5), because the
rotation in the tile loads lengthens the kernels' critical path more than the two passes over
q and k cost. The fused results match the unfused ones within one bf16 rounding (the fused
backward rotates dq, dk in fp32 and rounds once; the unfused one rounds, rotates, rounds).
*/
#pragma once
#include "../core/common.h"
#ifdef LLMC_CPU
#include "cpu/attention.h"
#else
#include "attention.cuh"                // CUDA cores, any even head dim
#include "attention_tc_backward.cuh"    // tensor cores (bf16 builds), forward and backward
#include "attention_tc2.cuh"            // their second design: forward
#include "attention_tc2_backward.cuh"   // and the one-pass backward
#if defined(USE_CUDNN) && !defined(ENABLE_FP32)
#include "cudnn_attention.h"            // cuDNN's fused attention (its own translation unit, make USE_CUDNN=1)
#define ATTENTION_HAS_CUDNN 1
#endif
#endif
#ifndef ATTENTION_HAS_CUDNN
#define ATTENTION_HAS_CUDNN 0
#endif

enum AttentionImpl { ATTENTION_AUTO = 0, ATTENTION_FP32 = 1, ATTENTION_TC = 2, ATTENTION_CUDNN = 3, ATTENTION_TC2 = 4 };
static AttentionImpl g_attention_impl = ATTENTION_AUTO;  // after attention_select: FP32, TC, TC2 or CUDNN
static int g_attention_hd = 0;                           // the head dim attention_select saw
static int g_cudnn_deterministic = 1;  // --cudnn-deterministic (read by attention_select)
#define CUDNN_DETERMINISTIC_HELP                                                                                         \
    "--attention cudnn's backward: 1 = cuDNN's deterministic algorithm, bitwise reproducible (in cuDNN 9.19 a "         \
    "B*H*T*T bf16 workspace, in the memory plan), 0 = its default, faster, not reproducible run to run (default 1)"

// The head dims at which the tensor-core attention has passed on a GPU, each with its run
// and what was measured there: auto picks tc at these and nowhere else. Two GPU runs so far.
struct AttTcGpuPassed { int hd; const char* run; };
static const AttTcGpuPassed att_tc_gpu_passed[] = {
    {64, "H200, docs/results/gpu_h200_2026-11-26.md: test_llama (GQA, T=150) and test_dit on fresh references; "
         "ladder v4 causal B=4 T=2048 H=32 KV=8: 181.6 TFLOP/s forward, 127.3 backward (fp32 kernel: 6.5 / 4.6)"},
    {128, "H200, docs/results/gpu_h200_2026-11-26.md: test_llama (tied, T=197) on fresh references; ladder v4 "
          "B=2 T=2048 H=16 KV=4: causal 148.3 / 94.0 TFLOP/s, full 191.1 / 155.3 (fp32 kernel: 6.1-6.9 / 3.5-4.4)"},
    {72, "H200, docs/results/gpu_h200_2026-11-30.md: test_dit on a fresh reference; ladder v6 both modes; dit-XL "
         "16,676 tok/s (full 16K tokens: 168.8 / 133.1 TFLOP/s)"},
#define ATT_TC_LADDER_2026_11_30 "H200, docs/results/gpu_h200_2026-11-30.md: ladder v6 against its CPU twin, causal and full"
    {32, ATT_TC_LADDER_2026_11_30}, {40, ATT_TC_LADDER_2026_11_30}, {48, ATT_TC_LADDER_2026_11_30},
    {80, ATT_TC_LADDER_2026_11_30}, {96, ATT_TC_LADDER_2026_11_30}, {112, ATT_TC_LADDER_2026_11_30},
    {136, ATT_TC_LADDER_2026_11_30}, {200, ATT_TC_LADDER_2026_11_30}, {256, ATT_TC_LADDER_2026_11_30},
#undef ATT_TC_LADDER_2026_11_30
};
static inline bool attention_tc_gpu_passed(int hd) {
    for (const AttTcGpuPassed& m : att_tc_gpu_passed)
        if (m.hd == hd) return true;
    return false;
}

// Speeds measured on a GPU, TFLOP/s forward / backward (FlashAttention's count), each kernel
// of a head dim and mode timed in the same call on the same machine; tc2 and cudnn rows only
// where they also passed a correctness test on that GPU (passed = 1). auto ranks by these and
// nothing else: a kernel with no row at a head dim and mode is not a candidate there.
struct AttMeasured { int hd, causal; AttentionImpl impl; float fwd, bwd; int passed; const char* source; };
#define ATT_H200_2026_11_30 "H200, docs/results/gpu_h200_2026-11-30.md "
static const AttMeasured att_measured[] = {
    // llama3-1B's step (B=4 T=2048 H=32 KV=8), its profile
    {64, 1, ATTENTION_TC, 157.0f, 104.4f, 1, ATT_H200_2026_11_30 "llama3-1B step, call1:206-251"},
    {64, 1, ATTENTION_TC2, 200.5f, 106.7f, 1, ATT_H200_2026_11_30 "llama3-1B step, call1:933-978"},
    {64, 1, ATTENTION_CUDNN, 315.7f, 223.8f, 1, ATT_H200_2026_11_30 "llama3-1B step, call1:1172-1217 (reproducible backward)"},
    // dit-B's step (16K tokens, full); tc2 before its chunk filled the device's waves
    {64, 0, ATTENTION_TC, 205.6f, 153.2f, 1, ATT_H200_2026_11_30 "dit-B step, call2"},
    {64, 0, ATTENTION_TC2, 261.1f, 122.5f, 1, ATT_H200_2026_11_30 "dit-B step, call2"},
    {64, 0, ATTENTION_CUDNN, 478.6f, 276.9f, 1, ATT_H200_2026_11_30 "dit-B step, call2 (reproducible backward)"},
    // dit-XL's step (16K tokens, full); cudnn timed there but never tested at hd 72
    {72, 0, ATTENTION_TC, 169.1f, 133.3f, 1, ATT_H200_2026_11_30 "dit-XL step, call2"},
    {72, 0, ATTENTION_TC2, 215.4f, 151.6f, 1, ATT_H200_2026_11_30 "dit-XL step, call2"},
    {72, 0, ATTENTION_CUDNN, 370.5f, 268.2f, 0, ATT_H200_2026_11_30 "dit-XL step, call2 (reproducible backward; no test at hd 72)"},
    // the attention ladder (causal B=4 T=2048 H=32 KV=8; full B=1 T=16384 H=16), versions 6 and 7/8
    {72, 1, ATTENTION_TC, 147.2f, 102.6f, 1, ATT_H200_2026_11_30 "ladder, call1:397"},
    {72, 1, ATTENTION_TC2, 188.9f, 114.9f, 1, ATT_H200_2026_11_30 "ladder, call1:574, 737"},
    {128, 1, ATTENTION_TC, 186.0f, 134.3f, 1, ATT_H200_2026_11_30 "ladder, call1:399"},
    {128, 1, ATTENTION_TC2, 233.3f, 131.7f, 1, ATT_H200_2026_11_30 "ladder, call1:576, 739"},
    {128, 0, ATTENTION_TC, 208.4f, 162.7f, 1, ATT_H200_2026_11_30 "ladder, call1:400"},
    {128, 0, ATTENTION_TC2, 259.8f, 166.5f, 1, ATT_H200_2026_11_30 "ladder, call1:577, 740"},
};
#undef ATT_H200_2026_11_30
static inline const AttMeasured* att_measured_row(int hd, int causal, AttentionImpl impl) {
    for (const AttMeasured& m : att_measured)
        if (m.hd == hd && m.causal == causal && m.impl == impl) return &m;
    return NULL;
}
// seconds per forward FLOP of a forward and its backward (the backward does 2.5x the FLOPs)
static inline double att_measured_cost(const AttMeasured* m) { return 1.0 / m->fwd + 2.5 / m->bwd; }

static inline const char* attention_impl_name(AttentionImpl a) {
    return a == ATTENTION_TC    ? "tc"
           : a == ATTENTION_TC2   ? "tc2"
           : a == ATTENTION_FP32  ? "fp32"
           : a == ATTENTION_CUDNN ? "cudnn"
                                  : "auto";
}

static inline AttentionImpl attention_impl_parse(const char* s) {
    if (s && strcmp(s, "auto") == 0) return ATTENTION_AUTO;
    if (s && strcmp(s, "fp32") == 0) return ATTENTION_FP32;
    if (s && strcmp(s, "tc") == 0) return ATTENTION_TC;
    if (s && strcmp(s, "tc2") == 0) return ATTENTION_TC2;
    if (s && strcmp(s, "cudnn") == 0) return ATTENTION_CUDNN;
    FAIL("--attention %s: expected auto, fp32, tc, tc2 or cudnn", s ? s : "(missing)");
    return ATTENTION_AUTO;
}

// what runs for a choice (auto: its candidate that adds no memory, which the ranking below may
// beat); FAILs, naming the reason, when the choice cannot run in this build or for this head dim
static inline AttentionImpl attention_impl_resolve(AttentionImpl want, int hd) {
    if (want == ATTENTION_AUTO) {
#if defined(LLMC_CPU) || defined(ENABLE_FP32)
        (void)hd;
        return ATTENTION_FP32;
#else
        return attention_tc_supported_hd(hd) && attention_tc_gpu_passed(hd) ? ATTENTION_TC : ATTENTION_FP32;  // never tc2 or cudnn (the top of this file)
#endif
    }
    if (want == ATTENTION_TC || want == ATTENTION_TC2) {
        const char* name = attention_impl_name(want);
#if defined(LLMC_CPU)
        (void)hd;
        FAIL("--attention %s: the CPU build has no tensor cores (use auto or fp32)", name);
#elif defined(ENABLE_FP32)
        (void)hd;
        FAIL("--attention %s: the tensor-core attention needs bf16 activations; this is an ENABLE_FP32 build "
             "(use auto or fp32)", name);
#else
        if (!attention_tc_supported_hd(hd))
            FAIL("--attention %s: head dim %d is not supported by the tensor-core attention (multiples of 8 from 32 to "
                 "256 are; use auto or fp32)", name, hd);
#endif
    }
    if (want == ATTENTION_CUDNN) {
        // head dims: the library decides at its first call (it says which it takes)
        (void)hd;
#if defined(LLMC_CPU)
        FAIL("--attention cudnn: the CPU build has no cuDNN; cuDNN's attention is in the bf16 CUDA build made with "
             "`make USE_CUDNN=1` (use auto or fp32 here)");
#elif defined(ENABLE_FP32)
        FAIL("--attention cudnn: cuDNN's attention needs bf16 activations; this is an ENABLE_FP32 build (build the bf16 "
             "one with `make USE_CUDNN=1`, or use auto or fp32)");
#elif !ATTENTION_HAS_CUDNN
        FAIL("--attention cudnn: this build has no cuDNN; rebuild with `make USE_CUDNN=1` (it needs cuDNN 9 and "
             "downloads the cudnn-frontend headers: README, \"cuDNN attention\"), or use auto, tc or fp32");
#endif
    }
    return want;
}

// auto's candidates at a head dim and mode, the fastest first by att_measured; the last is
// attention_impl_resolve's (tc where it passed on a GPU, else fp32), which adds no memory.
// Only what this build can run and what is faster than that last one: at most 3.
static inline int attention_auto_candidates(int hd, int causal, AttentionImpl out[3]) {
    AttentionImpl base = attention_impl_resolve(ATTENTION_AUTO, hd);
    int n = 0;
    const AttMeasured* b = base == ATTENTION_TC ? att_measured_row(hd, causal, ATTENTION_TC) : NULL;
    if (b) {
        const AttentionImpl faster[2] = {ATTENTION_TC2, ATTENTION_CUDNN};
        for (AttentionImpl f : faster) {
            if (f == ATTENTION_CUDNN && !ATTENTION_HAS_CUDNN) continue;
            const AttMeasured* m = att_measured_row(hd, causal, f);
            if (!m || !m->passed || att_measured_cost(m) >= att_measured_cost(b)) continue;
            int at = n++;  // (insertion by cost: two entries at most)
            while (at > 0 && att_measured_cost(att_measured_row(hd, causal, out[at - 1])) > att_measured_cost(m)) {
                out[at] = out[at - 1];
                at--;
            }
            out[at] = f;
        }
    }
    out[n++] = base;
    return n;
}

// auto's candidates for this run and which one is selected (the runner steps down the list
// when a plan does not fit: attention_auto_step_down)
static AttentionImpl g_attention_auto[3];
static int g_attention_auto_n = 0, g_attention_auto_at = 0, g_attention_causal = 1;

// causal: the model's attention mode (the mode its speeds were measured in)
static inline void attention_select(AttentionImpl want, int hd, int causal) {
    g_attention_auto_n = g_attention_auto_at = 0;
    g_attention_causal = causal;
    if (want == ATTENTION_AUTO) {
        g_attention_auto_n = attention_auto_candidates(hd, causal, g_attention_auto);
        g_attention_impl = g_attention_auto[0];
    } else {
        g_attention_impl = attention_impl_resolve(want, hd);
    }
    g_attention_hd = hd;
#if ATTENTION_HAS_CUDNN
    cudnn_att_set_deterministic(g_cudnn_deterministic);
#endif
}

// auto: the candidates left below the selected one (0: none, or auto was not asked for)
static inline int attention_auto_fallbacks() { return g_attention_auto_n ? g_attention_auto_n - 1 - g_attention_auto_at : 0; }
static inline void attention_auto_step_down() {
    if (attention_auto_fallbacks() <= 0) FAIL("attention_auto_step_down: no candidate left");
    g_attention_impl = g_attention_auto[++g_attention_auto_at];
#if ATTENTION_HAS_CUDNN
    cudnn_att_set_deterministic(g_cudnn_deterministic);
#endif
}
// auto's choice for the log: what it ranked and why the selected one runs ("" unless auto
// had more than one candidate)
static inline void attention_auto_describe(char* out, size_t n) {
    out[0] = 0;
    if (g_attention_auto_n < 2) return;
    int k = snprintf(out, n, "auto at hd %d %s, by the speeds measured on a GPU (TFLOP/s forward/backward):",
                     g_attention_hd, g_attention_causal ? "causal" : "full");
    for (int i = 0; i < g_attention_auto_n && k > 0 && (size_t)k < n; i++) {
        const AttMeasured* m = att_measured_row(g_attention_hd, g_attention_causal, g_attention_auto[i]);
        k += snprintf(out + k, n - k, "%s %s %.0f/%.0f%s", i ? "," : "", attention_impl_name(g_attention_auto[i]),
                      m ? m->fwd : 0.0f, m ? m->bwd : 0.0f, i == g_attention_auto_at ? " (selected)" : "");
    }
    if (k > 0 && (size_t)k < n)
        snprintf(out + k, n - k, " (%s)", att_measured_row(g_attention_hd, g_attention_causal, g_attention_auto[0])->source);
}

// The cuDNN library this process loaded, for the log ("" unless cudnn is selected)
static inline void attention_cudnn_describe(char* out, size_t n) {
    out[0] = 0;
#if ATTENTION_HAS_CUDNN
    if (g_attention_impl == ATTENTION_CUDNN) {
        size_t v = cudnn_att_loaded_version(), c = cudnn_att_compiled_version();  // 91900 = 9.19.0
        snprintf(out, n, ", cuDNN %zu.%zu.%zu loaded (built with %zu.%zu.%zu), --cudnn-deterministic %d", v / 10000,
                 v / 100 % 100, v % 100, c / 10000, c / 100 % 100, c % 100, g_cudnn_deterministic);
    }
#else
    (void)n;
#endif
}

// cuDNN's workspace: planned by the caller (attention_workspace_bytes), handed over before the calls
static void* g_attention_ws = NULL;
static size_t g_attention_ws_bytes = 0;
static inline void attention_use_workspace(void* p, size_t bytes) { g_attention_ws = p; g_attention_ws_bytes = bytes; }
// bytes of workspace a forward or backward of this shape may use with the chosen implementation
// (0 but for cudnn, whose bound needs no device: --plan-only has none)
static inline size_t attention_workspace_bytes(int B, int T, int H, int KV, int hd) {
    if (g_attention_impl == ATTENTION_AUTO) FAIL("attention_workspace_bytes: attention_select() was not called");
#if ATTENTION_HAS_CUDNN
    if (g_attention_impl == ATTENTION_CUDNN) return cudnn_att_workspace_bound(B, T, H, KV, hd, g_cudnn_deterministic);
#endif
    (void)B; (void)T; (void)H; (void)KV; (void)hd;
    return 0;
}

static inline bool attention_use_tc() {
    if (g_attention_impl == ATTENTION_AUTO) FAIL("attention_dispatch_*: attention_select() was not called");
    return g_attention_impl == ATTENTION_TC;
}
static inline bool attention_use_tc2() {
    if (g_attention_impl == ATTENTION_AUTO) FAIL("attention_dispatch_*: attention_select() was not called");
    return g_attention_impl == ATTENTION_TC2;
}

// both modes: causal (attention_dispatch_forward) or full (attention_dispatch_full_forward)
static inline void att_dispatch_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B,
                                        int T, int H, int KV, int hd, bool causal, stream_t s) {
#ifndef LLMC_CPU
    if (attention_use_tc()) {
        (causal ? attention_tc_forward : attention_tc_full_forward)(out, lse, q, k, v, B, T, H, KV, hd, s);
        return;
    }
    if (attention_use_tc2()) {
        (causal ? attention_tc2_forward : attention_tc2_full_forward)(out, lse, q, k, v, B, T, H, KV, hd, s);
        return;
    }
#endif
#if ATTENTION_HAS_CUDNN
    if (g_attention_impl == ATTENTION_CUDNN) {
        cudnn_att_forward(out, lse, q, k, v, B, T, H, KV, hd, causal, g_attention_ws, g_attention_ws_bytes, s);
        return;
    }
#endif
    (causal ? attention_forward : attention_full_forward)(out, lse, q, k, v, B, T, H, KV, hd, s);
}
static inline void att_dispatch_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                         const floatX* k, const floatX* v, const floatX* out, const float* lse,
                                         float* delta_scratch, int B, int T, int H, int KV, int hd, bool causal,
                                         stream_t s) {
#ifndef LLMC_CPU
    if (attention_use_tc()) {
        (causal ? attention_tc_backward : attention_tc_full_backward)(dq, dk, dv, dout, q, k, v, out, lse, delta_scratch,
                                                                      B, T, H, KV, hd, s);
        return;
    }
    if (attention_use_tc2()) {
        (causal ? attention_tc2_backward : attention_tc2_full_backward)(dq, dk, dv, dout, q, k, v, out, lse,
                                                                        delta_scratch, B, T, H, KV, hd, s);
        return;
    }
#endif
#if ATTENTION_HAS_CUDNN
    if (g_attention_impl == ATTENTION_CUDNN) {
        cudnn_att_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd, causal, g_attention_ws,
                           g_attention_ws_bytes, s);
        return;
    }
#endif
    (void)delta_scratch;
    (causal ? attention_backward : attention_full_backward)(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd, s);
}

static inline void attention_dispatch_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v,
                                              int B, int T, int H, int KV, int hd, stream_t s) {
    att_dispatch_forward(out, lse, q, k, v, B, T, H, KV, hd, true, s);
}
static inline void attention_dispatch_full_forward(floatX* out, float* lse, const floatX* q, const floatX* k,
                                                   const floatX* v, int B, int T, int H, int KV, int hd, stream_t s) {
    att_dispatch_forward(out, lse, q, k, v, B, T, H, KV, hd, false, s);
}
// floats of scratch the backward needs for the chosen implementation (0 for fp32 and cudnn),
// for either mode (context parallelism calls both on one buffer): the caller plans this much
// and passes it as delta_scratch (nothing is allocated here)
static inline size_t attention_dispatch_scratch_floats(int B, int T, int H, int KV, int hd) {
#ifndef LLMC_CPU
    if (attention_use_tc()) return attention_tc_delta_floats(B, H, T);
    if (attention_use_tc2()) {
        size_t c = attention_tc2_workspace_floats(B, T, H, KV, hd, true);
        size_t f = attention_tc2_workspace_floats(B, T, H, KV, hd, false);
        return c > f ? c : f;
    }
#endif
    (void)B; (void)T; (void)H; (void)KV; (void)hd;
    return 0;
}
// delta_scratch: attention_dispatch_scratch_floats(B, T, H, KV, hd) floats (NULL when that is 0), overwritten
static inline void attention_dispatch_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                               const floatX* k, const floatX* v, const floatX* out, const float* lse,
                                               float* delta_scratch, int B, int T, int H, int KV, int hd, stream_t s) {
    att_dispatch_backward(dq, dk, dv, dout, q, k, v, out, lse, delta_scratch, B, T, H, KV, hd, true, s);
}
static inline void attention_dispatch_full_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout,
                                                    const floatX* q, const floatX* k, const floatX* v, const floatX* out,
                                                    const float* lse, float* delta_scratch, int B, int T, int H, int KV,
                                                    int hd, stream_t s) {
    att_dispatch_backward(dq, dk, dv, dout, q, k, v, out, lse, delta_scratch, B, T, H, KV, hd, false, s);
}

// RoPE fused into the attention (tc only; see the top of this file)
#ifndef ATTENTION_TC_FUSE_ROPE
#define ATTENTION_TC_FUSE_ROPE 0  // off: slower on the H200 (the top of this file)
#endif
// the fused kernels exist at head dims 64 and 128 only: elsewhere the rope launches stay
static inline bool attention_fuses_rope() {
#ifdef LLMC_CPU
    return false;
#else
    return ATTENTION_TC_FUSE_ROPE && attention_use_tc() && attention_tc_rope_supported_hd(g_attention_hd);
#endif
}
static inline void att_rope_refuse(const char* who) {
    FAIL("%s: RoPE is fused into the attention only with --attention tc in a build with ATTENTION_TC_FUSE_ROPE 1 "
         "(selected: %s, ATTENTION_TC_FUSE_ROPE %d); call rope_forward / rope_backward and the plain "
         "attention_dispatch_* when attention_fuses_rope() is false", who, attention_impl_name(g_attention_impl),
         ATTENTION_TC_FUSE_ROPE);
}
static inline void att_dispatch_forward_rope(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v,
                                             const float* rope_cos, const float* rope_sin, int B, int T, int H, int KV,
                                             int hd, bool causal, stream_t s) {
#ifndef LLMC_CPU
    if (attention_fuses_rope()) {
        (causal ? attention_tc_forward_rope : attention_tc_full_forward_rope)(out, lse, q, k, v, rope_cos, rope_sin, B, T,
                                                                              H, KV, hd, s);
        return;
    }
#endif
    (void)out; (void)lse; (void)q; (void)k; (void)v; (void)rope_cos; (void)rope_sin;
    (void)B; (void)T; (void)H; (void)KV; (void)hd; (void)s;
    att_rope_refuse(causal ? "attention_dispatch_forward_rope" : "attention_dispatch_full_forward_rope");
}
static inline void att_dispatch_backward_rope(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                              const floatX* k, const floatX* v, const floatX* out, const float* lse,
                                              float* delta_scratch, const float* rope_cos, const float* rope_sin,
                                              int B, int T, int H, int KV, int hd, bool causal, stream_t s) {
#ifndef LLMC_CPU
    if (attention_fuses_rope()) {
        (causal ? attention_tc_backward_rope : attention_tc_full_backward_rope)(
            dq, dk, dv, dout, q, k, v, out, lse, delta_scratch, rope_cos, rope_sin, B, T, H, KV, hd, s);
        return;
    }
#endif
    (void)dq; (void)dk; (void)dv; (void)dout; (void)q; (void)k; (void)v; (void)out; (void)lse; (void)delta_scratch;
    (void)rope_cos; (void)rope_sin; (void)B; (void)T; (void)H; (void)KV; (void)hd; (void)s;
    att_rope_refuse(causal ? "attention_dispatch_backward_rope" : "attention_dispatch_full_backward_rope");
}
static inline void attention_dispatch_forward_rope(floatX* out, float* lse, const floatX* q, const floatX* k,
                                                   const floatX* v, const float* rope_cos, const float* rope_sin, int B,
                                                   int T, int H, int KV, int hd, stream_t s) {
    att_dispatch_forward_rope(out, lse, q, k, v, rope_cos, rope_sin, B, T, H, KV, hd, true, s);
}
static inline void attention_dispatch_full_forward_rope(floatX* out, float* lse, const floatX* q, const floatX* k,
                                                        const floatX* v, const float* rope_cos, const float* rope_sin,
                                                        int B, int T, int H, int KV, int hd, stream_t s) {
    att_dispatch_forward_rope(out, lse, q, k, v, rope_cos, rope_sin, B, T, H, KV, hd, false, s);
}
static inline void attention_dispatch_backward_rope(floatX* dq, floatX* dk, floatX* dv, const floatX* dout,
                                                    const floatX* q, const floatX* k, const floatX* v, const floatX* out,
                                                    const float* lse, float* delta_scratch, const float* rope_cos,
                                                    const float* rope_sin, int B, int T, int H, int KV, int hd,
                                                    stream_t s) {
    att_dispatch_backward_rope(dq, dk, dv, dout, q, k, v, out, lse, delta_scratch, rope_cos, rope_sin, B, T, H, KV, hd,
                               true, s);
}
static inline void attention_dispatch_full_backward_rope(floatX* dq, floatX* dk, floatX* dv, const floatX* dout,
                                                         const floatX* q, const floatX* k, const floatX* v,
                                                         const floatX* out, const float* lse, float* delta_scratch,
                                                         const float* rope_cos, const float* rope_sin, int B, int T,
                                                         int H, int KV, int hd, stream_t s) {
    att_dispatch_backward_rope(dq, dk, dv, dout, q, k, v, out, lse, delta_scratch, rope_cos, rope_sin, B, T, H, KV, hd,
                               false, s);
}
