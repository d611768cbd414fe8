"""SAC-GLAM + HER with SmolLM2-135M + LoRA on CPU: a few updates change the adapters (issue 14)."""

import pytest
import torch
from config_names import study_preset

from torchrl_glam.algorithms.sac_glam.build import make_loss
from torchrl_glam.algorithms.sac_glam.config import make_config
from torchrl_glam.algorithms.sac_glam.update import SACGLAMUpdater
from torchrl_glam.data.episodes import EpisodeAssembler
from torchrl_glam.data.her import relabel_episodes
from torchrl_glam.data.nstep import nstep_transitions
from torchrl_glam.data.replay import GoalReplay
from torchrl_glam.envs import get_environment
from torchrl_glam.training.factories import make_env

PLAYGROUND = get_environment("playground")  # the environment object the library takes


@pytest.mark.slow
def test_smollm2_lora_updates_on_cpu(require_smollm2):
    cfg = make_config(
        study_preset("smollm2", "smollm2_her_cpu"),
        {"batch_size": 8, "warmup_updates": 0, "critic_width": 32, "num_envs": 8},
    )
    assert cfg.model.dtype == "float32" and cfg.model.device == "cpu" and cfg.model.lora_rank == 16
    env = make_env(cfg)
    assembler, replay = (
        EpisodeAssembler(cfg.env.num_envs, env.max_steps, environment=PLAYGROUND),
        GoalReplay(capacity=1_000, strategy="ratio", environment=PLAYGROUND),
    )
    td, generator = env.reset(), torch.Generator().manual_seed(0)
    while len(replay) < 32:  # random play: the replay only needs transitions
        td.set("action", torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1))
        step, td = env.step_and_maybe_reset(td)
        episodes = assembler.add(step)
        if episodes is not None:
            replay.extend(
                nstep_transitions(
                    torch.cat([episodes, relabel_episodes(episodes)]), 3, cfg.algorithm.gamma, environment=PLAYGROUND
                )
            )
    torch.manual_seed(0)
    agent = make_loss(cfg, num_actions=5)
    lora = {name: p.detach().clone() for name, p in agent.scorer.named_parameters() if "lora_" in name}
    assert lora and all(p.requires_grad for n, p in agent.scorer.named_parameters() if "lora_" in n)
    assert {name.split(".lora_")[0].rsplit(".", 1)[-1] for name in lora} == {"q_proj", "v_proj"}
    updater = SACGLAMUpdater(agent, replay, cfg)
    for _ in range(3):
        metrics = updater.step()
        assert all(torch.isfinite(torch.tensor(metrics[k])) for k in ("loss_qvalue", "loss_actor", "loss_alpha"))
    after = dict(agent.scorer.named_parameters())
    assert any(not torch.equal(lora[name], after[name].detach()) for name in lora)
