# make tinystories' recipe on a machine without a GPU (sourced by scripts/run_tinystories.sh):
# stories800K (stories260K's 512-piece tokenizer, dim 128, 4 layers, 4 heads, 2 kv heads; 0.79M
# parameters) on the shards of make data512, sized so that 2 CPU cores finish make tinystories
# in under 10 minutes. Chosen against stories260K and wider or larger-batch shapes on the same
# wall-clock budget: docs/results/cpu_tinystories_800K.md.
SP512=data/tinystories_sp512
TINYSTORIES_CPU_DATA=(--train-data "$SP512/tinystories_train_*.bin" --val-data "$SP512/tinystories_val_*.bin"
                      --tokenizer "$SP512/tok512.bin")
TINYSTORIES_CPU_OPT=(--model stories800K --batch 16 --seq 256 --steps ${STEPS:-2200} --lr 4e-3 --warmup 50
                     --min-lr-frac 0.1 --weight-decay 0.1 --grad-clip 1.0)
