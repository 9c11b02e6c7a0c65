# The dit-tiny recipe of `make dit` on the CPU build (scripts/run_dit.sh), sourced:
# moving-digit clips of 8 frames of 16x16 grey, patch 2x2x2 (256 tokens), D=64, 4 blocks,
# 2000 steps of 16 clips; 10 min 40 s on 2 quiet cores, measured end to end
# (docs/results/cpu_dit_tiny.md).
DIT_TINY=(--model dit-tiny --batch 16 --steps 2000 --lr 2e-3 --warmup 50 --val-every 250 --val-clips 96
          --sample-every 1000 --sample-steps 40 --cfg-scale 2 --log-every 50 --ckpt-every 1000)
