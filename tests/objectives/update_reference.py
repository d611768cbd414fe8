"""One SAC-GLAM update of ``cpu_babyai`` (two past observations in the prompt: 60-240 tokens, the
long prompts the scorer's length groups cut) on a batch of seeded random play: its loss terms and
the LLM's gradients of the critic's and the actor's losses, taken apart as the updater takes them
(``critic_llm_lr``).

    PYTHONPATH=<a checkout> python tests/objectives/update_reference.py OUT.safetensors

writes them for the checkout's code; ``references/update_b96b62f.safetensors`` was written by
b96b62f, before the scorer's length groups (issue 84), and
``test_update_reference.py`` holds the current code to it.
"""

from __future__ import annotations

import sys

import torch
from tensordict import TensorDict

#: loss terms compared (td_error is per transition)
LOSS_TERMS = ("loss_qvalue", "loss_actor", "loss_alpha", "loss_success", "td_error")


def make_loss_and_env():
    from torchrl_glam.algorithms.sac_glam.build import make_loss, num_actions
    from torchrl_glam.algorithms.sac_glam.config import make_config
    from torchrl_glam.training.factories import make_env

    cfg = make_config("cpu_babyai", {"model.name": "offline:tiny-t5"})
    env = make_env(cfg, num_envs=16)
    torch.manual_seed(0)
    return make_loss(cfg, num_actions=num_actions(cfg, env)), env


def random_play(env) -> TensorDict:
    """128 compact transitions of seeded random play (the reference stores them: a change of
    minigrid's levels must not change the batch)."""
    env.set_seed(0)
    td, steps, gen = env.reset(), [], torch.Generator().manual_seed(0)
    for _ in range(12):  # long enough for two past observations in most prompts
        td.set("action", torch.multinomial(td["action_mask"].float(), 1, generator=gen).squeeze(-1))
        step, td = env.step_and_maybe_reset(td)
        steps.append(step)
    return torch.stack(steps[4:], 1).reshape(-1).exclude("achieved_goal_ids", ("next", "achieved_goal_ids"))


def one_update(loss, batch: TensorDict) -> dict[str, torch.Tensor]:
    """The loss terms, and the LLM's gradients of the critic's and of the actor's loss, by name."""
    out = loss(batch)
    names = [name for name, p in loss.scorer.named_parameters() if p.requires_grad]
    parameters = loss.llm_parameters()
    critic = torch.autograd.grad(out["loss_qvalue"] + out["loss_success"], parameters, retain_graph=True)
    actor = torch.autograd.grad(out["loss_actor"] + out["loss_alpha"], parameters)
    result = {term: out[term].detach().reshape(-1) for term in LOSS_TERMS}
    result.update({f"critic_grad.{name}": g for name, g in zip(names, critic)})
    result.update({f"actor_grad.{name}": g for name, g in zip(names, actor)})
    return result


if __name__ == "__main__":
    from safetensors.torch import save_file

    torch.set_num_threads(1)
    loss, env = make_loss_and_env()
    batch = random_play(env)
    tensors = {f"batch.{key}": value for key, value in batch.flatten_keys(".").items()}
    tensors.update(one_update(loss, batch))
    save_file({k: v.contiguous() for k, v in tensors.items()}, sys.argv[1])
