"""The scorer's text inputs (str, nested lists, tensordict's NonTensorStack) checked against the action
mask's shape [*B, A] and flattened to lists."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor


def _as_python(texts):
    """NonTensorData/NonTensorStack/LinkedList -> plain str or nested lists."""
    if isinstance(texts, str):
        return texts
    if hasattr(texts, "tolist"):
        texts = texts.tolist()
    elif hasattr(texts, "data") and not isinstance(texts, Tensor):  # NonTensorData
        texts = texts.data
    if isinstance(texts, str):
        return texts
    if isinstance(texts, Sequence) or hasattr(texts, "__iter__"):
        return [_as_python(item) for item in texts]
    raise TypeError(f"expected text or (nested) lists of text, got {type(texts).__name__}")


def _flatten(texts, shape: tuple[int, ...], name: str) -> list[str]:
    if not shape:
        if not isinstance(texts, str):
            raise TypeError(f"{name}: expected a str at the innermost level, got {type(texts).__name__}")
        return [texts]
    if isinstance(texts, str) or len(texts) != shape[0]:
        got = "a single string" if isinstance(texts, str) else f"{len(texts)} entries"
        raise ValueError(
            f"{name} has {got} where the action mask's shape asks for {shape[0]} "
            f"(expected {name} of shape {list(shape)} from action_mask)"
        )
    return [text for item in texts for text in _flatten(item, shape[1:], name)]


def flatten_inputs(prompt, actions, action_mask: Tensor):
    """Check shapes against the action mask [*B, A]; return flat lists, mask [B', A], batch shape."""
    if not isinstance(action_mask, Tensor) or action_mask.ndim < 1:
        raise ValueError("action_mask must be a bool tensor of shape [*batch, num_candidates]")
    prompt, actions = _as_python(prompt), _as_python(actions)
    batch_shape, num_candidates = tuple(action_mask.shape[:-1]), action_mask.shape[-1]
    if num_candidates == 0:
        raise ValueError("there must be at least one candidate action")
    # Name the mismatch the caller most likely made: prompts vs candidates, then candidates vs mask.
    prompt_count = 1 if isinstance(prompt, str) else len(prompt)
    action_count = len(actions) if not isinstance(actions, str) else 0
    if batch_shape and prompt_count != action_count:
        raise ValueError(f"prompt batch of size {prompt_count} but candidate batch of size {action_count}")
    flat_actions = _flatten(actions, (*batch_shape, num_candidates), "actions")
    flat_prompts = _flatten(prompt, batch_shape, "prompt")
    candidates = [flat_actions[i : i + num_candidates] for i in range(0, len(flat_actions), num_candidates)]
    return flat_prompts, candidates, action_mask.reshape(-1, num_candidates).bool(), batch_shape
