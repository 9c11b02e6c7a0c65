/*
The launchers the trainers call, from one backend or the other (docs/design.md 3). Each
llmc/kernels/X.cuh has its CPU twin llmc/kernels/cpu/X.h with the same signatures; the
trainer never sees which one it got.
*/
#pragma once
#include "../core/common.h"
#ifdef LLMC_CPU
#include "cpu/device.h"
#include "cpu/matmul.h"
#include "cpu/encoder.h"
#include "cpu/rmsnorm.h"
#include "cpu/rope.h"
#include "cpu/swiglu.h"
#include "cpu/crossentropy.h"
#include "cpu/adamw.h"
#include "cpu/adaln.h"
#include "cpu/bias.h"
#include "cpu/activation.h"
#include "cpu/patchify.h"
#include "cpu/timestep.h"
#include "cpu/flow.h"
#include "cpu/grad_accum.h"
#include "cpu/reduce.h"
#include "cpu/attention_merge.h"
#include "cpu/copy2d.h"
#else
#include "device.cuh"
#include "matmul.cuh"
#include "encoder.cuh"
#include "rmsnorm.cuh"
#include "rope.cuh"
#include "swiglu.cuh"
#include "crossentropy.cuh"
#include "adamw.cuh"
#include "adaln.cuh"
#include "bias.cuh"
#include "activation.cuh"
#include "patchify.cuh"
#include "timestep.cuh"
#include "flow.cuh"
#include "grad_accum.cuh"
#include "reduce.cuh"
#include "attention_merge.cuh"
#include "copy2d.cuh"
#include "attention_tc2.cuh"  // the second-generation tensor-core forward (bf16 builds): compiled in every CUDA build, so that ptxas and the emulator see it
#endif
#include "attention_select.h"  // the attention kernels behind --attention auto|fp32|tc: attention_dispatch_*
#ifndef LLMC_CPU
#include "attention_tc2_backward.cuh"  // the one-pass tensor-core backward (tc2)
#endif
