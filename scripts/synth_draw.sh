# The shape of the synthetic fine-tuning draw, sourced by scripts/train_default_model.sh and
# scripts/gpu/lease.sh so that both draw the same kind of pairs: errors like the real pairs' (their
# substitutions, whole words typed with the same or a near pinyin, 的/地/得, similar shapes), 40 %
# error-free, and every reading pypinyin lists (--all-readings: the release pair's same-pinyin errors also
# went through readings no phrase uses, 有 wèi, 是 tí, though the corrector and the broad dev no longer do;
# the pair continued on the CPU on a draw without them fell from 0.5771 to 0.5640 held out, docs/history.md).
SYNTH_DRAW_FLAGS=(--fuzzy-pinyin --error-free 0.4 --kind-weights 0.2 0.05 0.1 0.05 0.3 0.25 0.05 --all-readings)
