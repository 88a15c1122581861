"""What evaluation and calibration share: the metrics, running a system over texts and scoring
its results, and threshold sweeps. The evaluator (`python -m evaluate`) and the scorer's
calibration (finetune/calibrate.py) both build on these; the library never imports the evaluator."""
