"""Evaluation on fixed scenes: success overall and per goal type, and the evaluation sets a run
can log (:data:`EVAL_SETS`, chosen by the config's ``eval_sets``; defined in ``eval_sets.py``,
which needs no torch)."""

from __future__ import annotations

import torch
from torchrl.envs import EnvBase

from torchrl_glam.envs import step_success
from torchrl_glam.training.eval_sets import EVAL_SETS, EvalSet

__all__ = ["EVAL_SETS", "EvalSet", "Transcripts", "evaluate"]


@torch.no_grad()
def evaluate(
    policy,
    env: EnvBase,
    greedy: bool = True,
    *,
    goal_types: tuple[str, ...],
    transcripts: list | None = None,
    environment=None,
    num_transcripts: int = 3,
) -> dict[str, float]:
    """Runs one episode in every sub-environment of ``env`` (reset with its seed, so every
    evaluation sees the same scenes and goals) and returns the success rates.

    ``policy(td, greedy=greedy)`` writes "action". A sampled evaluation draws from its own random
    stream, seeded by the environment's seed: it is the same for every algorithm and leaves the
    training's stream untouched (adding it to a run does not change the run). Keys: "success",
    "success/<goal type>" for the types present (``goal_types``: the names of the environment's
    types, ``TextEnvironment.goal_types``), "episode_length".

    ``transcripts`` (a list; ``environment``: the env's ``TextEnvironment``): the first
    ``num_transcripts`` episodes are appended to it as text, step by step (:class:`Transcripts`).

    Examples:
        >>> from torchrl_glam.algorithms.sac_glam.build import make_loss
        >>> from torchrl_glam.algorithms.sac_glam.config import make_config
        >>> from torchrl_glam.training.evaluation import evaluate
        >>> from torchrl_glam.training.factories import act, make_eval_envs
        >>> cfg = make_config("smoke", {"eval_episodes": 4})
        >>> loss = make_loss(cfg, num_actions=5)
        >>> env = make_eval_envs(cfg)["train"]
        >>> results = evaluate(
        ...     lambda td, greedy: act(loss, td, greedy=greedy), env, goal_types=cfg.environment.goal_types
        ... )
        >>> sorted(results)
        ['episode_length', 'success', 'success/grasp', 'success/grow']
        >>> 0.0 <= results["success"] <= 1.0
        True
    """
    recorder = Transcripts(environment, env.catalogue, num_transcripts) if transcripts is not None else None
    if greedy:
        results = _episodes(policy, env, greedy, goal_types, recorder)
    else:
        # a policy on a GPU samples from that device's generator: fork it too (fork_rng forks the CPU's)
        devices = [torch.cuda.current_device()] if torch.cuda.is_initialized() else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(env.seed_value)
            results = _episodes(policy, env, greedy, goal_types, recorder)
    if recorder is not None:
        transcripts.extend(recorder.episodes)
    return results


class Transcripts:
    """A few evaluation episodes as text, for the report: the goal, and per step what the agent saw
    (its prompt), its top candidates with their probabilities (when the policy wrote its scores,
    "action_scores"), the action taken, the reward and the goals the partner reported. Any
    environment: it reads only the :class:`~torchrl_glam.envs.protocol.TextEnvironment` protocol."""

    def __init__(self, environment, catalogue, count: int, top: int = 3) -> None:
        self.environment, self.catalogue, self.count, self.top = environment, catalogue, count, top
        self.episodes: list[dict] = []

    def start(self, td) -> None:
        self.count = min(self.count, td.batch_size[0])
        goals = td["goal_id"][: self.count].tolist()
        self.episodes = [{"goal": self.catalogue.goals[g], "success": False, "steps": []} for g in goals]

    def step(self, td, out, running) -> None:
        """``td``: the state acted in, with "action" (and the scores); ``out``: the step's "next"."""
        first = td[: self.count]
        prompts, candidates = self.environment.render(first)
        scores = first.get("action_scores", None)
        probs = None
        if scores is not None:  # the actor's masked categorical over the scores
            probs = torch.softmax(scores.float().masked_fill(~first["action_mask"], float("-inf")), -1)
        for i, episode in enumerate(self.episodes):
            if not running[i]:
                continue
            step = {
                "saw": prompts[i],
                "action": candidates[i][int(first["action"][i])],
                "reward": float(out["reward"][i].sum()),
                "reported": [self.catalogue.goals[g] for g in out["achieved_goal_ids"][i].tolist() if g >= 0],
            }
            if probs is not None:
                best = torch.argsort(probs[i], descending=True)[: self.top].tolist()
                step["candidates"] = [[candidates[i][a], round(float(probs[i, a]), 3)] for a in best]
            episode["steps"].append(step)

    def finish(self, success) -> None:
        for i, episode in enumerate(self.episodes):
            episode["success"] = bool(success[i])


def _episodes(
    policy, env: EnvBase, greedy: bool, goal_types: tuple[str, ...], recorder: Transcripts | None = None
) -> dict[str, float]:
    env.set_seed(env.seed_value)
    td = env.reset()
    num = env.num_envs
    success = torch.zeros(num, dtype=torch.bool)
    ended = torch.zeros(num, dtype=torch.bool)
    length = torch.zeros(num)
    goal_type = torch.as_tensor(env.catalogue.goal_type[td["goal_id"].numpy()])
    if recorder is not None:
        recorder.start(td)
    for _ in range(env.max_steps):
        policy(td, greedy=greedy)
        out = env.step(td)["next"]
        running = ~ended
        if recorder is not None:
            recorder.step(td, out, running)
        success |= running & step_success(out).squeeze(-1)
        length += running.float()
        ended |= out["done"].squeeze(-1)
        if ended.all():
            break
        td = out.exclude("reward", "done", "terminated", "truncated")
    if recorder is not None:
        recorder.finish(success)
    results = {"success": success.float().mean().item(), "episode_length": length.mean().item()}
    for k, name in enumerate(goal_types):
        chosen = goal_type == k
        if chosen.any():
            results[f"success/{name}"] = success[chosen].float().mean().item()
    return results
