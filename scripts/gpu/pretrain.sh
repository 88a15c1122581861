#!/usr/bin/env bash
# GPU pre-training driver, run on a lent GPU machine that has no shared data, only what travels
# with the checkout (see docs/gpu.md): probe the step rate, size the linear schedule to a time
# budget, pre-train, pack the pair as fp16 tar pieces (<= 15 MB each) into $OUT.
#
# Inputs under DATA (default .gpu, git-ignored; never commit shared data):
#   $DATA/tokens.npy.xz  the token cache of `pretrain train` (OUTPUT/cache/tokens-*.npy), xz-compressed
#   $DATA/vocab/         the tokenizer it was made with (`pretrain vocab`)
# Env: PRESET GEN BATCH LR BUDGET (s) GUARD (min) EXTRA (more `pretrain train` flags, e.g. --init DIR)
set -uo pipefail
DATA=${DATA:-.gpu}
source "$(dirname "$0")/common.sh"
export PYTHONUNBUFFERED=1 TQDM_MININTERVAL=${TQDM_MININTERVAL:-30}
PY=${PY:-python3}
PRESET=${PRESET:-small}; GEN=${GEN:-0.5}; BATCH=${BATCH:-256}; LR=${LR:-7e-4}
BUDGET=${BUDGET:-480}      # seconds of training after the probe
GUARD=${GUARD:-8.5}        # --max-minutes safety stop
PROBE=${PROBE:-60}
OUTDIR=${OUTDIR:-/tmp/pt}
LOGS=${LOGS:-$OUT}; mkdir -p "$LOGS"
nvidia-smi -L 2>/dev/null
$PY -c "import torch, transformers, accelerate; print('torch', torch.__version__, 'tf', transformers.__version__, 'acc', accelerate.__version__, 'cuda', torch.cuda.is_available())"
unpack_xz "$DATA/tokens.npy.xz" /tmp/tokens.npy
COMMON=(--corpus /tmp/tokens.npy --vocab $DATA/vocab --preset "$PRESET" --generator-size "$GEN" --batch-size "$BATCH" --dropout 0.1)
rm -rf /tmp/probe
$PY -m corrector.pretrain train "${COMMON[@]}" --output /tmp/probe --max-steps "$PROBE" --warmup-steps 10 --log-every 20 --save-every 100000 > "$LOGS/probe.log" 2>&1 || { tail -30 "$LOGS/probe.log"; exit 1; }
RATE=$($PY -c "import json; r=[json.loads(l) for l in open('/tmp/probe/metrics.jsonl')]; print(max(x['tokens_per_s'] for x in (r[1:] or r)))")
STEPS=$($PY -c "print(int($RATE * $BUDGET / ($BATCH * 128)))")
echo "probe: $RATE tokens/s -> $STEPS steps in $BUDGET s"
$PY -m corrector.pretrain train "${COMMON[@]}" --output "$OUTDIR" --max-steps "$STEPS" --warmup-steps $((STEPS / 20)) --lr "$LR" \
  --log-every 50 --save-every 1000000 --max-minutes "$GUARD" ${EXTRA:-} > "$LOGS/pretrain.log" 2>&1 || { tail -30 "$LOGS/pretrain.log"; exit 1; }
tail -3 "$LOGS/pretrain.log"
cp "$OUTDIR/metrics.jsonl" "$LOGS/metrics.jsonl"
show_metrics "$OUTDIR" mlm_loss disc_loss gen_acc disc_precision disc_recall tokens_per_s
[ "${PACK:-1}" = 1 ] || exit 0
pack_model "$OUTDIR" pretrained pretrain_config.json
ls -la "$OUT"
