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
