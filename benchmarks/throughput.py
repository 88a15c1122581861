"""Throughput and latency of the corrector (and of the classic baseline) on SIGHAN-length text.

    python benchmarks/throughput.py --limit 200            # quick, while the machine is shared
    python benchmarks/throughput.py --threads 2            # all 1,100 SIGHAN-15 test sentences

Measures, in one run and one process:
* Corrector, batch size 1: one `correct` call per sentence -> sentences/s and p50/p90 latency;
* Corrector, batch size 32 (and any other --batch-sizes): `correct_batch` over all sentences;
* ClassicCorrector (pycorrector's former algorithm): one call per sentence, on --classic-limit
  sentences (it is slow), -> sentences/s and p50 latency;
then prints a table and writes JSON (--output).

Model: --model, else $CORRECTOR_MODEL / data/model when present, else a random model of the
shipped size (PRESETS["mini"], 6 x 256, vocabulary of the ~6,300 common characters). Random
weights would flag about half of all characters, so for a random model the detection threshold is
set to flag --flag-rate of the characters (default 5%, roughly a trained model on SIGHAN) for
both systems, and the corrector's edit threshold is 0 so every flagged position goes through
candidate scoring: the work per sentence is then an upper bound, not a
best case. Final figures come with the trained model.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from corrector.baselines.classic import ClassicCorrector  # noqa: E402
from corrector.detection import detect  # noqa: E402
from corrector.pipeline import Corrector, CorrectorConfig  # noqa: E402
from corrector.resources.confusion import ConfusionSet  # noqa: E402
from corrector.runtime.models import default_model_path, load_model  # noqa: E402
from corrector.runtime.passes import make_batch  # noqa: E402
from corrector.text.tokenization import is_cjk  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_data = os.environ.get("CSC_SHARED_DATA", str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--data", default=default_data, help="shared data directory (default: $CSC_SHARED_DATA or ../shared/data)")
    parser.add_argument("--file", default="csc/sighan/test2015.tsv", help="TSV under --data: label, source, target")
    parser.add_argument("--model", help="model directory (default: $CORRECTOR_MODEL or data/model, else random)")
    parser.add_argument("--limit", type=int, default=None, help="use the first N sentences (default: all)")
    parser.add_argument("--classic-limit", type=int, default=100, help="sentences for the classic baseline")
    parser.add_argument("--batch-sizes", default="32", help="comma-separated batch sizes besides 1")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--fp32", action="store_true",
                        help="also time the corrector with fp32 networks (the default corrector runs int8 on CPU)")
    parser.add_argument("--bf16", action="store_true", help="also time the corrector with bf16 autocast networks")
    parser.add_argument("--torch-int8", action="store_true",
                        help="also time the corrector with its int8 encoders in torch instead of ONNX Runtime")
    parser.add_argument("--repeat", type=int, default=1, help="batched runs per system; the median is reported")
    parser.add_argument("--one-worker", action="store_true",
                        help="also time the corrector with its batches in the calling thread (workers=1, all torch threads)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="edit threshold (default: the model's; 0 for the random model: every flagged position "
                             "is scored, an upper bound on the work)")
    parser.add_argument("--flag-rate", type=float, default=0.05, help="random model only: share of characters flagged")
    parser.add_argument("--output", default=str(ROOT / "runs" / "benchmarks" / "throughput.json"))
    args = parser.parse_args()
    if args.classic_limit < 1:  # the speed-up is relative to the classic baseline's rate
        parser.error(f"--classic-limit must be at least 1 (the baseline the speed-up is measured against), got {args.classic_limit}")
    return args


def read_sources(path: Path, limit: int | None) -> list[str]:
    sources = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 2:
                sources.append(fields[1])
    return sources[:limit] if limit else sources


def random_mini_model(directory: Path) -> Path:
    """PRESETS["mini"] with random weights over the common characters: the shipped model's size."""
    import importlib.util

    from corrector.pretrain.modeling import PRESETS, build_pair
    from corrector.pretrain.vocab import build_vocab, write_tokenizer
    from corrector.runtime.models import save_pair

    spec = importlib.util.find_spec("char_similar")
    table = Path(list(spec.submodule_search_locations)[0]) / "data" / "char_frequency.dict"
    frequency = json.loads(table.read_text(encoding="utf-8"))
    counts = Counter({c: max(2, int(10 ** f)) for c, f in frequency.items() if f > 0 and is_cjk(c)})
    tokens = build_vocab(counts, min_count=2)
    write_tokenizer(tokens, directory)
    torch.manual_seed(0)
    discriminator, generator = build_pair(PRESETS["mini"], vocab_size=len(tokens))
    save_pair(discriminator, generator, str(directory))
    return directory


def flag_threshold(bundle, texts: list[str], rate: float) -> float:
    """The discriminator probability above which `rate` of the CJK characters lie."""
    probs = []
    for first in range(0, len(texts), 64):
        encodings = [bundle.tokenizer.encode(t) for t in texts[first:first + 64]]
        batch = make_batch([e.ids for e in encodings], bundle)
        p = detect(bundle, batch)
        for row, (enc, text) in enumerate(zip(encodings, texts[first:first + 64], strict=True)):
            probs.extend(float(p[row, i]) for i, o in enumerate(enc.offsets) if is_cjk(text[o]))
    return float(torch.tensor(probs).quantile(1 - rate))


class PassCounter:
    """Counts forward passes and real (unpadded) tokens through a system's two networks.

    A machine-independent view of the work: the benchmark machine is often shared.
    """

    def __init__(self, system) -> None:
        self.counts = {"discriminator": [0, 0], "generator": [0, 0]}
        self.lock = threading.Lock()  # batches run on two worker threads: no lost increments
        self.restore = []
        for name in self.counts:
            network = getattr(system.bundle, name)
            if hasattr(network, "encode") and not hasattr(network, "electra"):  # ONNX Runtime (onnx_networks.py)
                network.encode = self._counted(name, network.encode)
                self.restore.append(lambda network=network: delattr(network, "encode"))
            else:  # a torch network: its `electra` encoder runs once per pass
                handle = network.electra.register_forward_pre_hook(self._hook(name), with_kwargs=True)
                self.restore.append(handle.remove)

    def _count(self, name: str, mask) -> None:
        tokens = int(mask.sum()) if mask is not None else 0
        with self.lock:
            self.counts[name][0] += 1
            self.counts[name][1] += tokens

    def _counted(self, name: str, encode):
        def counted(input_ids, attention_mask=None):
            self._count(name, attention_mask)
            return encode(input_ids, attention_mask)
        return counted

    def _hook(self, name):
        def hook(module, args, kwargs):
            self._count(name, kwargs.get("attention_mask"))
        return hook

    def per_sentence(self, sentences: int) -> dict:
        for restore in self.restore:
            restore()
        return {
            f"{name}_{what}_per_sentence": round(values[i] / sentences, 3)
            for name, values in self.counts.items()
            for i, what in enumerate(("passes", "tokens"))
        }


def time_single(system, texts: list[str]) -> dict:
    system.correct(texts[0])  # warm-up: lazy tables, allocator
    latencies, cpu, edits = [], [], 0
    counter = PassCounter(system)
    for text in texts:
        start, start_cpu = time.perf_counter(), time.process_time()
        result = system.correct(text)
        latencies.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        edits += len(result.edits)
    latencies.sort()
    return counter.per_sentence(len(texts)) | {
        "sentences": len(texts),
        "seconds": sum(latencies),
        "sentences_per_s": len(texts) / sum(latencies),
        "p50_ms": 1000 * statistics.median(latencies),
        "p90_ms": 1000 * latencies[int(0.9 * (len(latencies) - 1))],
        "cpu_seconds": sum(cpu),
        "sentences_per_cpu_s": len(texts) / sum(cpu),
        "p50_cpu_ms": 1000 * statistics.median(cpu),
        "edits": edits,
    }


def time_batched(system, texts: list[str], batch_size: int, repeat: int = 1) -> dict:
    """`correct_batch` over all texts, `repeat` times: the median run's figures (all runs' rates too)."""
    system.correct_batch(texts[:batch_size], batch_size=batch_size)  # warm-up
    runs = []
    for _ in range(max(1, repeat)):
        counter = PassCounter(system)
        start, start_cpu = time.perf_counter(), time.process_time()
        results = system.correct_batch(texts, batch_size=batch_size)
        seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        runs.append(counter.per_sentence(len(texts)) | {
            "sentences": len(texts),
            "seconds": seconds,
            "sentences_per_s": len(texts) / seconds,
            "cpu_seconds": cpu,
            "sentences_per_cpu_s": len(texts) / cpu,
            "edits": sum(len(r.edits) for r in results),
        })
    runs.sort(key=lambda run: run["sentences_per_s"])
    return runs[len(runs) // 2] | {"runs_sentences_per_s": [round(run["sentences_per_s"], 1) for run in runs]}


def main() -> int:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    data_file = Path(args.data) / args.file
    if not data_file.exists():
        print(f"error: {data_file} not found (use --data or set CSC_SHARED_DATA)", file=sys.stderr)
        return 2
    texts = read_sources(data_file, args.limit)

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model_path = args.model or default_model_path()
    random_model = not args.model and not Path(model_path).exists()
    tmp = tempfile.TemporaryDirectory()
    if random_model:
        model_path = str(random_mini_model(Path(tmp.name)))
    bundle = load_model(model_path, device=args.device)
    confusion = ConfusionSet.build()

    detection_threshold, threshold = None, args.threshold
    if random_model:
        detection_threshold = flag_threshold(bundle, texts, args.flag_rate)
        threshold = 0.0 if args.threshold is None else args.threshold
    corrector = Corrector(bundle, threshold=threshold, detection_threshold=detection_threshold, confusion=confusion)
    # The baseline runs the corrector's own networks (int8 on CPU by default): the comparison is
    # between the algorithms, not the precisions.
    classic = ClassicCorrector(
        corrector.bundle, confusion=confusion,
        detection_threshold=detection_threshold if detection_threshold is not None else 0.5,
    )

    report = {
        "model": "random PRESETS['mini'] (6x256), ~6.3k char vocab" if random_model else model_path,
        "random_model": random_model,
        "data": str(data_file),
        "mean_chars": statistics.mean(len(t) for t in texts),
        "torch_threads": torch.get_num_threads(),
        "device": args.device,
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average_before": os.getloadavg(),
        "detection_threshold": corrector.scorer.detection_threshold,
        "threshold": corrector.threshold,
        "corrector": {"batch_1": time_single(corrector, texts)},
        "precision": {"corrector": corrector.precision, "classic": corrector.precision},
        "runtime": {"corrector": corrector.runtime, "classic": corrector.runtime},
    }
    sizes = [int(s) for s in args.batch_sizes.split(",") if s.strip()]
    for size in sizes:
        report["corrector"][f"batch_{size}"] = time_batched(corrector, texts, size, args.repeat)
    systems = ["corrector"]
    variants = [("corrector-fp32", {"quantize": False})] if args.fp32 else []
    variants += [("corrector-bf16", {"bf16": True})] if args.bf16 else []
    variants += [("corrector-torch", {"runtime": "torch"})] if args.torch_int8 else []
    variants += [("corrector-1worker", {"config": CorrectorConfig(workers=1)})] if args.one_worker else []
    for system, options in variants:
        fast = Corrector(bundle, threshold=threshold, detection_threshold=detection_threshold, confusion=confusion,
                         **options)
        report[system] = {"batch_1": time_single(fast, texts)}
        report["precision"][system] = fast.precision
        report["runtime"][system] = fast.runtime
        for size in sizes:
            report[system][f"batch_{size}"] = time_batched(fast, texts, size, args.repeat)
        systems.append(system)
    report["classic"] = {"batch_1": time_single(classic, texts[: args.classic_limit])}
    systems.append("classic")
    report["load_average_after"] = os.getloadavg()
    classic_rate = report["classic"]["batch_1"]["sentences_per_s"]
    classic_cpu_rate = report["classic"]["batch_1"]["sentences_per_cpu_s"]
    report["speedup_vs_classic"] = {
        system: max(v["sentences_per_s"] for v in report[system].values()) / classic_rate for system in systems[:-1]
    }
    report["cpu_speedup_vs_classic"] = {
        system: max(v["sentences_per_cpu_s"] for v in report[system].values()) / classic_cpu_rate
        for system in systems[:-1]
    }

    print(f"model: {report['model']}   sentences: {len(texts)} (mean {report['mean_chars']:.1f} chars)   "
          f"torch threads: {report['torch_threads']}   load avg: {report['load_average_before'][0]:.1f}")
    print("networks: " + ", ".join(f"{system} {precision} ({report['runtime'][system]})"
                                   for system, precision in report["precision"].items()))
    nan = float("nan")
    print(f"{'system':<17} {'batch':>5} {'sentences':>9} {'sent/s':>8} {'p50 ms':>7} {'p90 ms':>7} "
          f"{'sent/cpu-s':>10} {'p50 cpu-ms':>10} {'edits':>6} {'disc passes':>11} {'disc tokens':>11} {'gen passes':>10}")
    for system in systems:
        for name, row in report[system].items():
            print(f"{system:<17} {name.split('_')[1]:>5} {row['sentences']:>9} {row['sentences_per_s']:>8.1f} "
                  f"{row.get('p50_ms', nan):>7.1f} {row.get('p90_ms', nan):>7.1f} "
                  f"{row['sentences_per_cpu_s']:>10.1f} {row.get('p50_cpu_ms', nan):>10.1f} {row['edits']:>6}"
                  f" {row['discriminator_passes_per_sentence']:>11.2f} {row['discriminator_tokens_per_sentence']:>11.1f}"
                  f" {row['generator_passes_per_sentence']:>10.2f}")
    print("(cpu: process CPU time, a fairer figure on a shared machine with --threads 1; "
          "passes and tokens: per sentence, padding excluded)")
    for system, speedup in report["speedup_vs_classic"].items():
        print(f"speed-up of {system} (best batch size) over classic: {speedup:.1f}x wall, "
              f"{report['cpu_speedup_vs_classic'][system]:.1f}x CPU time")

    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {output}")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
