/*
The CPU twins (llmc/kernels/cpu/X.h) as plain fp32 functions for the dev/cuda ladders.
The twins are written for -DLLMC_CPU, where floatX is float, so they cannot be
included in an nvcc translation unit whose floatX is bf16. cpu_reference.cpp is
compiled by g++ with -DLLMC_CPU -fopenmp, includes llmc/kernels/kernels.h and wraps every
launcher as ref_<launcher> (same arguments, float everywhere, no stream); each
ladder links with that object. Semantics are exactly the twins'.
*/
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void ref_matmul_forward(float* out, const float* inp, const float* w, int N, int C, int OC, int ldw, int accumulate);
void ref_matmul_backward_input(float* dinp, const float* dout, const float* w, int N, int C, int OC, int ldw,
                               int accumulate);
void ref_matmul_backward_weight(float* dw, const float* dout, const float* inp, int N, int C, int OC, int ldw);

void ref_encoder_forward(float* out, const int* tokens, const float* wte, int N, int D);
void ref_encoder_backward(float* dwte, const float* dout, const int* tokens, int N, int D);
void ref_encoder_forward_range(float* out, const int* tokens, const float* wte, int N, int D, int v0, int n);
void ref_encoder_backward_range(float* dwte, const float* dout, const int* tokens, int N, int D, int v0, int n);

void ref_rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps);
void ref_rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                          const float* rstd, int N, int C);

void ref_rope_forward(float* out, const float* inp, const float* cos_t, const float* sin_t, int B, int T, int nh,
                      int hd);
void ref_rope_backward(float* dinp, const float* dout, const float* cos_t, const float* sin_t, int B, int T, int nh,
                       int hd);

void ref_swiglu_forward(float* out, const float* h1, const float* h3, size_t n);
void ref_swiglu_backward(float* dh1, float* dh3, const float* dout, const float* h1, const float* h3, size_t n);

void ref_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, int B, int T,
                           int H, int KV, int hd);
void ref_attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                            const float* v, const float* out, const float* lse, int B, int T, int H, int KV, int hd);
void ref_attention_full_forward(float* out, float* lse, const float* q, const float* k, const float* v, int B, int T,
                                int H, int KV, int hd);
void ref_attention_full_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* lse, int B, int T, int H, int KV, int hd);

void ref_crossentropy_forward_backward(float* losses, float* logits, const int* targets, int N, int V, float dloss,
                                       int write_dlogits);
void ref_crossentropy_vp_max(float* rowmax, const float* logits, int N, int Vs, int n_valid);
void ref_crossentropy_vp_sums(float* sums, const float* logits, const float* rowmax, const int* targets, int N, int Vs,
                              int v0, int n_valid);
void ref_crossentropy_vp_finish(float* losses, float* logits, const float* rowmax, const float* sums, const int* targets,
                                int N, int Vs, int v0, int n_valid, float dloss, int write_dlogits);

void ref_adamw_update(float* param, float* master, const float* grad, float* m, float* v, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t);
void ref_global_norm_squared(float* out, const float* g, size_t n);

void ref_layernorm_modulate_forward(float* out, float* mean, float* rstd, const float* inp, const float* shift,
                                    const float* scale, int ld, int B, int N, int C, float eps);
void ref_layernorm_modulate_backward(float* dinp, float* dshift, float* dscale, const float* dout, const float* inp,
                                     const float* mean, const float* rstd, const float* scale, int ld, int B, int N,
                                     int C);
void ref_gated_residual_forward(float* out, const float* res, const float* y, const float* gate, int ld, int B, int N,
                                int C);
void ref_gated_residual_backward(float* dy, float* dgate, const float* dout, const float* y, const float* gate, int ld,
                                 int B, int N, int C, int accumulate);
void ref_bias_forward(float* out, const float* bias, int N, int OC);
void ref_bias_backward(float* dbias, const float* dout, int N, int OC);

void ref_gelu_tanh_forward(float* out, const float* inp, size_t n);
void ref_gelu_tanh_backward(float* dinp, const float* dout, const float* inp, size_t n);
void ref_silu_forward(float* out, const float* inp, size_t n);
void ref_silu_backward(float* dinp, const float* dout, const float* inp, size_t n);

void ref_patchify(float* out, const float* x, int B, int C, int Fr, int Hi, int Wi, int pt, int ph, int pw);
void ref_unpatchify(float* x, const float* inp, int B, int C, int Fr, int Hi, int Wi, int pt, int ph, int pw);

void ref_timestep_embedding(float* out, const float* t, int B, int dim);
void ref_flow_prepare(float* xt, float* v, const float* x0, const float* noise, const float* t, int B,
                      size_t per_sample);
void ref_mse_forward_backward(float* sq, float* dpred, const float* pred, const float* target, int B,
                              size_t per_sample, float dscale);

void ref_grad_accumulate(float* acc, float* grad, size_t n, int last);
void ref_sum_accumulate(float* acc, const float* x, size_t n);

#ifdef __cplusplus
}
#endif
