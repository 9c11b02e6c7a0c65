#!/usr/bin/env python3
"""
ptxas gate over every kernel of llmc/kernels/*.cuh (make test, after the CUDA compile).

No GPU has run these kernels, so what ptxas says about them is the only evidence of how
they will sit on an SM. The CUDA compile of make test (make cuda-compile) runs nvcc with
-Xptxas -v and keeps ptxas' report of each translation unit in build/<target>.ptxas; this
script reads those reports and fails when a kernel

  1. spills or has a stack frame, unless ALLOW below lists it (with a limit and a reason);
  2. uses more registers (or shared memory) than the blocks per SM its design assumes
     allow on an sm_90 SM (65536 registers allocated 256 per warp, 2048 threads, 228 KB of
     shared memory with 1 KB reserved per block): at least the minBlocks of a
     __launch_bounds__(T, minBlocks), and the blocks per SM of KERNELS below (block size
     and the occupancy the design assumes, from the code's comments and
     docs/kernel_predictions*.md);
  3. takes dynamic shared memory that can exceed 48 KB without a
     cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ...) on
     it (direct, or through a helper that calls it, such as att_prepare_smem): without
     it such a launch fails on the GPU.
Coverage: every __global__ function of llmc/kernels/*.cuh must be in a report (a kernel that
is never compiled is never checked) and in KERNELS (a new kernel must state its block
size and the occupancy it assumes); KERNELS may name no kernel that no longer exists.
Block sizes are checked against __launch_bounds__ and against the launch sites whose
block size is a constant. The largest dynamic shared memory of a kernel is KERNELS' (its
launcher's formula worked out by hand, to be updated with the tiles): ptxas cannot see it.

  python3 dev/test/ptxas_gate.py build/*.ptxas       the gate; prints the table and PASS/FAIL lines
  python3 dev/test/ptxas_gate.py --planted NVCC      compiles dev/test/ptxas_gate_planted.cu, whose
                                                     kernels carry one defect each, and passes only
                                                     when the gate catches every one of them (and
                                                     passes its clean kernels)
A report whose name ends in _fp32.ptxas is the PRECISION=FP32 build; the others bf16.
"""
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# --- sm_90 (H100, H200): what one SM holds
SM_REGS, REG_UNIT = 65536, 256
SM_THREADS, SM_BLOCKS = 2048, 32
SM_SMEM, BLOCK_SMEM_MAX, SMEM_RESERVED = 228 * 1024, 227 * 1024, 1024
DEFAULT_DYN_SMEM = 48 * 1024  # above this, a launch needs the attribute

# --- the occupancy each kernel's design assumes
# Why the numbers: a streaming kernel that loads one element per thread per iteration has
# as many bytes in flight as it has resident threads; docs/kernel_predictions_memory_bound.md
# counts on ~22 KB in flight per SM, which even 2048 threads x 4 bytes do not reach, so
# these kernels need every thread slot: 2048 threads per SM (32 registers at most).
# Kernels that load 16-byte chunks reach 22 KB with fewer threads: 22 KB / (16 bytes x
# loads per thread) threads, rounded up to blocks.
STREAM = "one element per thread per load: needs every thread slot (2048 per SM) for its bytes in flight"
COLSUM = ("column sums, 32 columns x 16 row slices, scalar loads down the rows: as a streaming "
          "kernel, every thread slot (4 blocks of 512)")
ONE = "launched as one block, or a few: no occupancy to keep"
TC = ("tensor-core attention: two CTAs per SM, so that one CTA's cp.async tile loads overlap the "
      "other's mma (llmc/kernels/attention_tc_backward.cuh: 'at 241 [registers], still two CTAs')")
TC2 = ("the one-pass tensor-core backward: one CTA of 8 warps per SM, the warps of v6's two CTAs of 4 "
       "(llmc/kernels/attention_tc2_backward.cuh: 128-key tiles, dK and dV in registers)")


def vec16(loads, threads):
    need = math.ceil(22 * 1024 / (16 * loads))
    return math.ceil(need / threads), "%d 16-byte load%s per thread: 22 KB in flight needs %d threads" % (
        loads, "s" if loads > 1 else "", need)


_SW_F, _SW_F_WHY = vec16(2, 256)
_SW_B, _SW_B_WHY = vec16(3, 256)
_GA, _GA_WHY = vec16(2, 256)  # at least two: grad and acc (bf16: grad and two float4s of acc)
_CE, _CE_WHY = vec16(1, 512)
_DELTA, _DELTA_WHY = vec16(2, 256)
_TC2R, _TC2R_WHY = vec16(2, 256)
_V2, _V2_WHY = vec16(2, 256)
_V3, _V3_WHY = vec16(3, 256)
_ROPE, _ROPE_WHY = vec16(1, 256)
_ENC, _ENC_WHY = vec16(8, 256)
# adaln.cuh's rows in registers (dev/cuda/adaln.cu's version 2): NV 16-byte loads per lane
# in flight (the forward: x; the backward's dinp: x and dout), one warp per row
_LNF = {nv: vec16(nv, 256) for nv in (1, 2, 4, 8, 16)}
_LNB = {nv: vec16(2 * nv, 256) for nv in (1, 2, 4, 8, 16)}
STAGE2 = "two-stage column sums, stage 2: a thread per column adds the chunk partials, small next to stage 1"

# name: (threads per block (the largest the launcher uses), blocks per SM the design
#        assumes, largest dynamic shared memory in bytes (0: none), why)
KERNELS = {
    # activation.cuh, flow.cuh, patchify.cuh, rope.cuh, encoder.cuh, adamw.cuh: streaming
    "gelu_tanh_forward_kernel": (256, 8, 0, STREAM),
    "gelu_tanh_backward_kernel": (256, 8, 0, STREAM),
    "silu_forward_kernel": (256, 8, 0, STREAM),
    "silu_backward_kernel": (256, 8, 0, STREAM),
    "flow_prepare_kernel": (256, 8, 0, STREAM),
    "patchify_kernel": (256, 8, 0, STREAM),
    "unpatchify_kernel": (256, 8, 0, STREAM),
    "rope_pair_kernel": (256, 8, 0, "one pair a thread, 2-byte loads: " + STREAM),
    "rope_vec_kernel": (256, _ROPE, 0, _ROPE_WHY + " (a chunk of q or k; cos/sin hit L1)"),
    "encoder_forward_kernel": (256, 8, 0, STREAM),
    "encoder_rank_kernel": (256, 4, 0, "integer compares from shared memory (8 KB a block), N/32 blocks: "
                            "several blocks a SM to hide the tile loads"),
    "encoder_group_vec_kernel": (256, _ENC, 0, _ENC_WHY + " (ENC_UNROLL rows of dout)"),
    "encoder_group_kernel": (256, 4, 0, "ENC_UNROLL 2-byte loads a thread in flight: half the thread slots suffice"),
    "adamw_kernel": (256, 8, 0, STREAM),
    "bias_forward_kernel": (256, 8, 0, STREAM),
    "gated_residual_forward_kernel": (256, 8, 0, STREAM),
    "gated_residual_backward_dy_kernel": (256, 8, 0, STREAM),
    "bias_forward_vec_kernel": (256, _V2, 0, _V2_WHY + " (out, bias)"),
    "gated_residual_forward_vec_kernel": (256, _V3, 0, _V3_WHY + " (res, y, gate)"),
    "gated_residual_backward_dy_vec_kernel": (256, _V2, 0, _V2_WHY + " (dout, gate)"),
    # context parallelism (attention_merge.cuh, copy2d.cuh): streaming
    "float_accumulate_kernel": (256, 8, 0, STREAM),
    "copy_2d_kernel": (256, 8, 0, STREAM),
    "attention_merge_kernel": (256, 8, 0, "one warp per row, scalar loads of o_acc and o_p: " + STREAM),
    "layernorm_modulate_forward_kernel": (256, 8, 0, "one warp per row, scalar loads: " + STREAM),
    "layernorm_modulate_backward_dinp_kernel": (256, 8, 0, "one warp per row, scalar loads: " + STREAM),
    "rmsnorm_backward_dinp_kernel": (256, 8, 0, "one warp per row, scalar loads: " + STREAM),
    "gnorm_partial_kernel": (256, 8, 0, "GNORM_BLOCKS = 1024 blocks are 7.8 per SM on 132 SMs: one wave "
                             "only at 8 blocks per SM; scalar loads"),
    # column sums
    "bias_backward_kernel": (512, 4, 0, COLSUM),
    "gated_residual_backward_dgate_kernel": (512, 4, 0, COLSUM),
    "layernorm_modulate_backward_colsum_kernel": (512, 4, 0, COLSUM),
    "rmsnorm_backward_dw_kernel": (512, 4, 0, COLSUM),
    "bias_backward_partial_kernel": (512, 4, 0, COLSUM + "; stage 1 of two, a block per chunk of 256 rows"),
    "gres_dgate_partial_kernel": (512, 4, 0, COLSUM + "; stage 1 of two, a block per chunk of 256 rows"),
    "lnmod_colsum_partial_kernel": (512, 4, 0, COLSUM + "; stage 1 of two, a block per chunk of 256 rows"),
    "bias_backward_finish_kernel": (256, 1, 0, STAGE2),
    "adaln_colsum_finish_kernel": (256, 1, 0, STAGE2),
    # 16-byte chunks
    "swiglu_forward_kernel": (256, _SW_F, 0, _SW_F_WHY + " (h1, h3)"),
    "swiglu_backward_kernel": (256, _SW_B, 0, _SW_B_WHY + " (dout, h1, h3)"),
    "grad_accumulate_kernel": (256, _GA, 0, _GA_WHY + " (grad and acc; bf16: three)"),
    "grad_add_kernel": (256, 8, 0, STREAM),
    "crossentropy_kernel": (512, _CE, 0, "one block per row: " + _CE_WHY),
    "crossentropy_vp_max_kernel": (512, _CE, 0, "one block per row: " + _CE_WHY),
    "crossentropy_vp_sums_kernel": (512, _CE, 0, "one block per row: " + _CE_WHY),
    "crossentropy_vp_finish_kernel": (512, _CE, 0, "one block per row: " + _CE_WHY),
    "attention_tc_delta_kernel": (256, _DELTA, 0, _DELTA_WHY + " (dout, out)"),
    # rows kept in registers
    "rmsnorm_forward_kernel": (256, 2, 0, "a row of up to 8 chunks per lane kept in registers (101 in bf16, "
                               "llmc/kernels/rmsnorm.cuh): two blocks per SM, one would halve the bytes in flight"),
    "rmsnorm_forward_stream_kernel": (256, 2, 4 * 1024, "a persistent grid of 2 blocks per SM "
                                      "(RMS_STREAM_BLOCKS_PER_SM), two rows of up to 8 chunks a lane in registers; "
                                      "the weight in shared memory, C * 2 bytes <= 4 KB (C <= 2048 in bf16)"),
    "rmsnorm_backward_kernel": (256, 2, 96 * 1024, "RMS_BWD_SMEM_MAX (96 KB of dw slots): '2 blocks per SM'"),
    "rmsnorm_backward_stream_kernel": (256, 1, 100 * 1024, "two rows of dy and x (up to 8 chunks a lane each) in "
                                       "registers: one block of 8 warps per SM by design (llmc/kernels/rmsnorm.cuh); "
                                       "RMS_BWD_SMEM_MAX of dw slots + the weight, C * 2 bytes <= 4 KB"),
    # rows kept in registers (adaln.cuh)
    "lnmod_forward_nv1_kernel": (256, _LNF[1][0], 0, "a row in registers, 1 vector per lane: " + _LNF[1][1]),
    "lnmod_forward_nv2_kernel": (256, _LNF[2][0], 0, "a row in registers, 2 vectors per lane: " + _LNF[2][1]),
    "lnmod_forward_nv4_kernel": (256, _LNF[4][0], 0, "a row in registers, 4 vectors per lane: " + _LNF[4][1]),
    "lnmod_forward_nv8_kernel": (256, _LNF[8][0], 0, "a row in registers, 8 vectors per lane: " + _LNF[8][1]),
    "lnmod_forward_nv16_kernel": (256, _LNF[16][0], 0, "a row in registers, 16 vectors per lane: " + _LNF[16][1]),
    "lnmod_dinp_nv1_kernel": (256, _LNB[1][0], 0, "a row of x and dout in registers, 1 vector per lane each: " + _LNB[1][1]),
    "lnmod_dinp_nv2_kernel": (256, _LNB[2][0], 0, "a row of x and dout in registers, 2 vectors per lane each: " + _LNB[2][1]),
    "lnmod_dinp_nv4_kernel": (256, _LNB[4][0], 0, "a row of x and dout in registers, 4 vectors per lane each: " + _LNB[4][1]),
    "lnmod_dinp_nv8_kernel": (256, _LNB[8][0], 0, "a row of x and dout in registers, 8 vectors per lane each: " + _LNB[8][1]),
    "lnmod_dinp_nv16_kernel": (256, _LNB[16][0], 0, "a row of x and dout in registers, 16 vectors per lane each: " + _LNB[16][1]),
    # one block, or few
    "gnorm_final_kernel": (32, 1, 0, ONE + " (one warp)"),
    "sum_final_kernel": (32, 1, 0, ONE + " (one warp)"),
    "sum_partial_kernel": (256, 1, 0, ONE + " (SUM_BLOCKS = 64 blocks, fewer than the SMs)"),
    "encoder_max_token_kernel": (1024, 1, 0, ONE + " (one block of 1024)"),
    "mse_kernel": (512, 1, 0, ONE + " (one block per sample, B blocks)"),
    "timestep_embedding_kernel": (256, 1, 0, ONE + " (B x 128 values)"),
    "matmul_fallback_kernel": (256, 1, 0, "the fallback for what cuBLASLt rejects, not tuned: one block fits"),
    "encoder_backward_kernel": (256, 1, 0, "its design states no occupancy (34.9 KB of static shared memory "
                                "allows 6 blocks): one block fits"),
    # attention: fp32 (CUDA cores) sized by shared memory at the largest head dim
    "attention_forward_kernel": (256, 1, (4 * 32 * 257 + 32 * 32) * 4,
                                 "att_smem_forward(ATT_MAX_HD = 256): one block per SM at hd 256"),
    "attention_backward_dkdv_kernel": (256, 1, (6 * 32 * 257 + 2 * 32 * 33 + 2 * 32) * 4,
                                       "att_smem_dkdv(ATT_MAX_HD = 256): one block per SM at hd 256"),
    "attention_backward_dq_kernel": (256, 1, (5 * 32 * 257 + 32 * 33) * 4,
                                     "att_smem_dq(ATT_MAX_HD = 256): one block per SM at hd 256"),
    # attention on tensor cores, one kernel per compiled width HDP (att_tc_hdp(hd)): dynamic
    # shared memory of att_tc_smem_forward(hd), att_tc_smem_dkdv<HDP>() and att_tc_smem_dq<HDP>()
    # (bf16 tiles, rows of HDP + 8); above HDP 128 the second configuration's smaller tiles
    # (forward 32 keys; dK/dV 32 keys and 32 query rows; dQ 32 keys, 16 above 192)
    "attention_tc_forward_hd32_kernel": (128, 2, (64 + 4 * 64) * 40 * 2, TC),
    "attention_tc_forward_hd48_kernel": (128, 2, (64 + 4 * 64) * 56 * 2, TC),
    "attention_tc_forward_hd64_kernel": (128, 2, (64 + 4 * 64) * 72 * 2, TC),
    "attention_tc_forward_hd80_kernel": (128, 2, (64 + 4 * 64) * 88 * 2, TC),
    "attention_tc_forward_hd96_kernel": (128, 2, (64 + 4 * 64) * 104 * 2, TC),
    "attention_tc_forward_hd112_kernel": (128, 2, (64 + 4 * 64) * 120 * 2, TC),
    "attention_tc_forward_hd128_kernel": (128, 2, (64 + 4 * 64) * 136 * 2, TC),
    "attention_tc_forward_hd160_kernel": (128, 2, (64 + 4 * 32) * 168 * 2, TC),
    "attention_tc_forward_hd192_kernel": (128, 2, (64 + 4 * 32) * 200 * 2, TC),
    "attention_tc_forward_hd224_kernel": (128, 2, (64 + 4 * 32) * 232 * 2, TC),
    "attention_tc_forward_hd256_kernel": (128, 2, (64 + 4 * 32) * 264 * 2, TC),
    "attention_tc_forward_rope_hd64_kernel": (128, 2, (64 + 4 * 64) * 72 * 2, TC),
    "attention_tc_forward_rope_hd128_kernel": (128, 2, (64 + 4 * 64) * 136 * 2, TC),
    "attention_tc_dkdv_hd32_kernel": (128, 2, (2 * 64 + 4 * 64) * 40 * 2 + 4 * 64 * 4, TC),
    "attention_tc_dkdv_hd48_kernel": (128, 2, (2 * 64 + 4 * 64) * 56 * 2 + 4 * 64 * 4, TC),
    "attention_tc_dkdv_hd64_kernel": (128, 2, (2 * 64 + 4 * 64) * 72 * 2 + 4 * 64 * 4, TC),
    "attention_tc_dkdv_hd80_kernel": (128, 2, (2 * 64 + 4 * 32) * 88 * 2 + 4 * 32 * 4, TC),
    "attention_tc_dkdv_hd96_kernel": (128, 2, (2 * 64 + 4 * 32) * 104 * 2 + 4 * 32 * 4, TC),
    "attention_tc_dkdv_hd112_kernel": (128, 2, (2 * 64 + 4 * 32) * 120 * 2 + 4 * 32 * 4, TC),
    "attention_tc_dkdv_hd128_kernel": (128, 2, (2 * 64 + 4 * 32) * 136 * 2 + 4 * 32 * 4, TC),
    "attention_tc_dkdv_hd160_kernel": (128, 2, (2 * 32 + 4 * 32) * 168 * 2 + 4 * 32 * 4, TC),
    "attention_tc_dkdv_hd192_kernel": (128, 2, (2 * 32 + 4 * 32) * 200 * 2 + 4 * 32 * 4, TC),
    "attention_tc_dkdv_hd224_kernel": (128, 2, (2 * 32 + 4 * 32) * 232 * 2 + 4 * 32 * 4, TC),
    "attention_tc_dkdv_hd256_kernel": (128, 2, (2 * 32 + 4 * 32) * 264 * 2 + 4 * 32 * 4, TC),
    "attention_tc_dkdv_rope_hd64_kernel": (128, 2, (2 * 64 + 4 * 64) * 72 * 2 + 4 * 64 * 4, TC),
    "attention_tc_dkdv_rope_hd128_kernel": (128, 2, (2 * 64 + 4 * 32) * 136 * 2 + 4 * 32 * 4, TC),
    "attention_tc_dq_hd32_kernel": (128, 2, (2 * 64 + 4 * 64) * 40 * 2, TC),
    "attention_tc_dq_hd48_kernel": (128, 2, (2 * 64 + 4 * 64) * 56 * 2, TC),
    "attention_tc_dq_hd64_kernel": (128, 2, (2 * 64 + 4 * 64) * 72 * 2, TC),
    "attention_tc_dq_hd80_kernel": (128, 2, (2 * 64 + 4 * 64) * 88 * 2, TC),
    "attention_tc_dq_hd96_kernel": (128, 2, (2 * 64 + 4 * 64) * 104 * 2, TC),
    "attention_tc_dq_hd112_kernel": (128, 2, (2 * 64 + 4 * 64) * 120 * 2, TC),
    "attention_tc_dq_hd128_kernel": (128, 2, (2 * 64 + 4 * 64) * 136 * 2, TC),
    "attention_tc_dq_hd160_kernel": (128, 2, (2 * 64 + 4 * 32) * 168 * 2, TC),
    "attention_tc_dq_hd192_kernel": (128, 2, (2 * 64 + 4 * 32) * 200 * 2, TC),
    "attention_tc_dq_hd224_kernel": (128, 2, (2 * 64 + 4 * 16) * 232 * 2, TC),
    "attention_tc_dq_hd256_kernel": (128, 2, (2 * 64 + 4 * 16) * 264 * 2, TC),
    "attention_tc_dq_rope_hd64_kernel": (128, 2, (2 * 64 + 4 * 64) * 72 * 2, TC),
    "attention_tc_dq_rope_hd128_kernel": (128, 2, (2 * 64 + 4 * 64) * 136 * 2, TC),
    # the second-generation forward (attention_tc2.cuh): att_tc2_smem_forward(hd) = (BQ + 4 BK)
    # (HDP + 8) 2 bytes; 128-row query tiles (two row slices a warp) up to HDP 128, 128-key tiles
    # at 64, 64-key tiles to 96 and 32 above; v6's 64-row tiles with 32-key tiles above 128
    "attention_tc2_forward_hd32_kernel": (128, 2, (128 + 4 * 64) * 40 * 2, TC),
    "attention_tc2_forward_hd48_kernel": (128, 2, (128 + 4 * 64) * 56 * 2, TC),
    "attention_tc2_forward_hd64_kernel": (128, 2, (128 + 4 * 128) * 72 * 2, TC),
    "attention_tc2_forward_hd80_kernel": (128, 2, (128 + 4 * 64) * 88 * 2, TC),
    "attention_tc2_forward_hd96_kernel": (128, 2, (128 + 4 * 64) * 104 * 2, TC),
    "attention_tc2_forward_hd112_kernel": (128, 2, (128 + 4 * 32) * 120 * 2, TC),
    "attention_tc2_forward_hd128_kernel": (128, 2, (128 + 4 * 32) * 136 * 2, TC),
    "attention_tc2_forward_hd160_kernel": (128, 2, (64 + 4 * 32) * 168 * 2, TC),
    "attention_tc2_forward_hd192_kernel": (128, 2, (64 + 4 * 32) * 200 * 2, TC),
    "attention_tc2_forward_hd224_kernel": (128, 2, (64 + 4 * 32) * 232 * 2, TC),
    "attention_tc2_forward_hd256_kernel": (128, 2, (64 + 4 * 32) * 264 * 2, TC),
    # the one-pass backward (attention_tc2_backward.cuh), one kernel per compiled width: att_tc2_smem<HDP>(),
    # (2 BK + 4 BQ) (HDP + 8) bf16 tiles + BK (BQ + 8) bf16 of dS^T + 4 BQ floats of lse / delta; BK 128
    # up to HDP 128, 64 above; BQ 64 up to HDP 80, 32 above
    "attention_tc2_bwd_hd32_kernel": (256, 1, (2 * 128 + 4 * 64) * 40 * 2 + 128 * 72 * 2 + 4 * 64 * 4, TC2),
    "attention_tc2_bwd_hd48_kernel": (256, 1, (2 * 128 + 4 * 64) * 56 * 2 + 128 * 72 * 2 + 4 * 64 * 4, TC2),
    "attention_tc2_bwd_hd64_kernel": (256, 1, (2 * 128 + 4 * 64) * 72 * 2 + 128 * 72 * 2 + 4 * 64 * 4, TC2),
    "attention_tc2_bwd_hd80_kernel": (256, 1, (2 * 128 + 4 * 64) * 88 * 2 + 128 * 72 * 2 + 4 * 64 * 4, TC2),
    "attention_tc2_bwd_hd96_kernel": (256, 1, (2 * 128 + 4 * 32) * 104 * 2 + 128 * 40 * 2 + 4 * 32 * 4, TC2),
    "attention_tc2_bwd_hd112_kernel": (256, 1, (2 * 128 + 4 * 32) * 120 * 2 + 128 * 40 * 2 + 4 * 32 * 4, TC2),
    "attention_tc2_bwd_hd128_kernel": (256, 1, (2 * 128 + 4 * 32) * 136 * 2 + 128 * 40 * 2 + 4 * 32 * 4, TC2),
    "attention_tc2_bwd_hd160_kernel": (256, 1, (2 * 64 + 4 * 32) * 168 * 2 + 64 * 40 * 2 + 4 * 32 * 4, TC2),
    "attention_tc2_bwd_hd192_kernel": (256, 1, (2 * 64 + 4 * 32) * 200 * 2 + 64 * 40 * 2 + 4 * 32 * 4, TC2),
    "attention_tc2_bwd_hd224_kernel": (256, 1, (2 * 64 + 4 * 32) * 232 * 2 + 64 * 40 * 2 + 4 * 32 * 4, TC2),
    "attention_tc2_bwd_hd256_kernel": (256, 1, (2 * 64 + 4 * 32) * 264 * 2 + 64 * 40 * 2 + 4 * 32 * 4, TC2),
    "attention_tc2_dq_reduce_kernel": (256, _TC2R, 0, _TC2R_WHY + " (the chunk's slots and the running sum)"),
    "attention_tc2_dkv_reduce_kernel": (256, _TC2R, 0, _TC2R_WHY + " (the GQA group's dK, dV partials)"),
}

# name: (builds, the largest stack frame and spill (bytes) allowed, why)
ALLOW = {
    "timestep_embedding_kernel": (("bf16", "fp32"), 40, 0,
                                  "double cos/sin: the 40-byte frame is the Payne-Hanek reduction of "
                                  "libdevice's slow path, taken only for |angle| >= 2^31 (the angles here are at "
                                  "most 1000 rad), so it never runs"),
    "lnmod_dinp_nv16_kernel": (("bf16",), 88, 88,
                               "16 vectors of x and 16 of dout per lane (C in 2049..4096, bf16) at 255 registers: "
                               "44 bytes spill stores, 88 loads (dev/cuda/adaln.cu's version 2 as measured: C = 3072 "
                               "ran at 1694 GB/s whole backward on the H200); not a width of the presets' DiT-B or XL "
                               "(768, 1152: nv 4 and 8, no spill)"),
}

# --- the planted kernels of dev/test/ptxas_gate_planted.cu and what the gate must say about each
PLANTED_SOURCE = "dev/test/ptxas_gate_planted.cu"
PLANTED_KERNELS = {
    "planted_clean_kernel": (256, 8, 0, STREAM),
    "planted_spill_kernel": (256, 8, 0, "its __launch_bounds__(256, 8) caps it at 32 registers"),
    "planted_stack_kernel": (256, 8, 0, STREAM),
    "planted_registers_kernel": (256, 8, 0, STREAM),
    "planted_smem_kernel": (256, 1, 64 * 1024, "64 KB of dynamic shared memory, no attribute"),
    "planted_smem_ok_kernel": (256, 1, 64 * 1024, "64 KB of dynamic shared memory, opted in"),
    "planted_bounds_kernel": (128, 4, 0, "the launcher asks 256 threads of a __launch_bounds__(128) kernel"),
    "planted_uncompiled_kernel": (256, 8, 0, "a template never instantiated"),
    "planted_stale_entry_kernel": (256, 8, 0, "no such kernel"),
}
PLANTED_EXPECT = [  # (rule, kernel): each must be reported, and nothing else
    ("spill", "planted_spill_kernel"),
    ("stack", "planted_stack_kernel"),
    ("registers", "planted_registers_kernel"),
    ("dynamic_smem", "planted_smem_kernel"),
    ("block_size", "planted_bounds_kernel"),
    ("coverage", "planted_uncompiled_kernel"),
    ("coverage", "planted_unlisted_kernel"),
    ("coverage", "planted_stale_entry_kernel"),
]


# ---------------------------------------------------------------------------------
# the sources: kernels, their __launch_bounds__, launch sites, attribute calls

def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def read_defines(texts):
    defs = {}
    for t in texts:
        for m in re.finditer(r"^[ \t]*#define[ \t]+(\w+)[ \t]+([^\n]+)$", t, flags=re.M):
            defs.setdefault(m.group(1), m.group(2).strip())
        for m in re.finditer(r"\bconstexpr\s+(?:int|unsigned|size_t)\s+(\w+)\s*=\s*([^;,]+);", t):
            defs.setdefault(m.group(1), m.group(2).strip())
    return defs


def evaluate(expr, defs, depth=0):
    """An integer constant expression of literals and macros, or None."""
    if depth > 20:
        return None
    e = re.sub(r"\((?:int|unsigned|size_t|unsigned int)\)", "", expr)
    e = re.sub(r"(\d+)[uUlL]+\b", r"\1", e)
    for name in set(re.findall(r"[A-Za-z_]\w*", e)):
        if name not in defs:
            return None
        v = evaluate(defs[name], defs, depth + 1)
        if v is None:
            return None
        e = re.sub(r"\b%s\b" % name, str(v), e)
    if not re.fullmatch(r"[\d\s+\-*/%()<>]+", e):
        return None
    try:
        return int(eval(e.replace("/", "//"), {"__builtins__": {}}))
    except Exception:
        return None


def matching(text, i, open_ch, close_ch):
    """index just past the bracket that closes the one at text[i]"""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_ch:
            depth += 1
        elif text[j] == close_ch:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def split_args(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


KERNEL_RE = re.compile(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\s*(\())?")


def find_kernels(files):
    """name -> dict(file, bounds=(threads, min_blocks) or None, dynamic=bool)"""
    kernels, texts = {}, {f: strip_comments(open(os.path.join(ROOT, f)).read()) for f in files}
    defs = read_defines(texts.values())
    for f, t in texts.items():
        for m in KERNEL_RE.finditer(t):
            pos, bounds = m.end(), None
            if m.group(1):
                close = matching(t, m.start(1), "(", ")")
                args = split_args(t[m.start(1) + 1:close - 1])
                vals = [evaluate(a, defs) for a in args]
                bounds = (vals[0], vals[1] if len(vals) > 1 else None, args)
                pos = close
            nm = re.match(r"\s*(?:void\s+)?(\w+)\s*\(", t[pos:])
            if not nm:  # a kernel the gate cannot name would go unchecked
                kernels["<unreadable %s:%d>" % (f, t.count("\n", 0, m.start()) + 1)] = dict(
                    file=f, bounds=None, dynamic=False)
                continue
            name = nm.group(1)
            body_at = t.find("{", pos + nm.end())
            body = t[body_at:matching(t, body_at, "{", "}")] if body_at >= 0 else ""
            kernels[name] = dict(file=f, bounds=bounds, dynamic="extern __shared__" in body)
    return kernels, texts, defs


def launch_sites(texts, defs, kernels):
    """name -> [(file, line, resolved block threads or None, expression)]"""
    sites = {}
    for f, t in texts.items():
        for m in re.finditer(r"\b(\w+)\s*<<<", t):
            name = m.group(1)
            if name not in kernels:
                continue
            end = t.find(">>>", m.end())
            args = split_args(t[m.end():end])
            expr = args[1] if len(args) > 1 else ""
            before = function_before(t, m.start())
            val = evaluate(expr, defs)
            if val is None and re.fullmatch(r"\w+", expr):
                # the last definition of that variable above the launch: dim3 x(a, b) or x = e;
                d3 = list(re.finditer(r"\bdim3\s+%s\s*\(([^;]*)\)\s*;" % expr, before))
                asg = list(re.finditer(r"(?<![*\w])%s\s*=\s*([^;]*);" % expr, before))
                last = max(d3 + asg, key=lambda x: x.start(), default=None)
                if last is not None and last in d3:
                    dims = [evaluate(a, defs) for a in split_args(last.group(1))]
                    val = math.prod(dims) if None not in dims else None
                elif last is not None:
                    val = evaluate(last.group(1), defs)
            sites.setdefault(name, []).append((f, t.count("\n", 0, m.start()) + 1, val, expr))
    return sites


def function_before(t, pos):
    """the text of the function around pos, up to pos: from the last closing brace at the
    start of a line (the code's style puts every function's closing brace there)"""
    return t[t.rfind("\n}", 0, pos) + 1:pos]


def attribute_kernels(texts, kernels):
    """kernels on which cudaFuncAttributeMaxDynamicSharedMemorySize is set: named in the call,
    or handed to a helper whose body makes the call with its parameter (directly or through
    a variable of the calling function)"""
    out, helpers = set(), set()
    call = re.compile(r"cudaFuncSetAttribute\s*\(\s*(?:\([^)]*\)\s*)?(\w+)\s*,\s*cudaFuncAttributeMaxDynamicSharedMemorySize")
    for t in texts.values():
        for m in call.finditer(t):
            if m.group(1) in kernels:
                out.add(m.group(1))
                continue
            # a parameter: the enclosing function is a helper
            for f in re.finditer(r"\b(\w+)\s*\(([^;{}]*)\)\s*\{", function_before(t, m.start())):
                if f.group(1) not in ("if", "for", "while", "switch"):
                    if re.search(r"\b%s\b" % m.group(1), f.group(2)):
                        helpers.add(f.group(1))
                    break
    for t in texts.values():
        for h in helpers:
            for m in re.finditer(r"\b%s\s*\(" % h, t):
                args = split_args(t[m.end():matching(t, m.end() - 1, "(", ")") - 1])
                if not args:
                    continue
                names = set(re.findall(r"\w+", args[0]))
                scope = function_before(t, m.start())
                for v in list(names):  # a variable: what the calling function assigned to it
                    for a in re.finditer(r"(?<![\w.])%s\s*=\s*([^;]*);" % v, scope):
                        names |= set(re.findall(r"\w+", a.group(1)))
                out |= names & set(kernels)
    return out


# ---------------------------------------------------------------------------------
# ptxas -v reports

def demangle(names):
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if tool:
        try:
            r = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
            lines = r.stdout.splitlines()
            if len(lines) == len(names):
                return dict(zip(names, lines))
        except (OSError, subprocess.CalledProcessError):
            pass
    return {n: n for n in names}


def base_name(mangled, demangled):
    m = re.match(r"_Z(\d+)", mangled)
    if m:  # the length-prefixed identifier of an Itanium name
        return mangled[m.end():m.end() + int(m.group(1))]
    m = re.match(r"(?:void\s+)?([A-Za-z_]\w*)", demangled)
    return m.group(1) if m else mangled


def parse_report(text):
    """[(mangled, dict(stack, spill_st, spill_ld, regs, smem))] for each entry function"""
    out, cur, props = [], None, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            cur, props = m.group(1), {}
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and "stack" not in props:
            props.update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m:
            sm = re.search(r"(\d+) bytes smem", line)
            props.update(regs=int(m.group(1)), smem=int(sm.group(1)) if sm else 0)
            props.setdefault("stack", 0), props.setdefault("spill_st", 0), props.setdefault("spill_ld", 0)
            out.append((cur, props))
            cur = None
    return out


# ---------------------------------------------------------------------------------
# the rules

def blocks_per_sm(regs, threads, smem):
    warps = math.ceil(threads / 32)
    reg_warp = math.ceil(regs * 32 / REG_UNIT) * REG_UNIT
    by_regs = SM_REGS // (reg_warp * warps) if regs else SM_BLOCKS
    by_threads = (SM_THREADS // 32) // warps
    by_smem = SM_SMEM // (smem + SMEM_RESERVED) if smem <= BLOCK_SMEM_MAX else 0
    return min(by_regs, by_threads, by_smem, SM_BLOCKS), by_regs, by_smem


def gate(source_files, reports, table, allow):
    """reports: [(build, text)]. Returns (failures [(rule, kernel, message)], rows for the table)."""
    fails = []
    kernels, texts, defs = find_kernels(source_files)
    sites = launch_sites(texts, defs, kernels)
    with_attr = attribute_kernels(texts, kernels)
    parsed = {}  # (build, name) -> props, the worst of its reports
    raw = [(b, m, p) for b, t in reports for m, p in parse_report(t)]
    dem = demangle(sorted({m for _, m, _ in raw}))
    for b, m, p in raw:
        name = base_name(m, dem[m])
        old = parsed.get((b, name))
        if old is None or (p["regs"], p["stack"], p["spill_st"]) > (old["regs"], old["stack"], old["spill_st"]):
            parsed[(b, name)] = p
    compiled = {n for _, n in parsed}

    # coverage
    for name in sorted(kernels):
        if name not in compiled:
            fails.append(("coverage", name, "%s (%s) is in no ptxas report: never compiled, so never checked"
                          % (name, kernels[name]["file"])))
        if name not in table:
            fails.append(("coverage", name, "%s (%s) is not in the table: give it its block size, the blocks per "
                          "SM its design assumes and why" % (name, kernels[name]["file"])))
    for name in sorted(compiled - set(kernels)):
        if name not in table:
            fails.append(("coverage", name, "%s is compiled but not in the table" % name))
    for name in sorted(set(table) - set(kernels) - compiled):
        fails.append(("coverage", name, "the table names %s, which no source defines" % name))

    # block sizes: the table against __launch_bounds__ and the launch sites
    for name, k in sorted(kernels.items()):
        if name not in table:
            continue
        threads = table[name][0]
        if k["bounds"]:
            bt = k["bounds"][0]
            if bt is None:
                fails.append(("block_size", name, "%s: __launch_bounds__(%s) does not evaluate" %
                              (name, ", ".join(k["bounds"][2]))))
            elif bt != threads:
                fails.append(("block_size", name, "%s: __launch_bounds__(%d) but the table says %d threads" %
                              (name, bt, threads)))
        for f, line, val, expr in sites.get(name, []):
            limit = k["bounds"][0] if k["bounds"] and k["bounds"][0] else threads
            if val is not None and val > limit:
                fails.append(("block_size", name, "%s:%d launches %s with %d threads, more than its %s (%d)" %
                              (f, line, name, val, "__launch_bounds__" if k["bounds"] else "table entry", limit)))
            elif val is not None and not k["bounds"] and val != threads:
                fails.append(("block_size", name, "%s:%d launches %s with %d threads, the table says %d" %
                              (f, line, name, val, threads)))

    # dynamic shared memory
    for name, k in sorted(kernels.items()):
        if not k["dynamic"] or name not in table:
            continue
        dyn = table[name][2]
        if dyn == 0:
            fails.append(("dynamic_smem", name, "%s takes dynamic shared memory: the table must give its largest "
                          "size" % name))
        elif dyn > DEFAULT_DYN_SMEM and name not in with_attr:
            fails.append(("dynamic_smem", name, "%s takes up to %d bytes of dynamic shared memory (> 48 KB) and no "
                          "cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicSharedMemorySize, ...) is made "
                          "on it: its launch would fail" % (name, dyn)))

    # spills, stack frames, registers and the occupancy of each compiled kernel
    rows = []
    for (b, name), p in sorted(parsed.items(), key=lambda x: (x[0][1], x[0][0])):
        spill = max(p["spill_st"], p["spill_ld"])
        al = allow.get(name)
        stack_ok = p["stack"] == 0 or (al and b in al[0] and p["stack"] <= al[1])
        spill_ok = spill == 0 or (al and b in al[0] and spill <= al[2])
        if not spill_ok:
            fails.append(("spill", name, "%s (%s): %d bytes spill stores, %d bytes spill loads%s" %
                          (name, b, p["spill_st"], p["spill_ld"], " (allowed: %d)" % al[2] if al else "")))
        if not stack_ok and spill_ok:  # a spill's frame is reported as the spill
            fails.append(("stack", name, "%s (%s): %d bytes stack frame%s" %
                          (name, b, p["stack"], " (allowed: %d)" % al[1] if al else "")))
        if name not in table:
            continue
        threads, want, dyn, why = table[name]
        k = kernels.get(name)
        if k and k["bounds"] and k["bounds"][1]:
            want = max(want, k["bounds"][1])
        got, by_regs, by_smem = blocks_per_sm(p["regs"], threads, p["smem"] + dyn)
        if got < want:
            limit = "registers" if by_regs < want else "shared memory" if by_smem < want else "threads"
            fails.append(("registers" if limit != "shared memory" else "shared_memory", name,
                          "%s (%s): %d registers, %d + %d bytes of shared memory, %d threads: %d blocks per SM "
                          "(limited by %s), the design assumes %d: %s" %
                          (name, b, p["regs"], p["smem"], dyn, threads, got, limit, want, why)))
        rows.append((name, b, p["regs"], p["spill_st"], p["spill_ld"], p["stack"], p["smem"], dyn, threads, got,
                     want))
    return fails, rows


def print_table(rows):
    print("%-42s %-5s %5s %11s %6s %7s %7s %7s %9s" % ("kernel", "build", "regs", "spill st/ld", "stack",
                                                       "smem", "dyn max", "threads", "blocks/SM"))
    for name, b, regs, st, ld, stack, smem, dyn, threads, got, want in rows:
        print("%-42s %-5s %5d %11s %6d %7d %7d %7d %4d >= %d" % (name, b, regs, "%d/%d" % (st, ld), stack, smem,
                                                              dyn, threads, got, want))


def run_gate(paths):
    reports = []
    for p in paths:
        if not os.path.exists(p):
            print("FAIL report_%s: missing (make cuda-compile writes it)" % os.path.basename(p))
            return 1
        reports.append(("fp32" if p.endswith("_fp32.ptxas") else "bf16", open(p).read()))
    files = sorted("llmc/kernels/" + f for f in os.listdir(os.path.join(ROOT, "llmc", "kernels")) if f.endswith(".cuh"))
    fails, rows = gate(files, reports, KERNELS, ALLOW)
    print_table(rows)
    n_kernels = len({r[0] for r in rows})
    print("%d kernels, %d (kernel, build) pairs from %d reports" % (n_kernels, len(rows), len(paths)))
    for rule in ("coverage", "block_size", "spill", "stack", "registers", "shared_memory", "dynamic_smem"):
        mine = [f for f in fails if f[0] == rule]
        print("FAIL %s: %s" % (rule, "; ".join(m for _, _, m in mine)) if mine else "PASS " + rule)
    return 1 if fails else 0


def run_planted(nvcc):
    src = os.path.join(ROOT, PLANTED_SOURCE)
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([nvcc, "-O3", "-std=c++17", "-I" + ROOT, "-arch=sm_90", "-cubin", "-Xptxas", "-v", src,
                            "-o", os.path.join(tmp, "planted.cubin")], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr)
        print("FAIL planted_compile: nvcc exit %d" % r.returncode)
        return 1
    fails, rows = gate([PLANTED_SOURCE], [("bf16", r.stderr)], PLANTED_KERNELS, {})
    print_table(rows)
    status = 0
    for rule, name in PLANTED_EXPECT:
        hit = [msg for ru, n, msg in fails if ru == rule and n == name]
        if hit:
            print("  " + hit[0])
            print("PASS caught_%s_%s" % (rule, name))
        else:
            print("FAIL caught_%s_%s: the gate did not report it" % (rule, name))
            status = 1
    extra = [f for f in fails if (f[0], f[1]) not in PLANTED_EXPECT]
    for rule, name, msg in extra:
        print("  unexpected: " + msg)
    print("%s clean_kernels_pass" % ("FAIL" if extra else "PASS"))
    return 1 if extra else status


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--planted":
        sys.exit(run_planted(sys.argv[2]))
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(__doc__)
        sys.exit(2)
    sys.exit(run_gate(sys.argv[1:]))
