// See cpu_reference.h. Compiled by g++ with -DLLMC_CPU -fopenmp (dev/cuda/Makefile).
#ifndef LLMC_CPU
#error "cpu_reference.cpp must be compiled with -DLLMC_CPU (it wraps the fp32 CPU twins)"
#endif
#include "../../llmc/kernels/kernels.h"
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
void ref_encoder_forward_range(float* out, const int* tokens, const float* wte, int N, int D, int v0, int n) {
    encoder_forward_range(out, tokens, wte, N, D, v0, n, S);
}
void ref_encoder_backward_range(float* dwte, const float* dout, const int* tokens, int N, int D, int v0, int n) {
    encoder_backward_range(dwte, dout, tokens, N, D, v0, n, S);
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
void ref_attention_full_forward(float* out, float* lse, const float* q, const float* k, const float* v, int B, int T,
                                int H, int KV, int hd) {
    attention_full_forward(out, lse, q, k, v, B, T, H, KV, hd, S);
}
void ref_attention_full_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* lse, int B, int T, int H, int KV, int hd) {
    attention_full_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd, S);
}

void ref_crossentropy_forward_backward(float* losses, float* logits, const int* targets, int N, int V, float dloss,
                                       int write_dlogits) {
    crossentropy_forward_backward(losses, logits, targets, N, V, dloss, write_dlogits, S);
}
void ref_crossentropy_vp_max(float* rowmax, const float* logits, int N, int Vs, int n_valid) {
    crossentropy_vp_max(rowmax, logits, N, Vs, n_valid, S);
}
void ref_crossentropy_vp_sums(float* sums, const float* logits, const float* rowmax, const int* targets, int N, int Vs,
                              int v0, int n_valid) {
    crossentropy_vp_sums(sums, logits, rowmax, targets, N, Vs, v0, n_valid, S);
}
void ref_crossentropy_vp_finish(float* losses, float* logits, const float* rowmax, const float* sums, const int* targets,
                                int N, int Vs, int v0, int n_valid, float dloss, int write_dlogits) {
    crossentropy_vp_finish(losses, logits, rowmax, sums, targets, N, Vs, v0, n_valid, dloss, write_dlogits, S);
}

void ref_adamw_update(float* param, float* master, const float* grad, float* m, float* v, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    adamw_update(param, master, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t, S);
}
void ref_global_norm_squared(float* out, const float* g, size_t n) { global_norm_squared(out, g, n, S); }

void ref_layernorm_modulate_forward(float* out, float* mean, float* rstd, const float* inp, const float* shift,
                                    const float* scale, int ld, int B, int N, int C, float eps) {
    layernorm_modulate_forward(out, mean, rstd, inp, shift, scale, ld, B, N, C, eps, S);
}
void ref_layernorm_modulate_backward(float* dinp, float* dshift, float* dscale, const float* dout, const float* inp,
                                     const float* mean, const float* rstd, const float* scale, int ld, int B, int N,
                                     int C) {
    layernorm_modulate_backward(dinp, dshift, dscale, dout, inp, mean, rstd, scale, ld, B, N, C, nullptr, S);
}
void ref_gated_residual_forward(float* out, const float* res, const float* y, const float* gate, int ld, int B, int N,
                                int C) {
    gated_residual_forward(out, res, y, gate, ld, B, N, C, S);
}
void ref_gated_residual_backward(float* dy, float* dgate, const float* dout, const float* y, const float* gate, int ld,
                                 int B, int N, int C, int accumulate) {
    gated_residual_backward(dy, dgate, dout, y, gate, ld, B, N, C, accumulate, nullptr, S);
}
void ref_bias_forward(float* out, const float* bias, int N, int OC) { bias_forward(out, bias, N, OC, S); }
void ref_bias_backward(float* dbias, const float* dout, int N, int OC) { bias_backward(dbias, dout, N, OC, nullptr, S); }

void ref_gelu_tanh_forward(float* out, const float* inp, size_t n) { gelu_tanh_forward(out, inp, n, S); }
void ref_gelu_tanh_backward(float* dinp, const float* dout, const float* inp, size_t n) {
    gelu_tanh_backward(dinp, dout, inp, n, S);
}
void ref_silu_forward(float* out, const float* inp, size_t n) { silu_forward(out, inp, n, S); }
void ref_silu_backward(float* dinp, const float* dout, const float* inp, size_t n) { silu_backward(dinp, dout, inp, n, S); }

void ref_patchify(float* out, const float* x, int B, int C, int Fr, int Hi, int Wi, int pt, int ph, int pw) {
    patchify(out, x, B, C, Fr, Hi, Wi, pt, ph, pw, S);
}
void ref_unpatchify(float* x, const float* inp, int B, int C, int Fr, int Hi, int Wi, int pt, int ph, int pw) {
    unpatchify(x, inp, B, C, Fr, Hi, Wi, pt, ph, pw, S);
}

void ref_timestep_embedding(float* out, const float* t, int B, int dim) { timestep_embedding(out, t, B, dim, S); }
void ref_flow_prepare(float* xt, float* v, const float* x0, const float* noise, const float* t, int B,
                      size_t per_sample) {
    flow_prepare(xt, v, x0, noise, t, B, per_sample, S);
}
void ref_mse_forward_backward(float* sq, float* dpred, const float* pred, const float* target, int B,
                              size_t per_sample, float dscale) {
    mse_forward_backward(sq, dpred, pred, target, B, per_sample, dscale, S);
}

void ref_grad_accumulate(float* acc, float* grad, size_t n, int last) { grad_accumulate(acc, grad, n, last, S); }
void ref_sum_accumulate(float* acc, const float* x, size_t n) { sum_accumulate(acc, x, n, S); }

}  // extern "C"
