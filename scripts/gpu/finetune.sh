#!/usr/bin/env bash
# GPU fine-tuning driver (see docs/gpu.md): INIT pair -> probe the step rate on the real sets (or
# take STEPS) -> fine-tune on synthetic + real pairs (real ones REAL_TIMES times) for BUDGET
# seconds -> pack the fp16 pair + dev.tsv + logs as tar pieces into $OUT/NAME.tar.part-*
#
# Inputs under DATA (default .gpu, git-ignored): $DATA/ft/synth.tsv.xz (`finetune synth`) and the
# six real training sets $DATA/ft/{train2013,train2014,train2015,law.train,med.train,odw.train}.tsv
# Env: INIT NAME BUDGET GUARD BATCH LR MODE REAL_TIMES STEPS EXTRA_FT (e.g. "--error-weight 10 --generator-from-discriminator")
#      SYNTH: another synthetic set under $DATA/ft (default synth.tsv.xz), e.g. one made with homophone words
#      SEED: data order and masking (default 42); the dev split stays seed 42's, the one the shipped model is calibrated on
set -uo pipefail
DATA=${DATA:-.gpu}
source "$(dirname "$0")/common.sh"
export PYTHONUNBUFFERED=1 TQDM_MININTERVAL=${TQDM_MININTERVAL:-30}
PY=${PY:-python3}
INIT=${INIT:?}; NAME=${NAME:?}; BUDGET=${BUDGET:-400}; GUARD=${GUARD:-7}; BATCH=${BATCH:-128}; LR=${LR:-2e-4}
MODE=${MODE:-source}; PROBE=${PROBE:-60}; PACK=${PACK:-1}
LOGS=${LOGS:-$OUT}; mkdir -p "$LOGS"
FT=$DATA/ft
REAL=($FT/train2013.tsv $FT/train2014.tsv $FT/train2015.tsv $FT/law.train.tsv $FT/med.train.tsv $FT/odw.train.tsv)
SYNTH=${SYNTH:-synth.tsv.xz}; PAIRS=/tmp/${SYNTH%.xz}
unpack_xz "$FT/$SYNTH" "$PAIRS"
COMMON=(--init "$INIT" --dev-from "${REAL[@]}" --dev-share 0.08 --batch-size "$BATCH" --generator-input "$MODE" --seed "${SEED:-42}" --dev-seed 42 --save-every 1000000)
if [ -z "${STEPS:-}" ]; then
rm -rf /tmp/$NAME-probe
$PY -m corrector.finetune train "${COMMON[@]}" --train "${REAL[@]}" --output /tmp/$NAME-probe --max-steps "$PROBE" --warmup-steps 10 --log-every 20 \
  > "$LOGS/$NAME-probe.log" 2>&1 || { tail -30 "$LOGS/$NAME-probe.log"; exit 1; }
STEPS=$($PY -c "
import json; r=[json.loads(l) for l in open('/tmp/$NAME-probe/metrics.jsonl')]
secs = r[-1]['time'] - r[0]['time']; steps = r[-1]['step'] - r[0]['step']
print(int($BUDGET * steps / max(secs, 1e-6)))")
fi
echo "$NAME: $STEPS steps"
$PY -m corrector.finetune train "${COMMON[@]}" --train "$PAIRS" $(for _ in $(seq ${REAL_TIMES:-2}); do echo "${REAL[@]}"; done) --output /tmp/$NAME --max-steps "$STEPS" \
  --warmup-steps $((STEPS / 10)) --lr "$LR" --log-every 50 --max-minutes "$GUARD" ${EXTRA_FT:-} > "$LOGS/$NAME.log" 2>&1 || { tail -30 "$LOGS/$NAME.log"; exit 1; }
show_metrics /tmp/$NAME gen_loss disc_loss det_precision det_recall gen_acc_errors gen_acc_other
[ "$PACK" = 1 ] || exit 0
pack_model /tmp/$NAME "$NAME" dev.tsv finetune_config.json metrics.jsonl
