// See cpu_reference.h. Compiled by g++ with -DLLMC_CPU -fopenmp (dev/cuda/Makefile).
#ifndef LLMC_CPU
#error "cpu_reference.cpp must be compiled with -DLLMC_CPU (it wraps the fp32 CPU twins)"
#endif
#include "../../llmc/kernels.h"
#include "cpu_reference.h"

static const stream_t S = 0;  // CPU streams run inline

extern "C" {

void ref_matmul_forward(float* out, const float* inp, const float* w, int N, int C, int OC, int ldw, int accumulate) {
    matmul_forward(out, inp, w, N, C, OC, ldw, accumulate, S);
}
void ref_matmul_backward_input(float* dinp, const float* dout, const float* w, int N, int C, int OC, int ldw,
                               int accumulate) {
    matmul_backward_input(dinp, dout, w, N, C, OC, ldw, accumulate, S);
}
void ref_matmul_backward_weight(float* dw, const float* dout, const float* inp, int N, int C, int OC, int ldw) {
    matmul_backward_weight(dw, dout, inp, N, C, OC, ldw, S);
    // matmul_setup/teardown/workspace_bytes are no-ops on the CPU; referenced so that no
    // "defined but not used" warning hides a real one
    (void)matmul_setup; (void)matmul_teardown; (void)matmul_workspace_bytes;
}

void ref_encoder_forward(float* out, const int* tokens, const float* wte, int N, int D) {
    encoder_forward(out, tokens, wte, N, D, S);
}
void ref_encoder_backward(float* dwte, const float* dout, const int* tokens, int N, int D) {
    encoder_backward(dwte, dout, tokens, N, D, S);
}

void ref_rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps) {
    rmsnorm_forward(out, rstd, inp, w, N, C, eps, S);
}
void ref_rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                          const float* rstd, int N, int C) {
    rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C, S);
}

void ref_rope_forward(float* out, const float* inp, const float* cos_t, const float* sin_t, int B, int T, int nh,
                      int hd) {
    rope_forward(out, inp, cos_t, sin_t, B, T, nh, hd, S);
}
void ref_rope_backward(float* dinp, const float* dout, const float* cos_t, const float* sin_t, int B, int T, int nh,
                       int hd) {
    rope_backward(dinp, dout, cos_t, sin_t, B, T, nh, hd, S);
}

void ref_swiglu_forward(float* out, const float* h1, const float* h3, size_t n) { swiglu_forward(out, h1, h3, n, S); }
void ref_swiglu_backward(float* dh1, float* dh3, const float* dout, const float* h1, const float* h3, size_t n) {
    swiglu_backward(dh1, dh3, dout, h1, h3, n, S);
}

void ref_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, int B, int T,
                           int H, int KV, int hd) {
    attention_forward(out, lse, q, k, v, B, T, H, KV, hd, S);
}
void ref_attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                            const float* v, const float* out, const float* lse, int B, int T, int H, int KV, int hd) {
    attention_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd, S);
}

void ref_crossentropy_forward_backward(float* losses, float* logits, const int* targets, int N, int V, float dloss,
                                       int write_dlogits) {
    crossentropy_forward_backward(losses, logits, targets, N, V, dloss, write_dlogits, S);
}

void ref_adamw_update(float* param, float* master, const float* grad, float* m, float* v, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    adamw_update(param, master, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t, S);
}
void ref_global_norm_squared(float* out, const float* g, size_t n) { global_norm_squared(out, g, n, S); }

}  // extern "C"
