"""offload: run TensorFlow Lite / LiteRT models in Python, with accelerator delegates."""

from offload._loader import load_model

__all__ = ["load_model"]
