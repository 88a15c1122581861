"""A training run's state carried between GPU leases (scripts/gpu/lease.sh, docs/gpu.md "Lease script").

A lease's machine starts bare and is given back after each call; what it sends back is at most
64 MiB, and what the next call carries is at most 64 MiB with the working tree. A checkpoint of
the shipped-width pair (5.9 M weights) holds 23 MB of fp32 weights and 47 MB of AdamW moments,
plus the same weights once more in the run's saved pair: too much. For the trip:

    shrink DIR   the latest checkpoint's AdamW moments stored in bf16 (AdamW loads them back as
                 fp32: each moment rounded by at most 0.4 %), weights kept in fp32; the run's
                 saved pair (*/model.safetensors) is left off the trip by lease.sh
    restore DIR  DIR/discriminator/ and DIR/generator/ written again from the checkpoint's fp32
                 weights and the configs that travelled, so `--init DIR --resume` continues

Within one machine (a call killed and rerun) `--resume` is exact; across leases only the moments'
rounding differs. Usage: python -m corrector.pretrain.lease {shrink,restore} DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from ..training import latest_checkpoint


def shrink(output: str | Path) -> Path | None:
    """Rewrite DIR's latest checkpoint with bf16 AdamW moments; returns it (None: no checkpoint)."""
    checkpoint = latest_checkpoint(output)
    if checkpoint is None:
        return None
    path = checkpoint / "state.pt"
    state = torch.load(path, map_location="cpu", weights_only=False)
    for moments in state["optimizer"]["state"].values():
        for key, value in moments.items():
            if key != "step" and torch.is_tensor(value) and value.is_floating_point():
                moments[key] = value.to(torch.bfloat16)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)
    return checkpoint


def restore(output: str | Path) -> bool:
    """Write DIR's pair (fp32) from its latest checkpoint, with the configs and tokenizer files
    in DIR; False when DIR has no checkpoint or no configs (the stage then starts from its INIT)."""
    from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

    from ..runtime.models import save_pair
    from .modeling import tie_embeddings

    output = Path(output)
    checkpoint = latest_checkpoint(output)
    configs = [output / half / "config.json" for half in ("discriminator", "generator")]
    if checkpoint is None or not all(c.exists() for c in configs):
        return False
    discriminator = ElectraForPreTraining(ElectraConfig.from_json_file(configs[0]))
    generator = ElectraForMaskedLM(ElectraConfig.from_json_file(configs[1]))
    weights = torch.load(checkpoint / "state.pt", map_location="cpu", weights_only=False)["model"]
    for prefix, half in (("discriminator.", discriminator), ("generator.", generator)):
        half.load_state_dict({k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)})
    ours = discriminator.electra.embeddings.word_embeddings.weight
    theirs = generator.electra.embeddings.word_embeddings.weight
    if ours.shape == theirs.shape and torch.equal(ours, theirs):
        tie_embeddings(discriminator, generator)  # as the run had them
    save_pair(discriminator.float(), generator.float(), str(output))
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corrector.pretrain.lease", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("shrink", "restore"))
    parser.add_argument("output", help="a `pretrain train` or `finetune train` output directory")
    args = parser.parse_args(argv)
    if args.action == "shrink":
        done = shrink(args.output)
        print(f"{args.output}: {'moments of ' + done.name + ' in bf16' if done else 'no checkpoint'}")
    else:
        done = restore(args.output)
        print(f"{args.output}: {'pair written from its checkpoint' if done else 'nothing to restore'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
