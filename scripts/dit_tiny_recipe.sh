# The dit-tiny recipe of `make dit` on the CPU build (scripts/run_dit.sh), sourced:
# moving-digit clips of 8 frames of 16x16 grey, patch 2x2x2 (256 tokens), D=64, 4 blocks,
# 5000 steps of 16 clips (about 120 ms each with the vectorised GELU). 2000 steps left the
# sampled digits nameable 0.31 of the time by scripts/dit_digits.py, 5000 steps 0.81
# (docs/results/cpu_dit_digits.md).
DIT_TINY=(--model dit-tiny --batch 16 --steps 5000 --lr 2e-3 --warmup 50 --val-every 500 --val-clips 96
          --sample-every 2500 --sample-steps 40 --cfg-scale 2 --log-every 100 --ckpt-every 2500)
