#!/usr/bin/env bash
# GPU driver for the broad-data fine-tune (docs/gpu.md): several arms fine-tuned at once on one
# GPU, each on the same synthetic + real training pairs of `finetune broad` / `finetune synth`:
#   ARMS="release=data/model ltp=.gpu/ltp_init"   NAME=INIT pairs (INIT: a model dir with discriminator/ + generator/)
# Each arm: probe its step rate for PROBE steps (all arms at once, so the rate is the shared one),
# then STEPS = BUDGET x rate steps with warm-up 10 %, then its fp16 pair + logs packed into $OUT.
# Inputs under DATA (default .gpu, git-ignored, named in the device call's carry):
#   $DATA/ft/synth.tsv.xz  $DATA/ft/train/*.tsv (the broad training remainders)
# Env: BUDGET (s, default 330) GUARD (min) BATCH LR_<NAME> STEPS_<NAME> (skips the probe) REAL_TIMES
#      EXTRA_FT (every arm) EXTRA_FT_<NAME> (that arm's own flags, e.g. --freeze-discriminator) PROBE
#      SYNTH_<NAME> (that arm's synthetic sets, .tsv.xz, default $DATA/ft/synth.tsv.xz) REAL_TIMES_<NAME>
set -uo pipefail
DATA=${DATA:-.gpu}
source "$(dirname "$0")/common.sh"
export PYTHONUNBUFFERED=1 TQDM_MININTERVAL=${TQDM_MININTERVAL:-30}
PY=${PY:-python3}
ARMS=${ARMS:?}; BUDGET=${BUDGET:-330}; GUARD=${GUARD:-7}; BATCH=${BATCH:-256}; PROBE=${PROBE:-60}
REAL=("$DATA"/ft/train/*.tsv)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
LOGS=/tmp/broad-logs; mkdir -p "$LOGS"  # one tar back: at most 8 files return from a device call

synth_sets() {  # NAME: the arm's synthetic sets as they travelled (.tsv.xz)
  local var="SYNTH_$1"; echo "${!var:-$DATA/ft/synth.tsv.xz}"
}
unpacked() { echo "/tmp/$(basename "$1" .xz)"; }  # SET.xz: where it is unpacked

run_arm() {  # NAME INIT
  local name=$1 init=$2 lr_var="LR_$1" extra_var="EXTRA_FT_$1"; local lr=${!lr_var:-1e-4}
  local common=(--init "$init" --batch-size "$BATCH" --generator-input source --seed 42 --save-every 1000000
    ${EXTRA_FT:-} ${!extra_var:-})
  local steps_var="STEPS_$1" times_var="REAL_TIMES_$1"
  local steps=${!steps_var:-} train=() set
  for set in $(synth_sets "$name"); do train+=("$(unpacked "$set")"); done  # unpacked before the arms start
  for _ in $(seq "${!times_var:-${REAL_TIMES:-3}}"); do train+=("${REAL[@]}"); done
  if [ -z "$steps" ]; then
  rm -rf "/tmp/$name-probe"
  $PY -m corrector.finetune train "${common[@]}" --train "${REAL[@]}" --output "/tmp/$name-probe" --max-steps "$PROBE" \
    --warmup-steps 10 --log-every 20 > "$LOGS/$name-probe.log" 2>&1 || { tail -30 "$LOGS/$name-probe.log"; return 1; }
  steps=$($PY -c "
import json; r=[json.loads(l) for l in open('/tmp/$name-probe/metrics.jsonl')]
print(max($PROBE, int($BUDGET * (r[-1]['step'] - r[0]['step']) / max(r[-1]['time'] - r[0]['time'], 1e-6))))")
  fi
  echo "$name: lr $lr, $steps steps of $BATCH"
  $PY -m corrector.finetune train "${common[@]}" --train "${train[@]}" --output "/tmp/$name" --max-steps "$steps" \
    --warmup-steps $((steps / 10)) --lr "$lr" --log-every 50 --max-minutes "$GUARD" > "$LOGS/$name.log" 2>&1 \
    || { tail -30 "$LOGS/$name.log"; return 1; }
  show_metrics "/tmp/$name" gen_loss disc_loss det_precision det_recall gen_acc_errors gen_acc_other
  [ "${PACK:-1}" = 1 ] || return 0
  cp "/tmp/$name/metrics.jsonl" "$LOGS/$name-metrics.jsonl"
  pack_model "/tmp/$name" "$name" finetune_config.json metrics.jsonl
}

for arm in $ARMS; do
  for set in $(synth_sets "${arm%%=*}"); do unpack_xz "$set" "$(unpacked "$set")"; done
done
pids=()
for arm in $ARMS; do
  run_arm "${arm%%=*}" "${arm#*=}" & pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
tar cf "$OUT/logs.tar" -C "$LOGS" .
exit $status
