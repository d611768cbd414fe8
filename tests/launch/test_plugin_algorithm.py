"""An algorithm of another package (issue 86): declared in the entry-point group
``torchrl_glam.algorithms``, it is launched with ``--local`` as the library's are, with nothing
edited in torchrl_glam; a declaration that does not point at a training script, or that claims a
library algorithm's name, is refused in one line."""

import json
import sys
import textwrap

import pytest

from tests.packages.distributions import write_distribution
from torchrl_glam.algorithms import algorithm_names, get_script
from torchrl_glam.launch.launcher import main as launch_main

DIST, VERSION = "toy-algorithm", "1.0"

#: the toy algorithm of docs/site/your_algorithm.md as a package: config with a preset, a training
#: script with main(argv), and the TrainingScript its entry point names
SOURCES = {
    "toy_algorithm/__init__.py": "",
    "toy_algorithm/config.py": """
        from dataclasses import dataclass, field
        from pathlib import Path
        from typing import ClassVar

        from torchrl_glam.training.config import GLAMConfig, Presets, setting


        @dataclass
        class ToyAlgorithmConfig:
            policy_lr: float = setting(0.1, "the policy's SGD step")
            width: int = setting(4, "the policy's inputs")


        @dataclass
        class ToyConfig(GLAMConfig):
            ALGORITHM: ClassVar[str] = "toy"
            LEARNING_RATE_FIELDS: ClassVar[tuple[str, ...]] = ("algorithm.policy_lr",)

            algorithm: ToyAlgorithmConfig = field(default_factory=ToyAlgorithmConfig)


        TOY_PRESETS = Presets(Path(__file__).with_name("presets"))
    """,
    "toy_algorithm/presets/smoke.yaml": """
        env:
          goals: simplified
          num_envs: 4
          max_steps: 4
        run:
          total_steps: 32
          eval_every: 16
          eval_episodes: 4
          eval_sets: [train]
          log_every: 8
          checkpoint_every: 16
    """,
    "toy_algorithm/train.py": '''
        """The toy algorithm: a linear layer stepped by SGD, acting with the first legal candidate."""
        import sys

        from toy_algorithm.config import TOY_PRESETS, ToyConfig
        from torchrl_glam.training.cli import command_line, parse_command_line


        def main(argv=None):
            cfg, options = parse_command_line(ToyConfig, TOY_PRESETS, argv, __doc__)
            import torch

            from torchrl_glam.training.run import TrainingRun

            run = TrainingRun(cfg, options)
            policy = torch.nn.Linear(cfg.algorithm.width, 1)
            optimizer = torch.optim.SGD(policy.parameters(), lr=cfg.algorithm.policy_lr)
            td = run.start({"policy": policy, "optimizer": optimizer}, optimizers={"algorithm.policy_lr": optimizer})
            with run:
                while run.running():
                    td["action"] = td["action_mask"].float().argmax(-1)
                    step, td, episodes = run.step(td)
                    loss = (policy(torch.ones(cfg.algorithm.width)) - float(run.steps % 7)).pow(2).sum()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    run.log_update({"loss": loss.item()})
                    run.end_iteration()
            return run.finish(f"{run.steps} updates")


        if __name__ == "__main__":
            sys.exit(command_line(main))
    ''',
    "toy_algorithm/script.py": """
        from toy_algorithm.config import TOY_PRESETS, ToyConfig
        from torchrl_glam.algorithms import TrainingScript

        SCRIPT = TrainingScript("toy_algorithm.train", ToyConfig, TOY_PRESETS)
        NOT_A_SCRIPT = 42
    """,
}


@pytest.fixture
def install(tmp_path, monkeypatch):
    """Installs the toy package on ``sys.path`` as pip would (its files and a ``*.dist-info``
    declaring ``entry_points``), for this process and the launcher's job processes."""

    def install(entry_points: dict[str, str]) -> None:
        for path, source in SOURCES.items():
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(textwrap.dedent(source).lstrip())
        write_distribution(tmp_path, DIST, {"torchrl_glam.algorithms": entry_points}, VERSION)
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{':'.join(p for p in sys.path if p)}")

    yield install
    for module in [m for m in sys.modules if m.split(".")[0] == "toy_algorithm"]:
        del sys.modules[module]


def test_an_algorithm_of_another_package_is_launched_with_local(install, tmp_path, capsys):
    install({"toy": "toy_algorithm.script:SCRIPT"})
    assert "toy" in algorithm_names() and "sac_glam" in algorithm_names()
    root = tmp_path / "runs"
    args = ["--algorithm", "toy", "--preset", "smoke", "--seeds", "0", "--runs-root", str(root)]
    assert launch_main([*args, "--local", "--wait"]) == 0, capsys.readouterr()
    run = root / "smoke" / "seed0"
    assert (run / "checkpoint.pt").exists()
    assert json.loads((run / "config.json").read_text())["algorithm"] == {"policy_lr": 0.1, "width": 4}
    assert json.loads((run / "launch.json").read_text())["algorithm"] == "toy"
    steps = [int(row.split(",")[0]) for row in (run / "logs" / "scalars" / "loss.csv").read_text().splitlines()]
    assert steps[-1] == 32  # trained to the preset's total_steps


@pytest.mark.parametrize(
    "entry_points, name, says",
    [
        ({"toy": "toy_algorithm.script:NOT_A_SCRIPT"}, "toy", "is a int, not a TrainingScript"),
        ({"toy": "toy_algorithm.nosuch:SCRIPT"}, "toy", "cannot be loaded: ModuleNotFoundError"),
        ({"other": "toy_algorithm.script:SCRIPT"}, "other", "names the algorithm 'toy'"),
        ({"sac_glam": "toy_algorithm.script:SCRIPT"}, "sac_glam", "the library's"),
    ],
)
def test_a_bad_declaration_is_refused_in_one_line(install, entry_points, name, says):
    install(entry_points)
    with pytest.raises(ValueError, match=says) as refusal:
        get_script(name)
    assert "\n" not in str(refusal.value) and next(iter(entry_points.values())) in str(refusal.value)
