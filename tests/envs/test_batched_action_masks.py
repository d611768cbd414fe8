"""Random actions of batched environments follow the mask through partial resets, and a batched
rollout never leaves the interpreter hanging."""

import subprocess
import sys
import textwrap

import torch
from torchrl.envs import SerialEnv, TransformedEnv

from torchrl_glam.envs import PartialResetActionMask
from torchrl_glam.envs.playground import PlaygroundTextEnv


def _make():
    return PlaygroundTextEnv(num_envs=4, goals="simplified", seed=0)


def test_random_actions_of_a_batched_env_stay_legal_through_partial_resets():
    torch.manual_seed(0)
    env = TransformedEnv(SerialEnv(2, _make), PartialResetActionMask())
    try:
        rollout = env.rollout(40, break_when_any_done=False)
    finally:
        env.close()
    assert rollout["next", "done"].any()  # sub-environments were reset mid-rollout
    legal = rollout["action_mask"].gather(-1, rollout["action"].unsqueeze(-1))
    assert legal.all()


def test_a_parallel_rollout_through_resets_ends_and_the_interpreter_exits(tmp_path):
    script = textwrap.dedent("""
        from torchrl.envs import ParallelEnv, TransformedEnv
        from torchrl_glam.envs import PartialResetActionMask
        from torchrl_glam.envs.playground import PlaygroundTextEnv

        def make():
            return PlaygroundTextEnv(num_envs=4, goals="simplified", seed=0)

        if __name__ == "__main__":
            env = TransformedEnv(ParallelEnv(2, make), PartialResetActionMask())
            try:
                rollout = env.rollout(30, break_when_any_done=False)
            finally:  # TorchRL's workers keep an interpreter alive until closed (or daemon=True)
                env.close()
            print("resets", int(rollout["next", "done"].sum()))
    """)
    (tmp_path / "rollout.py").write_text(script)  # a file: the workers import make() from it
    done = subprocess.run([sys.executable, "rollout.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split("resets")[-1]) > 0
