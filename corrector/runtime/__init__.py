"""How the networks run: model loading, int8 layers and encoders (torch / ONNX Runtime), batch
threads, correction processes, the allocator. Importing this package costs nothing (no torch)."""

# What runs the int8 networks' encoders (`Corrector(runtime=...)`, `--runtime` of the CLI, service
# and evaluator): "onnxruntime" (onnx_networks.py, no torch), "torch" (lean_encoder.py), "auto" = ORT where
# installed. Here, apart from the modules that import torch, so that argument parsers need not.
RUNTIMES = ("auto", "onnxruntime", "torch")
