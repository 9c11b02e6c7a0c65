/*
Learning rate: linear warmup, then cosine decay to min_lr_frac * lr at the last step.
step counts from 1. Shared by the trainers and, in the same form, scripts/peer_common.py (both PyTorch peers).
*/
#pragma once
#include <math.h>

static inline float lr_at_step(int step, int total_steps, int warmup, float lr, float min_lr_frac) {
    float min_lr = lr * min_lr_frac;
    if (step <= warmup) return lr * (float)step / (float)warmup;
    if (total_steps <= warmup) return lr;
    float progress = (float)(step - warmup) / (float)(total_steps - warmup);
    return min_lr + 0.5f * (lr - min_lr) * (1.0f + cosf(3.14159265358979f * progress));
}

// The factor of global-norm clipping, as torch.nn.utils.clip_grad_norm_: grad_clip /
// (norm + 1e-6) when that is below 1, else 1 (and 1 when clipping is off, grad_clip 0).
static inline float grad_clip_scale(float grad_clip, float norm) {
    if (grad_clip <= 0.0f) return 1.0f;
    float coef = grad_clip / (norm + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}
