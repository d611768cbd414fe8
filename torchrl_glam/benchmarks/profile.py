"""Where the training loop's time goes, finer than the LLM's share: ``python -m
torchrl_glam.benchmarks.training --preset P`` prints it for any preset (the in-process mode).

:class:`LoopProfile` times, inside the timed loop (``loop_timer.py``), with hooks on the objects the
run builds (nothing of the package is edited):

* the environment's steps (TorchRL's ``step_and_maybe_reset``: the games, the resets, the render);
* the LLM's forward inside a loss (the update's forward: the observation with gradient, the next
  observation and any target) apart from the rest (acting);
* the backward passes;
* in the LLM, its encoder and its decoder (transformers' ``get_encoder`` / ``get_decoder``, where the
  model has them), and the attention products of the T5 path (``modules/attention.py``);
* the padding: the share of the encoder's (or a decoder-only model's) input tokens that are padding.

The greedy evaluations are not in the loop (``loop_timer.py`` pushes them past its end).
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict

#: what :meth:`LoopProfile.table` lists, in order: (key, label)
ROWS = (
    ("environment", "environment steps (games, resets, render)"),
    ("acting_forward", "LLM forward, acting"),
    ("update_forward", "LLM forward, update (loss)"),
    ("backward", "backward"),
    ("encoder", "  of the forwards: encoder"),
    ("decoder", "  of the forwards: decoder"),
    ("attention", "  of the forwards: attention products (T5 path)"),
)


class LoopProfile:
    """Seconds per part of the loop, accumulated by :meth:`patches` while it is active; tokens
    (real and padded) the LLM's input held."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.tokens = {"real": 0, "padded": 0}
        self.active = False  # set by the loop timer at the first environment step
        self._hooked: set[int] = set()

    def add(self, key: str, seconds: float) -> None:
        if self.active:
            self.seconds[key] += seconds

    @contextlib.contextmanager
    def patches(self):
        """Installs the timing hooks for the ``with`` block (and removes them after)."""
        import torch
        from torchrl.envs import EnvBase
        from torchrl.objectives import LossModule

        from torchrl_glam.modules import LLMScorer
        from torchrl_glam.modules import attention as attention_module

        saved = [
            (EnvBase, "step_and_maybe_reset", EnvBase.step_and_maybe_reset),
            (LossModule, "__call__", LossModule.__call__),
            (LLMScorer, "forward", LLMScorer.forward),
            (torch.Tensor, "backward", torch.Tensor.backward),
            (attention_module, "attend", attention_module.attend),
        ]
        in_loss = [0]
        profile = self

        def timed(key, function):
            def wrapper(*args, **kwargs):
                start = time.perf_counter()
                try:
                    return function(*args, **kwargs)
                finally:
                    profile.add(key, time.perf_counter() - start)

            return wrapper

        def loss_call(module, *args, **kwargs):
            in_loss[0] += 1
            try:
                return saved[1][2](module, *args, **kwargs)
            finally:
                in_loss[0] -= 1

        def scorer_forward(scorer, *args, **kwargs):
            profile._hook(scorer.model)
            start = time.perf_counter()
            try:
                return saved[2][2](scorer, *args, **kwargs)
            finally:
                profile.add("update_forward" if in_loss[0] else "acting_forward", time.perf_counter() - start)

        EnvBase.step_and_maybe_reset = timed("environment", saved[0][2])
        LossModule.__call__ = loss_call
        LLMScorer.forward = scorer_forward
        torch.Tensor.backward = timed("backward", saved[3][2])
        attention_module.attend = timed("attention", saved[4][2])
        try:
            yield self
        finally:
            for owner, name, value in saved:
                setattr(owner, name, value)

    def _hook(self, model) -> None:
        """Times the model's encoder and decoder, and counts its input's padding (once per model)."""
        if id(model) in self._hooked:
            return
        self._hooked.add(id(model))
        parts = []
        for key, getter in (("encoder", "get_encoder"), ("decoder", "get_decoder")):
            part = getattr(model, getter, lambda: None)()
            if part is not None and part is not model:
                parts.append((key, part))
        counted = parts[0][1] if parts else model  # the encoder, or the decoder-only model itself
        started: dict[int, float] = {}

        def pre(module, args, kwargs):
            started[id(module)] = time.perf_counter()
            if module is counted:
                mask = kwargs.get("attention_mask")
                if mask is not None and mask.dim() == 2 and self.active:
                    real = int(mask.sum())
                    self.tokens["real"] += real
                    self.tokens["padded"] += mask.numel() - real

        for key, part in parts:
            part.register_forward_pre_hook(pre, with_kwargs=True)
            part.register_forward_hook(
                lambda module, args, kwargs, out, key=key: self.add(key, time.perf_counter() - started[id(module)]),
                with_kwargs=True,
            )
        if not parts:
            model.register_forward_pre_hook(pre, with_kwargs=True)

    def table(self, loop_seconds: float) -> list[str]:
        """The profile as lines: seconds and share of the loop per part, then the padding."""
        lines = [
            f"  {label + ':':<52} {self.seconds[key]:7.1f} s  ({self.seconds[key] / loop_seconds:.0%})"
            for key, label in ROWS
        ]
        counted = sum(self.seconds[key] for key in ("environment", "acting_forward", "update_forward", "backward"))
        rest = loop_seconds - counted
        label = "everything else (replay, HER, optimisers, logs):"
        lines.append(f"  {label:<52} {rest:7.1f} s  ({rest / loop_seconds:.0%})")
        total = self.tokens["real"] + self.tokens["padded"]
        if total:
            lines.append(f"  padding: {self.tokens['padded'] / total:.0%} of the LLM input's {total} tokens")
        return lines
