"""RenderText on a text-free environment gives the text environment's prompts and candidates; the
mask rule of compact states agrees with the environment's."""

import torch
from torchrl.envs import TransformedEnv

from torchrl_glam.envs.playground import PlaygroundTextEnv, RenderText, action_mask_from_held


def test_render_transform_on_the_env_matches_the_text_environment():
    text = PlaygroundTextEnv(num_envs=6, goals="simplified", seed=3)
    compact = TransformedEnv(PlaygroundTextEnv(num_envs=6, goals="simplified", seed=3, text=False), RenderText())
    a, b = text.reset(), compact.reset()
    for _ in range(4):
        assert list(a["prompt"]) == list(b["prompt"])
        assert [list(x) for x in a["actions"]] == [list(x) for x in b["actions"]]
        assert torch.equal(action_mask_from_held(b["held"], 5), b["action_mask"])
        action = torch.multinomial(a["action_mask"].float(), 1, generator=torch.Generator().manual_seed(0)).squeeze(-1)
        a, b = text.step(a.set("action", action))["next"], compact.step(b.set("action", action.clone()))["next"]
