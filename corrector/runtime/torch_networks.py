"""The torch networks (transformers' or int8 copies of them: training, GPUs, bf16, `runtime="torch"`)
read through the calls the pipeline makes of the ONNX Runtime ones (onnx_networks.py): numpy in,
numpy out, so that the stages work on numpy arrays whatever runs the networks."""

from __future__ import annotations

import numpy as np
import torch

from .onnx_networks import OutputLayer


class TorchNetwork:
    """A torch network of a bundle, in its bundle's device and autocast."""

    def __init__(self, bundle, module: torch.nn.Module) -> None:
        self.bundle = bundle
        self.module = module
        self.config = module.config

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array)).to(self.bundle.device)


class TorchDiscriminator(TorchNetwork):
    @torch.inference_mode()
    def replaced_probability(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None) -> np.ndarray:
        mask = None if attention_mask is None else self.tensor(attention_mask)
        with self.bundle.autocast():
            logits = self.module(input_ids=self.tensor(input_ids), attention_mask=mask).logits
        if logits.dim() == 3:  # token-classification head: class 1 = wrong character
            return logits.float().softmax(-1)[..., 1].cpu().numpy()
        return torch.sigmoid(logits.float()).cpu().numpy()


class TorchGenerator(TorchNetwork):
    @property
    def reads_positions(self) -> bool:
        """Whether the generator is an ELECTRA masked LM whose head can be applied at chosen positions."""
        return hasattr(self.module, "electra") and hasattr(self.module, "generator_predictions")

    @torch.inference_mode()
    def encode(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None) -> torch.Tensor:
        mask = None if attention_mask is None else self.tensor(attention_mask)
        with self.bundle.autocast():
            return self.module.electra(input_ids=self.tensor(input_ids), attention_mask=mask).last_hidden_state

    @torch.inference_mode()
    def states(self, hidden: torch.Tensor, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        picked = hidden[self.tensor(rows), self.tensor(columns)]
        with self.bundle.autocast():
            return self.module.generator_predictions(picked).float().cpu().numpy()

    @torch.inference_mode()
    def logits(self, states: np.ndarray) -> np.ndarray:
        with self.bundle.autocast():
            return self.module.generator_lm_head(self.tensor(states)).float().cpu().numpy()

    @torch.inference_mode()
    def full_log_probs(self, input_ids: np.ndarray, attention_mask: np.ndarray, rows: np.ndarray,
                       columns: np.ndarray) -> np.ndarray:
        """Any other masked-LM class: the full head, then the (rows[n], columns[n]) positions' log-probs."""
        with self.bundle.autocast():
            logits = self.module(input_ids=self.tensor(input_ids), attention_mask=self.tensor(attention_mask)).logits
        return logits[self.tensor(rows), self.tensor(columns)].float().log_softmax(-1).cpu().numpy()

    def output_layer(self) -> OutputLayer:
        """The vocabulary projection: float (V, E) weight rows (an int8 head's dequantized) and (V,) bias."""
        from .int8 import Int8Linear

        head = self.module.generator_lm_head
        weight = head.dequantized_weight() if isinstance(head, Int8Linear) else head.weight.detach().float()
        bias = head.bias.detach().float() if head.bias is not None else torch.zeros(weight.shape[0])
        return OutputLayer(weight.cpu().numpy(), None, bias.cpu().numpy())
