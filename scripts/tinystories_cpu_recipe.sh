# make tinystories' recipe on a machine without a GPU (sourced by scripts/run_tinystories.sh):
# stories800K (stories260K's 512-piece tokenizer, dim 128, 4 layers, 4 heads, 2 kv heads; 0.79M
# parameters) on the shards of make data512, with stories260K's data and optimizer settings
# (scripts/stories260K_recipe.sh), sized so that 2 CPU cores finish make tinystories in under 10
# minutes. Chosen against stories260K and wider or larger-batch shapes on the same wall-clock
# budget: docs/results/cpu_tinystories_800K.md.
source "$(dirname "${BASH_SOURCE[0]}")/stories260K_recipe.sh"
TINYSTORIES_CPU_DATA=("${STORIES260K_DATA[@]}")
TINYSTORIES_CPU_OPT=(--model stories800K --batch 16 --seq 256 --steps ${STEPS:-2200} "${SP512_HPARAMS[@]}")
