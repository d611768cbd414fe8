"""Hindsight relabeling's contract, for every environment: each relabeled section is an episode
that could have happened. Replayed in its environment, from its start, with its actions and its
goal as the episode's goal, it gets the same rewards and ends where it ends (a success at its
last step; a failure never succeeds and goes on past it).

Checked over every registered environment and over a toy environment whose social partner
reports a state ("on cell k") on every step it holds, the case HER once relabeled at every report.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from tests.training.test_custom_environment import line_environment  # noqa: F401 (a fixture)
from torchrl_glam.algorithms.ppo_glam.rollout import Rollout
from torchrl_glam.data.episodes import EpisodeAssembler
from torchrl_glam.data.her import HindsightRelabel, relabel_negatives, relabel_rollout
from torchrl_glam.envs import GAME_OVER_KEY, environment_names, get_environment

SEED = 3


def _collect(environment, num_envs: int, steps: int, max_steps: int, goals: str = "train", **options):
    """Random play: the finished episodes [E, T] and, per episode, what its replay starts from
    (BabyAI-Text: the level's kind and seed, from the environment's state)."""
    env = environment.make_env(num_envs, seed=SEED, goals=goals, max_steps=max_steps, **options)
    assembler = EpisodeAssembler(num_envs, env.max_steps, environment=environment)
    generator = torch.Generator().manual_seed(SEED)

    def start(b):
        return env.state_dict()["episodes"][b] if environment.name == "babyai" or TEXTWORLD(environment.name) else None

    td = env.reset()
    starts = [start(b) for b in range(num_envs)]
    episodes, origins = [], []
    for _ in range(steps):
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1)
        step, td = env.step_and_maybe_reset(td)
        finished = assembler.add(step)
        ended = step["next", "done"].reshape(-1).nonzero().squeeze(-1).tolist()
        if finished is not None:
            episodes.append(finished)
            origins += [starts[b] for b in ended]
        for b in ended:
            starts[b] = start(b)
    return env, torch.cat(episodes), origins


# ---------------------------------------------------------------- replays, one per environment
# Each returns (reward [S, T], ended [S, T], success [S, T]) of the sections replayed under their goal.


def _replay_playground(env, sections, origins):
    from torchrl_glam.envs.playground import OBJECT_NAMES, PlaygroundTextEnv

    S, T = sections.shape
    replay_env = PlaygroundTextEnv(
        num_envs=S, num_objects=env.num_objects, goals="train", text=False, max_steps=env.max_steps
    )
    catalogue = env.catalogue
    td = replay_env.reset(
        TensorDict(
            {
                "goal": [catalogue.goals[g] for g in sections["goal_id"][:, 0].tolist()],
                "scene": [[OBJECT_NAMES[i] for i in objects] for objects in sections["objects"][:, 0].tolist()],
            },
            batch_size=[S],
        )
    )
    rewards, ended, success = (torch.zeros(S, T, dtype=d) for d in (torch.float32, torch.bool, torch.bool))
    alive = torch.ones(S, dtype=torch.bool)
    for t in range(T):
        td.set("action", sections["action"][:, t])
        nxt = replay_env.step(td)["next"]
        rewards[:, t] = torch.where(alive, nxt["reward"].squeeze(-1), 0.0)
        ended[:, t] = alive & nxt["done"].squeeze(-1)
        success[:, t] = alive & nxt["terminated"].squeeze(-1) & (nxt["reward"].squeeze(-1) > 0)
        alive &= ~nxt["done"].squeeze(-1)
        td = nxt.exclude("reward", "done", "terminated", "truncated")
        if not alive.any():
            break
    return rewards, ended, success


def _replay_babyai(env, sections, origins):
    """minigrid's own verifier of the section's goal, as if it were the level's mission."""
    from tests.envs.test_babyai_text import _verifiers
    from torchrl_glam.envs.babyai import MIXED_KINDS, SocialPartner, make_level

    S, T = sections.shape
    rewards, ended, success = (torch.zeros(S, T, dtype=d) for d in (torch.float32, torch.bool, torch.bool))
    goals = env.catalogue.goals
    for s in range(S):
        kind, level_seed = origins[s]
        level = make_level(env.level, MIXED_KINDS[kind], max_steps=env.max_steps)
        level.reset(seed=level_seed)
        partner = SocialPartner()
        partner.reset(level)
        instr = dict((text, instr) for instr, text in _verifiers(level, partner)).get(
            goals[int(sections["goal_id"][s, 0])]
        )
        if instr is None:  # a goal naming objects the room lacks (a negative's): never achieved
            continue
        for t, action in enumerate(sections["action"][s].tolist()):
            level.step(action)
            if action == level.actions.drop:
                level.update_objs_poss(instr)
            status = instr.verify(action)
            assert status != "failure"  # the grammar's instructions are not strict: they never fail
            if status == "success" or t == env.max_steps - 1:
                rewards[s, t], ended[s, t], success[s, t] = float(status == "success"), True, status == "success"
                break
    return rewards, ended, success


def _replay_line(env, sections, origins):
    from tests.training.test_custom_environment import LineEnv

    S, T = sections.shape
    replay_env = LineEnv(S, seed=0, max_steps=env.max_steps)
    replay_env.reset()
    replay_env.goal, replay_env.position = sections["goal_id"][:, 0].clone(), sections["position"][:, 0].clone()
    rewards, ended, success = (torch.zeros(S, T, dtype=d) for d in (torch.float32, torch.bool, torch.bool))
    alive = torch.ones(S, dtype=torch.bool)
    for t in range(T):
        nxt = replay_env._step(TensorDict({"action": sections["action"][:, t]}, batch_size=[S]))
        rewards[:, t] = torch.where(alive, nxt["reward"].squeeze(-1), 0.0)
        ended[:, t] = alive & nxt["done"].squeeze(-1)
        success[:, t] = alive & nxt["terminated"].squeeze(-1)
        alive &= ~nxt["done"].squeeze(-1)
    return rewards, ended, success


def _replay_textworld(env, sections, origins):
    """The section's commands in the same game, from its start, with the section's goal."""
    S, T = sections.shape
    rewards, ended, success = (torch.zeros(S, T, dtype=d) for d in (torch.float32, torch.bool, torch.bool))
    widths = {"max_commands": env.max_commands, "text_bytes": env.text_bytes, "command_bytes": env.command_bytes}
    widths["room_take_goals"] = env.room_take_goals
    replay_env = type(env)(env.pool, env.catalogue, num_envs=1, split=env.split, max_steps=env.max_steps, **widths)
    for s in range(S):
        replay_env.start_episode(0, game=origins[s][0], goal_id=int(sections["goal_id"][s, 0]))
        for t, action in enumerate(sections["action"][s].tolist()):
            nxt = replay_env.step(replay_env.observation().set("action", torch.tensor([action])))["next"]
            rewards[s, t] = nxt["reward"].item()
            success[s, t] = nxt["terminated"].item() and nxt["reward"].item() > 0
            if nxt["done"].item():
                ended[s, t] = True
                break
    return rewards, ended, success


def TEXTWORLD(name: str) -> bool:
    return name.startswith("textworld_")


REPLAYS = {"playground": _replay_playground, "babyai": _replay_babyai, "line": _replay_line}
REPLAYS.update({name: _replay_textworld for name in environment_names() if TEXTWORLD(name)})
# (num_envs, steps, max_steps) of the random play; BabyAI's partner reports states (go to) on every
# step that holds them, so short episodes already repeat reports
PLAY = {"playground": (32, 60, 10), "babyai": (16, 48, 24), "line": (32, 40, 8)}
PLAY.update({name: (8, 60, 12) for name in REPLAYS if TEXTWORLD(name)})


@pytest.fixture(params=sorted(set(environment_names()) | {"line"}))
def environment(request, tmp_path_factory):
    name = request.param
    if name == "babyai":
        pytest.importorskip("minigrid")
    if TEXTWORLD(name):  # the registered family with a small pool of its games
        pytest.importorskip("textworld")
        from torchrl_glam.envs.textworld import TextWorldText

        family = name.removeprefix("textworld_")
        return TextWorldText(family, train_games=4, held_out_games=1, cache=str(tmp_path_factory.getbasetemp() / "tw"))
    return request.getfixturevalue("line_environment") if name == "line" else get_environment(name)


def test_every_registered_environment_has_a_replay():
    assert set(environment_names()) <= set(REPLAYS), "add the new environment's replay to this test"


def _sources(episodes, sections) -> torch.Tensor:
    """The episode each relabeled section was copied from (its first step's global index)."""
    index = {c: e for e, c in enumerate(episodes["collected_at"][:, 0].tolist())}
    return torch.tensor([index[c] for c in sections["collected_at"][:, 0].tolist()], dtype=torch.long)


def _check_replays(env, environment, sections, origins, success: bool):
    assert len(sections) > 0
    rewards, ended, succeeded = REPLAYS[environment.name](env, sections, origins)
    mask = sections["mask"]
    length = mask.sum(-1)
    last = torch.arange(sections.shape[1]) == (length - 1).unsqueeze(-1)
    # the same rewards on every step of the section
    assert torch.equal(rewards * mask, sections["next", "reward"] * mask)
    if success:  # it ends exactly at its last step, with a success, and not before
        assert torch.equal(succeeded & mask, last) and torch.equal(ended & mask, last)
    else:  # a failure never succeeds, and goes on past its last step unless the time limit ends it
        assert not (succeeded & mask).any()
        time_limit = length == sections.shape[1]
        assert not (ended & mask & ~last).any()
        # or the game ended there whatever the goal: then the section ends with a terminal
        over = torch.zeros_like(time_limit)
        if GAME_OVER_KEY in sections["next"].keys():
            over = (sections["next", GAME_OVER_KEY] & last).any(-1)
        assert not (ended & last)[~time_limit & ~over].any()
        assert torch.equal((sections["next", "terminated"] & last).any(-1), over)


def test_relabeled_successes_replay_as_episodes_that_could_have_happened(environment):
    num_envs, steps, max_steps = PLAY[environment.name]
    env, episodes, origins = _collect(environment, num_envs, steps, max_steps)
    out = HindsightRelabel(seed=0, environment=environment)(episodes)
    relabeled = out[len(episodes) :]
    assert len(relabeled) >= 8, "too few reports to check: play longer"
    source = _sources(episodes, relabeled)
    _check_replays(env, environment, relabeled, [origins[i] for i in source.tolist()], success=True)
    # the environments that report states repeat reports: the contract drops every later one
    ids = episodes["next", "achieved_goal_ids"]
    reports = (torch.arange(ids.shape[-1]) < episodes["next", "achieved_goal_count"].unsqueeze(-1)) & episodes[
        "mask"
    ].unsqueeze(-1)
    pairs = {(e, g) for e, g in zip(*[x.tolist() for x in (torch.nonzero(reports)[:, 0], ids[reports])])}
    if environment.name in ("babyai", "line"):
        assert int(reports.sum()) > len(pairs)  # the case this test is for does occur


def test_relabeling_only_to_the_training_goals_keeps_those_sections_and_the_contract(environment):
    """``relabel_goals`` (``hindsight.her_goals=training``) keeps exactly the sections relabeled with a
    goal of the training set, and they still replay as episodes that could have happened."""
    num_envs, steps, max_steps = PLAY[environment.name]
    env, episodes, origins = _collect(environment, num_envs, steps, max_steps)
    training = torch.as_tensor(environment.catalogue.goal_set("train"), dtype=torch.long)
    every = HindsightRelabel(seed=0, environment=environment)(episodes)[len(episodes) :]
    out = HindsightRelabel(seed=0, environment=environment, relabel_goals=training)(episodes)
    relabeled = out[len(episodes) :]
    kept = torch.isin(every["goal_id"][:, 0], training)
    assert len(every) and len(relabeled) == int(kept.sum())
    if TEXTWORLD(environment.name):  # its partner's facts (rooms, objects) are no game's quest
        assert not len(relabeled)
    assert torch.equal(relabeled["goal_id"], every["goal_id"][kept])
    if len(relabeled):
        source = _sources(episodes, relabeled)
        _check_replays(env, environment, relabeled, [origins[i] for i in source.tolist()], success=True)


@pytest.mark.parametrize("environment", ["textworld_treasure_hunter"], indirect=True)
def test_room_takes_relabel_with_tasks_of_the_quests_form_that_replay(environment):
    """TextWorld's ``room_take_goals`` (issue 85): with ``hindsight.her_goals=training_types`` the
    treasure hunter's episodes are relabeled only with room takes, the form of its quests, some of
    them no training game's quest (the wrong object taken), and each replays as a success."""
    from torchrl_glam.algorithms.sac_glam.build import relabel_goals

    env, episodes, origins = _collect(environment, *PLAY[environment.name], room_take_goals=True)
    catalogue = environment.catalogue
    training = catalogue.goal_set("train")
    kept = relabel_goals(catalogue, training, "training_types")
    relabeled = HindsightRelabel(seed=0, environment=environment, relabel_goals=kept)(episodes)[len(episodes) :]
    goals = relabeled["goal_id"][:, 0].tolist()
    assert len(goals) >= 4 and all(" and take the " in catalogue.goals[g] for g in goals)
    assert set(goals) - set(training.tolist())  # a wrong object's take: a task no training game sets
    _check_replays(env, environment, relabeled, [origins[i] for i in _sources(episodes, relabeled).tolist()], True)


@pytest.mark.parametrize("kind", ["negatives", "scene", "twins"])
def test_relabeled_failures_replay_as_episodes_that_could_have_happened(environment, kind):
    num_envs, steps, max_steps = PLAY[environment.name]
    env, episodes, origins = _collect(environment, num_envs, steps, max_steps)
    if kind != "negatives" and not environment.has("goals_in_scene"):
        pytest.skip(f"{environment.name} has no goals_in_scene (scene negatives and twins need it)")
    if kind == "negatives":
        failures = relabel_negatives(episodes, per_episode=2, generator=torch.Generator().manual_seed(0))
    else:
        options = {"negatives_per_episode": 2, "negatives_from": "scene"} if kind == "scene" else {"twins": True}
        train = environment.catalogue.goal_set("train")
        out = HindsightRelabel(seed=0, goal_ids=train, environment=environment, **options)(episodes)
        failures = out[(out["next", "reward"].sum(-1) == 0) & out["relabeled"][:, 0]]
    source = _sources(episodes, failures)
    _check_replays(env, environment, failures, [origins[i] for i in source.tolist()], success=False)


def test_ppo_relabeled_pieces_end_at_the_first_report_of_their_goal_in_the_episode(line_environment):
    """PPO-GLAM relabels rollouts, which cut episodes: a piece that continues an episode begun in an
    earlier rollout must not end at a goal that episode reported before the rollout. On the toy
    line (its partner reports the cell on every step) the relabeled pieces are exactly the
    first reports of each episode's goals, counted from the episode's start."""
    B, length = 8, 5
    env = line_environment.make_env(B, seed=SEED, max_steps=12)
    rollout, generator, td = (
        Rollout(length, environment=line_environment),
        torch.Generator().manual_seed(0),
        env.reset(),
    )
    seen = [set() for _ in range(B)]  # the cells each row's episode in progress reported
    since = [0] * B  # the steps of its episode in progress within the rollout so far
    expected, continued = [], 0
    for i in range(60):
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1)
        td["sample_log_prob"], td["behaviour_scores"] = torch.zeros(B), torch.zeros(B, 3)
        step, td = env.step_and_maybe_reset(td)
        if i % length == 0:
            since = [0] * B
            continued += sum(bool(s) for s in seen)
        for b in range(B):
            since[b] += 1
            cell, goal = int(step["next", "position"][b]), int(step["goal_id"][b])
            if cell not in seen[b] and cell != goal:
                expected.append((i // length, cell, since[b]))  # rollout, goal, piece length
            seen[b].add(cell)
            if step["next", "done"][b]:
                seen[b], since[b] = set(), 0
        full = rollout.add(step)
        if full is not None:
            pieces = relabel_rollout(full, 12, reported_before=rollout.reported_before)
            got = sorted(
                (i // length, int(g), int(n))
                for g, n in zip(pieces["goal_id"][:, 0].tolist(), pieces["mask"].sum(-1).tolist())
            )
            assert got == sorted(e for e in expected if e[0] == i // length)
            assert (pieces["next", "reward"].squeeze(-1).sum(-1) == 1).all()
    assert continued > 10 and len(expected) > 40
