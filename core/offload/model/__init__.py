"""Build .tflite models from Python (``offload.model.builder``)."""

from offload.model.builder import ModelBuilder, SubgraphBuilder, option_names, options_type_for

__all__ = ["ModelBuilder", "SubgraphBuilder", "option_names", "options_type_for"]
