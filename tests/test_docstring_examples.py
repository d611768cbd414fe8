"""The ``Examples:`` of the most used public names run as doctests: an example that breaks fails here.

The names are the ones README.md, docs/site/*.md, examples/ and experiments/ use most (counted
as code there). Only these objects' docstrings run, not whole modules: module docstrings may show
commands that download models or need a GPU. The examples use the offline tiny T5 shipped with
the package and print shapes, keys and dtypes, never floats that vary across CPUs.
"""

import doctest
import importlib
import tempfile

import pytest

EXAMPLES = [
    "torchrl_glam.modules.LLMConfig",
    "torchrl_glam.modules.load_llm",
    "torchrl_glam.modules.make_scorer",
    "torchrl_glam.modules.LLMScorer",
    "torchrl_glam.modules.GLAMAgent",
    "torchrl_glam.modules.make_critic_heads",
    "torchrl_glam.envs.register_environment",
    "torchrl_glam.envs.PartialResetActionMask",
    "torchrl_glam.envs.playground.PlaygroundTextEnv",
    "torchrl_glam.envs.playground.GoalCatalogue",
    "torchrl_glam.envs.playground.RenderText",
    "torchrl_glam.envs.playground.render.render_batch",
    "torchrl_glam.envs.babyai.BabyAITextEnv",
    "torchrl_glam.envs.babyai.BabyAIText",
    "torchrl_glam.envs.babyai.text.render_batch",
    "torchrl_glam.data.noop_twins.noop_twins",
    "torchrl_glam.objectives.SACGLAMLoss",
    "torchrl_glam.objectives.GRPOGLAMLoss",
    "torchrl_glam.objectives.common.score_states",
    "torchrl_glam.training.factories.make_env",
    "torchrl_glam.training.factories.make_eval_envs",
    "torchrl_glam.training.factories.act",
    "torchrl_glam.training.factories.agent_policy",
    "torchrl_glam.training.evaluation.evaluate",
    "torchrl_glam.training.runtime.reuse_freed_memory",
    "torchrl_glam.algorithms.sac_glam.config.SACGLAMConfig",
    "torchrl_glam.algorithms.sac_glam.config.make_config",
    "torchrl_glam.algorithms.sac_glam.build.make_loss",
    "torchrl_glam.algorithms.sac_glam.build.num_actions",
    "torchrl_glam.algorithms.sac_glam.build.load_trained_loss",
    "torchrl_glam.algorithms.ppo_glam.build.make_loss",
    "torchrl_glam.algorithms.grpo_glam.build.make_loss",
    "torchrl_glam.algorithms.grpo_glam.groups.RepeatedStarts",
]


def _resolve(path: str):
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("path", EXAMPLES)
def test_the_examples_run(path, tmp_path, monkeypatch):
    if ".babyai" in path:
        pytest.importorskip("minigrid")  # the [babyai] extra
    monkeypatch.chdir(tmp_path)  # an example that writes files writes them here
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its tempfile.mkdtemp() too
    obj = _resolve(path)
    assert "Examples:" in (obj.__doc__ or ""), f"{path} has no Examples: section"
    # the object's own docstring only (recurse=False: a class's methods keep theirs apart)
    tests = doctest.DocTestFinder(recurse=False).find(obj, path, globs={})
    examples = [test for test in tests if test.examples]
    assert examples, f"{path}'s Examples: hold no >>> lines"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in examples:
        runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, f"{failed} of {attempted} examples of {path} failed (their diff is printed above)"
