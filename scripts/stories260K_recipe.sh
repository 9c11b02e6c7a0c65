# make compare's recipe (sourced by scripts/run_compare.sh), the CPU main job's until stories800K
# (scripts/tinystories_cpu_recipe.sh, which takes its data and optimizer settings from here)
# replaced it: llama2.c's stories260K shape (dim 64, 5 layers, 8 heads, 4 kv heads, vocab 512) on
# the 512-piece tokenizer trained on the shared sample (make data512).
# docs/results/cpu_tinystories_260K.md has its 1000-step curve.
SP512=data/tinystories_sp512
STORIES260K_DATA=(--train-data "$SP512/tinystories_train_*.bin" --val-data "$SP512/tinystories_val_*.bin"
                  --tokenizer "$SP512/tok512.bin")
SP512_HPARAMS=(--lr 4e-3 --warmup 50 --min-lr-frac 0.1 --weight-decay 0.1 --grad-clip 1.0)
STORIES260K_OPT=(--model stories260K --batch 32 --seq 256 --steps ${STEPS:-1000} "${SP512_HPARAMS[@]}")
