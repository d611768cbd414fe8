"""Training: presets, the update, evaluation, checkpoints, logging."""
