"""BabyAITextEnv (BabyAI-Text over minigrid): the text layer, the Mixed levels, specs, seeding, stock
TorchRL pieces, and the social partner against minigrid's own verifier."""

from functools import partial

import numpy as np
import pytest
import torch

pytest.importorskip("minigrid", reason="BabyAI-Text needs the babyai extra: pip install 'minigrid>=3.0'")

from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX  # noqa: E402
from minigrid.envs.babyai.core import verifier  # noqa: E402
from tensordict.nn import TensorDictModule  # noqa: E402
from torchrl.envs import ParallelEnv, RewardSum, SerialEnv, StepCounter, TransformedEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402
from torchrl.modules import MaskedCategorical  # noqa: E402

from torchrl_glam.envs.babyai import MIXED_KINDS, BabyAITextEnv, RenderBabyAIText, SocialPartner
from torchrl_glam.envs.babyai.text import (
    ACTIONS,
    GOAL_TYPES,
    BabyAIGoalCatalogue,
    action_mask_from_state,
    describe_view,
    render_prompt,
    vocabulary_words,
)
from torchrl_glam.envs.babyai.torchrl_env import GRAMMAR_LEVELS, MixedLocalLevel


def random_policy(td):
    """Uniform over the legal candidates."""
    mask = td["action_mask"]
    return td.set("action", MaskedCategorical(logits=torch.zeros(mask.shape), mask=mask).sample())


class RandomPolicy(torch.nn.Module):
    """The same as an nn.Module, for TensorDictModule / Collector."""

    def forward(self, mask):
        return MaskedCategorical(logits=torch.zeros(mask.shape), mask=mask).sample()


def random_rollout(env, steps, seed):
    """Actions from a fixed generator among the legal ones; the stacked steps (time last)."""
    gen = torch.Generator().manual_seed(seed)
    td, out = env.reset(), []
    for _ in range(steps):
        td.set("action", torch.multinomial(td["action_mask"].float(), 1, generator=gen).squeeze(-1))
        step, td = env.step_and_maybe_reset(td)
        out.append(step.exclude("next").update({"next": step["next"].exclude("next")}))
    return torch.stack(out, dim=-1)


# ---------------------------------------------------------------------------- text layer
def test_catalogue_ids_round_trip_and_splits_are_disjoint():
    cat = BabyAIGoalCatalogue.default()
    assert len(cat) == 7168 and len(set(cat.goals)) == len(cat)
    assert cat.goals[cat.id_of("put the red ball next to a blue key")] == "put the red ball next to a blue key"
    assert "pick up the grey ball, then go to a grey key" in cat
    assert "go to the red box after you pick up a ball" in cat
    seq = cat.id_of("go to the red box after you pick up a ball")
    assert cat.type_of(seq) == "pickup_then_goto" and cat.type_of("open the door") == "open"
    assert [cat.goals[p] for p in cat.parts[seq]] == ["pick up a ball", "go to the red box"]
    assert (cat.parts[cat.goal_type != GOAL_TYPES.index("pickup_then_goto")] == -1).all()
    train, test = set(cat.goal_set("train")), set(cat.goal_set("test"))
    assert not train & test
    assert cat.id_of("open the red door") in test and cat.id_of("open the door") in train
    assert cat.id_of("put the yellow box next to the red key") in test
    assert cat.id_of("put the yellow box next to the blue key") not in train | test  # mixes both
    with pytest.raises(ValueError, match="not an instruction of the BabyAI-Text grammar"):
        cat.id_of("go to the red ball on your left")


def _view(*cells):
    """A 7x7x3 encoded view, empty, with (x, y, type, color, state) cells."""
    image = np.zeros((7, 7, 3), dtype=np.uint8)
    image[..., 0] = OBJECT_TO_IDX["empty"]
    for x, y, kind, color, state in cells:
        image[x, y] = (OBJECT_TO_IDX[kind], COLOR_TO_IDX[color], state)
    return image


def test_view_description_in_both_wordings():
    image = _view(
        (3, 4, "wall", "grey", 0),  # 2 ahead
        (1, 6, "wall", "grey", 0),  # 2 left
        (2, 4, "ball", "red", 0),  # 1 left, 2 forward
        (5, 5, "door", "purple", 2),  # locked, 2 right, 1 forward
        (6, 6, "door", "green", 0),  # open, 3 right
        (3, 0, "key", "blue", 0),
    )
    image[0, 0, 0] = OBJECT_TO_IDX["unseen"]
    carrying = (OBJECT_TO_IDX["key"], COLOR_TO_IDX["blue"])
    readable = [
        "You carry a blue key",
        "You see a wall 2 steps forward",
        "You see a wall 2 steps left",
        "You see a red ball 1 step left and 2 steps forward",
        "You see a blue key 6 steps forward",
        "You see a locked purple door 2 steps right and 1 step forward",
        "You see an open green door 3 steps right",
    ]
    assert describe_view(image, carrying, "readable") == readable
    # GLAM's: no wall right (the open door ends that line), "a open"
    assert describe_view(image, carrying) == [*readable[:-1], "You see a open green door 3 steps right"]
    image[3, 5] = (OBJECT_TO_IDX["box"], COLOR_TO_IDX["red"], 0)  # a box in front of the wall ahead
    assert "You see a wall 2 steps forward" not in describe_view(image, carrying)
    assert "You see a wall 2 steps forward" in describe_view(image, carrying, "readable")
    assert render_prompt("go to the red ball", _view(), (-1, -1), wording="readable") == (
        "Possible actions of the agent: turn left, turn right, go forward, pick up, drop, toggle\n"
        "Goal of the agent: go to the red ball\nObservation: You see nothing\nAction: "
    )
    assert render_prompt("go to the red ball", _view(), (-1, -1)) == (
        "Possible action of the agent: turn left, turn right, go forward, pick up, drop, toggle \n "
        "Goal of the agent: go to the red ball \n Observation 0: \n Action 0: "
    )
    with pytest.raises(ValueError, match="wording='plain': choose 'glam'"):
        BabyAITextEnv(wording="plain")


def test_vocabulary_covers_every_prompt_goal_and_action():
    import re

    vocabulary = set(vocabulary_words())
    words = lambda text: set(re.findall(r"\w+|[^\w\s]", text))  # noqa: E731  (the tokenizer's split)
    assert set().union(*map(words, BabyAIGoalCatalogue.default().goals)) <= vocabulary
    data = random_rollout(BabyAITextEnv(num_envs=4, level="MixedTestLocal", seed=0), 50, seed=0)
    assert set().union(*(words(p) for row in data["prompt"] for p in row)) <= vocabulary
    assert set().union(*map(words, ACTIONS)) <= vocabulary


# ---------------------------------------------------------------------------- levels
@pytest.mark.parametrize("split", ["train", "test"])
def test_mixed_levels_draw_each_kind_within_their_split(split):
    cat = BabyAIGoalCatalogue.default()
    allowed = set(cat.goal_set(split))
    for kind in MIXED_KINDS:
        level = MixedLocalLevel(split=split, kind=kind)
        for seed in range(4):
            level.reset(seed=seed)
            assert cat.id_of(level.mission) in allowed, (kind, level.mission)
            assert level.check_objs_reachable(raise_exc=False)
        if kind == "open":  # two rooms, the key of the locked door on the agent's side
            assert level.width == 15 and level.mission.startswith("open ")
            doors = [o for o in level.grid.grid if o is not None and o.type == "door"]
            assert len(doors) == 1 and doors[0].is_locked
            keys = [o for o in level.grid.grid if o is not None and o.type == "key" and o.color == doors[0].color]
            assert keys and level.room_from_pos(*keys[0].cur_pos) is level.room_from_pos(*level.agent_pos)


def test_env_draws_every_kind_and_grammar_levels_stay_in_the_grammar():
    env = BabyAITextEnv(num_envs=16, level="MixedTrainLocal", seed=0, text=False)
    env.reset()
    assert {type(e).__name__ + e.kind for e in env.envs} == {"MixedLocalLevel" + k for k in MIXED_KINDS}
    env = BabyAITextEnv(num_envs=8, seed=0, kinds=("goto", "pickup"), text=False)
    goal_types = {env.catalogue.type_of(int(g)) for g in env.reset()["goal_id"]}
    assert goal_types == {"goto", "pickup"}
    for level in GRAMMAR_LEVELS:  # a mission outside the grammar would raise at reset
        env = BabyAITextEnv(num_envs=8, level=level, seed=0, text=False)
        data = env.rollout(12, break_when_any_done=False)  # reward and reports agree there too
        hit = (data["next", "achieved_goal_ids"] == data["goal_id"].unsqueeze(-1)).any(-1)
        assert torch.equal(hit, data["next", "reward"].squeeze(-1) > 0), level


# ---------------------------------------------------------------------------- TorchRL environment
@pytest.mark.parametrize("level", ["MixedTrainLocal", "MixedTestLocal"])
@pytest.mark.parametrize("text", [True, False])
def test_check_env_specs_passes_batched(level, text):
    check_env_specs(BabyAITextEnv(num_envs=3, level=level, seed=0, text=text), seed=None)


def test_check_env_specs_passes_with_masks_and_minigrid_reward():
    check_env_specs(BabyAITextEnv(num_envs=3, seed=0, reward="minigrid", mask_noops=True), seed=None)


def test_defaults_keys_and_candidates():
    env = BabyAITextEnv(num_envs=2, seed=0)
    td = env.reset()
    assert td["actions"] == [list(ACTIONS)] * 2
    assert td["action_mask"].all()
    assert td["goal"] == [e.mission for e in env.envs]
    assert [env.catalogue.goals[g] for g in td["goal_id"]] == td["goal"]
    assert td["prompt"][0].startswith("Possible action of the agent: turn left, turn right")
    assert f" \n Goal of the agent: {td['goal'][0]} \n Observation 0: You see" in td["prompt"][0]
    assert td["achieved_goals"] == [[], []] and (td["achieved_goal_count"] == 0).all()


def test_compact_state_re_renders_the_prompt():
    text = random_rollout(BabyAITextEnv(num_envs=4, seed=3), 40, seed=0)
    compact = random_rollout(BabyAITextEnv(num_envs=4, seed=3, text=False), 40, seed=0)
    assert "prompt" not in compact.keys()
    rendered = RenderBabyAIText(next_state=True)(compact.clone())
    assert rendered["prompt"] == text["prompt"] and rendered["next", "prompt"] == text["next", "prompt"]
    assert rendered["actions"] == text["actions"]
    env = TransformedEnv(BabyAITextEnv(num_envs=2, seed=1, text=False), RenderBabyAIText())
    assert env.reset()["prompt"] == BabyAITextEnv(num_envs=2, seed=1).reset()["prompt"]
    check_env_specs(env, seed=None)


def test_history_shows_the_past_views_and_actions_oldest_first():
    """GLAM's prompt with past observations: each earlier view with the action taken after it,
    oldest first, at most ``history`` of them, none after a reset; ``history=0`` is the plain prompt."""
    env, plain = BabyAITextEnv(num_envs=2, seed=5, history=2), BabyAITextEnv(num_envs=2, seed=5)
    td, td_plain = env.reset(), plain.reset()
    assert td["prompt"] == td_plain["prompt"] and (td["past_actions"] == -1).all()
    views = [(td["image"][0].numpy(), td["carrying"][0].tolist())]
    for action in ("turn left", "go forward", "turn right"):
        act = torch.full((2,), ACTIONS.index(action))
        td = env.step(td.set("action", act))["next"]
        td_plain = plain.step(td_plain.set("action", act))["next"]
        views.append((td["image"][0].numpy(), td["carrying"][0].tolist()))
    goal = td["goal"][0]
    past = [(*views[1], ACTIONS.index("go forward")), (*views[2], ACTIONS.index("turn right"))]
    assert td["prompt"][0] == render_prompt(goal, *views[3], past=past)
    prompt = td["prompt"][0]
    assert prompt.count(" \n Observation ") == 3 and "Action 0: go forward \n Observation 1: " in prompt
    assert td["prompt"][0].endswith(", \n Action 2: ")
    assert td["past_actions"].tolist() == [[2, 1], [2, 1]]
    assert td_plain["prompt"][0] == render_prompt(goal, *views[3])  # the same episode without history
    reset = env.reset(td.set("_reset", torch.tensor([True, False])))
    assert reset["past_actions"].tolist() == [[-1, -1], [2, 1]]
    check_env_specs(BabyAITextEnv(num_envs=3, seed=0, history=3), seed=None)


@pytest.mark.parametrize("wording", ["glam", "readable"])
def test_history_is_compact_state_that_re_renders_the_prompt(wording):
    text = random_rollout(BabyAITextEnv(num_envs=4, seed=3, history=2, wording=wording), 40, seed=0)
    compact = random_rollout(BabyAITextEnv(num_envs=4, seed=3, text=False, history=2), 40, seed=0)
    rendered = RenderBabyAIText(next_state=True, history=2, wording=wording)(compact.clone())
    assert rendered["prompt"] == text["prompt"] and rendered["next", "prompt"] == text["next", "prompt"]


def test_masks_follow_from_the_compact_state():
    for mask_noops in (False, True):
        data = random_rollout(BabyAITextEnv(num_envs=4, seed=4, text=False, mask_noops=mask_noops), 80, seed=0)
        rule = action_mask_from_state(data["next", "image"], data["next", "carrying"], mask_noops)
        assert torch.equal(rule, data["next", "action_mask"])
        assert mask_noops or rule.all()


def test_every_mission_and_report_fits_the_scene_of_its_episode():
    env = BabyAITextEnv(num_envs=4, seed=6, text=False)
    data = random_rollout(env, 150, seed=0)
    goals = env.catalogue.goal_set("all")
    for b in range(4):
        for t in range(150):
            if t % 10 and not data["next", "achieved_goal_count"][b, t]:
                continue  # every tenth step, and every step with reports
            fits = env.catalogue.goals_in_scene(data["objects"][b, t].numpy())
            assert fits[data["goal_id"][b, t]]
            reported = data["next", "achieved_goal_ids"][b, t, : data["next", "achieved_goal_count"][b, t]]
            assert fits[reported].all()
    assert 0 < fits.sum() < len(goals)


def test_same_seed_same_rollout():
    keys = ["goal_id", "objects", "image", "carrying", ("next", "reward"), ("next", "done")]
    keys.append(("next", "achieved_goal_ids"))
    first, again, other = (random_rollout(BabyAITextEnv(num_envs=4, seed=s, text=False), 60, seed=0) for s in (7, 7, 8))
    assert all(torch.equal(first[k], again[k]) for k in keys)
    assert not torch.equal(first["image"], other["image"])
    # set_seed re-seeds an existing environment: its next reset repeats the first one of that seed
    env = BabyAITextEnv(num_envs=4, text=False)
    env.set_seed(7)
    assert torch.equal(env.reset()["objects"], first["objects"][:, 0])


def test_partial_reset_resets_only_the_flagged_sub_environments():
    env = BabyAITextEnv(num_envs=4, seed=0)
    td = env.reset()
    td = env.step(td.set("action", torch.tensor([2, 2, 1, 1])))["next"].clone()
    steps = [e.step_count for e in env.envs]
    after = env.reset(td.clone().set("_reset", torch.tensor([[True], [False], [True], [False]])))
    assert [e.step_count for e in env.envs] == [0, steps[1], 0, steps[3]]
    assert after["prompt"][1] == td["prompt"][1] and after["prompt"][3] == td["prompt"][3]


# ---------------------------------------------------------------------------- social partner
@pytest.mark.parametrize("level", ["MixedTrainLocal", "MixedTestLocal", "GoToLocal"])
@pytest.mark.parametrize("reward", ["binary", "minigrid"])
def test_reward_agrees_exactly_with_the_mission_among_the_achieved_goals(level, reward):
    data = random_rollout(BabyAITextEnv(num_envs=8, level=level, seed=3, reward=reward, text=False), 300, seed=1)
    ids, count = data["next", "achieved_goal_ids"], data["next", "achieved_goal_count"]
    valid = torch.arange(ids.shape[-1]) < count.unsqueeze(-1)
    assert ((ids >= 0) == valid).all()
    hit = ((ids == data["goal_id"].unsqueeze(-1)) & valid).any(-1)
    rewards = data["next", "reward"].squeeze(-1)
    assert torch.equal(hit, rewards > 0) and torch.equal(hit, data["next", "success"])
    assert torch.equal(hit, data["next", "terminated"].squeeze(-1))
    assert hit.sum() > 0  # random play succeeds a few times
    if reward == "minigrid":  # 1 - 0.9 * step / max_steps: in [0.1, 1)
        assert ((rewards == 0) | ((rewards >= 0.1 - 1e-6) & (rewards < 1))).all()
    else:
        assert set(rewards.unique().tolist()) == {0.0, 1.0}


def test_text_reports_match_their_ids():
    env = BabyAITextEnv(num_envs=4, seed=5)
    data = random_rollout(env, 60, seed=2)
    ids, count = data["next", "achieved_goal_ids"], data["next", "achieved_goal_count"]
    for b in range(4):
        for t in range(60):
            texts = data["next", "achieved_goals"][b][t]
            assert ids[b, t, : count[b, t]].tolist() == [env.catalogue.id_of(g) for g in texts]
            assert (data["goal"][b][t] in texts) == bool(data["next", "reward"][b, t] > 0)
    assert count.sum() > 0


def test_training_reports_never_name_held_out_goals():
    cat = BabyAIGoalCatalogue.default()
    for level, sets in [("MixedTrainLocal", ("train",)), ("MixedTestLocal", ("train", "test"))]:
        allowed = np.zeros(len(cat), dtype=bool)
        allowed[np.concatenate([cat.goal_set(n) for n in sets])] = True
        data = random_rollout(BabyAITextEnv(num_envs=8, level=level, seed=0, text=False), 100, seed=0)
        ids = data["next", "achieved_goal_ids"]
        assert allowed[ids[ids >= 0]].all() and (ids >= 0).sum() > 100
    env = BabyAITextEnv(num_envs=8, level="MixedTestLocal", seed=0, text=False, reported_goals=("all",))
    wide = random_rollout(env, 100, seed=0)
    assert (wide["next", "achieved_goal_count"] >= data["next", "achieved_goal_count"]).all()
    assert not allowed[wide["next", "achieved_goal_ids"][wide["next", "achieved_goal_ids"] >= 0]].all()


def _verifiers(level, partner):
    """One minigrid verifier per instruction the partner could report in this episode, with the
    surface the partner uses (the articles of the reset)."""
    keys = list(partner.matches)
    movable = [k for k in keys if k[0] != "door"]
    s, V, D = partner.surface, verifier, verifier.ObjDesc
    instrs = [(V.GoToInstr(D(*k)), f"go to {s[k]}") for k in keys]
    instrs += [(V.PickupInstr(D(*k)), f"pick up {s[k]}") for k in movable]
    instrs += [(V.OpenInstr(D(*k)), f"open {s[k]}") for k in keys if k[0] == "door"]
    for m in movable:
        for k in keys:
            if not {id(o) for o in partner.matches[m]} & {id(o) for o in partner.matches[k]}:
                instrs.append((V.PutNextInstr(D(*m), D(*k)), f"put {s[m]} next to {s[k]}"))
            before = V.BeforeInstr(V.PickupInstr(D(*m)), V.GoToInstr(D(*k)))
            after = V.AfterInstr(V.GoToInstr(D(*k)), V.PickupInstr(D(*m)))
            instrs.append((before, f"pick up {s[m]}, then go to {s[k]}"))
            instrs.append((after, f"go to {s[k]} after you pick up {s[m]}"))
    for instr, _ in instrs:
        instr.reset_verifier(level)
    return instrs


@pytest.mark.parametrize("kind", MIXED_KINDS)
def test_partner_reports_exactly_what_minigrid_verifiers_accept(kind):
    # every instruction of the grammar present in the scene, judged by its own minigrid verifier as if
    # it were the mission; random play biased towards pick up / drop / toggle to reach more of them
    rng = np.random.default_rng(0)
    level, partner = MixedLocalLevel(split="train", kind=kind), SocialPartner()
    checked = 0
    for episode in range(3):
        level.reset(seed=episode)
        partner.reset(level)
        instrs = _verifiers(level, partner)
        for _ in range(60):
            action = int(rng.choice(6, p=[0.2, 0.2, 0.24, 0.12, 0.12, 0.12]))
            carried = level.carrying
            level.step(action)
            reported = partner.step(action, carried)
            if action == level.actions.drop:  # as RoomGridLevel.step does for its own mission
                for instr, _ in instrs:
                    level.update_objs_poss(instr)
            accepted = [text for instr, text in instrs if instr.verify(action) == "success"]
            assert sorted(reported) == sorted(accepted)
            checked += len(accepted)
    assert checked > 0


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "action, error, message",
    [
        (
            torch.tensor([0, 6]),
            ValueError,
            r"action 6 of sub-environment 1 is out of range; actions are indices 0\.\.5",
        ),
        (torch.tensor([-1, 0]), ValueError, "out of range"),
        (torch.tensor([True, False]), TypeError, r"dtype torch.bool; pass integer indices .*action.long\(\)"),
        (torch.tensor([0.0, 1.0]), TypeError, "dtype torch.float32; pass integer indices"),
        (torch.tensor([0j, 1j]), TypeError, "dtype torch.complex64"),
        (torch.zeros(2, 3, dtype=torch.long), ValueError, r"must be 2 indices \(shape \[2\]\), got \(2, 3\)"),
    ],
)
def test_bad_actions_give_clear_errors(action, error, message):
    env = BabyAITextEnv(num_envs=2, seed=0)
    td = env.reset()
    td.set("action", action)
    with pytest.raises(error, match=message):
        env._step(td)


def test_masked_action_gives_a_clear_error():
    env = BabyAITextEnv(num_envs=2, seed=0, mask_noops=True)
    td = env.reset()
    assert not td["action_mask"][:, ACTIONS.index("drop")].any()  # nothing carried at the start
    with pytest.raises(ValueError, match=r"action 4 \('drop'\) of sub-environment 0 is masked"):
        env.step(td.set("action", torch.tensor([4, 0])))


def test_masked_actions_are_exactly_no_ops():
    # a masked action, tried on a copy of the level, changes nothing: masking removes no behaviour
    import copy

    env = BabyAITextEnv(num_envs=4, seed=2, mask_noops=True, text=False)
    td, gen, masked_seen = env.reset(), torch.Generator().manual_seed(0), 0
    for _ in range(150):
        for b, level in enumerate(env.envs):
            for a in np.flatnonzero(~td["action_mask"][b].numpy()):
                twin = copy.deepcopy(level)
                twin.step(int(a))
                assert np.array_equal(twin.grid.encode(), level.grid.encode())
                assert (twin.carrying is None) == (level.carrying is None)
                assert tuple(twin.agent_pos) == tuple(level.agent_pos) and twin.agent_dir == level.agent_dir
                masked_seen += 1
        td.set("action", torch.multinomial(td["action_mask"].float(), 1, generator=gen).squeeze(-1))
        _, td = env.step_and_maybe_reset(td)
    assert masked_seen > 100


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(level="BabyAI-GoToLocal-v0"), r"unknown level 'BabyAI-GoToLocal-v0'; choose one of \('MixedTrainLocal'"),
        (dict(level="BossLevel"), "unknown level 'BossLevel'"),
        (dict(reward="dense"), "reward='dense': choose 'binary'"),
        (dict(num_envs=0), "num_envs=0 must be at least 1"),
        (dict(kinds=("goto", "unlock")), r"kinds=\('goto', 'unlock'\): a non-empty subset of \('goto'"),
        (dict(level="GoToLocal", kinds=("goto",)), "for the Mixed levels"),
        (dict(reported_goals=("held_out",)), "goal set 'held_out': choose 'all', 'train' or 'test'"),
    ],
)
def test_bad_constructor_arguments_give_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BabyAITextEnv(**kwargs)


def test_bad_level_arguments_give_clear_errors():
    with pytest.raises(ValueError, match="split='val': choose 'train' or 'test'"):
        MixedLocalLevel(split="val")
    with pytest.raises(ValueError, match="kind='unlock': choose one of"):
        MixedLocalLevel(kind="unlock")


# ---------------------------------------------------------------------------- stock TorchRL
def test_works_inside_stock_torchrl_transforms():
    env = TransformedEnv(BabyAITextEnv(num_envs=3, seed=0), StepCounter())
    env.append_transform(RewardSum())
    check_env_specs(env, seed=None)
    data = env.rollout(80, random_policy, break_when_any_done=False)
    assert (data["next", "step_count"] <= 128).all()  # minigrid's longest limit: 2 rooms of 8x8
    assert (data["next", "episode_reward"] <= 1).all()
    done = data["next", "done"]
    assert torch.equal(done, data["next", "truncated"] | data["next", "terminated"])


def test_serial_env_of_batched_envs():
    env = SerialEnv(2, partial(BabyAITextEnv, num_envs=3, seed=0))
    env.set_seed(0)
    data = env.rollout(5, random_policy, break_when_any_done=False)
    assert data.batch_size == (2, 3, 5)
    assert isinstance(data["next", "prompt"][1][2][4], str)


@pytest.mark.slow  # ~15 s: two worker processes import torch and minigrid
def test_parallel_env_of_batched_envs():
    env = ParallelEnv(2, partial(BabyAITextEnv, num_envs=2, seed=0, text=False))
    try:
        env.set_seed(0)
        data = env.rollout(5, random_policy, break_when_any_done=False)
        assert data.batch_size == (2, 2, 5)
        rendered = RenderBabyAIText()(data["next"].reshape(-1).clone())
        assert all(p.startswith("Possible action of the agent: ") for p in rendered["prompt"])
    finally:
        env.close()


def test_collector_with_a_random_policy_module():
    from torchrl.collectors import Collector

    policy = TensorDictModule(RandomPolicy(), in_keys=["action_mask"], out_keys=["action"])
    env = BabyAITextEnv(num_envs=4, seed=0)
    collector = Collector(env, policy, frames_per_batch=40, total_frames=120, auto_register_policy_transforms=False)
    try:
        batches = list(collector)
    finally:
        collector.shutdown()
    assert len(batches) == 3 and all(b.numel() == 40 for b in batches)
    prompts = batches[-1]["next", "prompt"]  # [4][10] nested lists
    assert len(prompts) == 4 and all(isinstance(p, str) for row in prompts for p in row)


def _random_steps(env, td, steps, generator):
    out = []
    for _ in range(steps):
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1)
        step, td = env.step_and_maybe_reset(td)
        out.append(
            step.exclude(
                "prompt",
                "actions",
                "goal",
                "achieved_goals",
                ("next", "prompt"),
                ("next", "actions"),
                ("next", "goal"),
                ("next", "achieved_goals"),
            )
        )
    return td, out


@pytest.mark.parametrize("history", [0, 2])
def test_a_saved_state_resumes_exactly_in_a_fresh_environment(history):
    """What a checkpoint needs: state_dict holds plain data (torch.load(weights_only=True) reads it)
    and a new environment that loads it continues with the same observations, reports and rewards."""
    import io

    env = BabyAITextEnv(num_envs=4, level="MixedTrainLocal", seed=3, max_steps=12, history=history)
    td, _ = _random_steps(env, env.reset(), 17, torch.Generator().manual_seed(0))  # mid-episode, some reset
    buffer = io.BytesIO()
    torch.save(env.state_dict(), buffer)
    buffer.seek(0)
    fresh = BabyAITextEnv(num_envs=4, level="MixedTrainLocal", seed=99, max_steps=12, history=history)
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    restored = fresh.observation()
    history_keys = ("past_images", "past_carrying", "past_actions") if history else ()
    for key in ("goal_id", "image", "carrying", "objects", "action_mask", "achieved_goal_ids", *history_keys):
        assert torch.equal(restored[key], td[key]), key
    assert restored["prompt"] == td["prompt"]
    _, a = _random_steps(env, td, 30, torch.Generator().manual_seed(1))
    _, b = _random_steps(fresh, restored, 30, torch.Generator().manual_seed(1))
    assert all((x == y).all() for x, y in zip(a, b))
    with pytest.raises(ValueError, match="num_envs=4"):
        BabyAITextEnv(num_envs=2, seed=0).load_state_dict(env.state_dict())


@pytest.mark.parametrize(
    "cap, expected",
    [
        (128, {"goto": 64, "pickup": 64, "open": 128, "putnext": 128, "pickup_then_goto": 128}),
        (100, {"goto": 64, "pickup": 64, "open": 100, "putnext": 100, "pickup_then_goto": 100}),
    ],
)
def test_level_time_limits_are_glams_per_mission_capped_at_max_steps(cap, expected):
    # GLAM's episodes: minigrid's limit for the mission (64 steps per navigation in an 8x8 room; a
    # second room or a second navigation doubles it); max_steps caps them (the padding length)
    for kind, limit in expected.items():
        env = BabyAITextEnv(num_envs=2, seed=0, text=False, kinds=(kind,), max_steps=cap, level_time_limits=True)
        td = env.reset()
        td["action"] = torch.zeros(2, dtype=torch.long)  # turning left forever never succeeds
        for t in range(limit):
            td = env.step(td)
            assert td["next", "truncated"].all() == (t == limit - 1), (kind, t)
            td = td["next"].set("action", torch.zeros(2, dtype=torch.long))
        assert env.max_steps == cap
    fixed = BabyAITextEnv(num_envs=1, seed=0, text=False, kinds=("putnext",), max_steps=32)
    td = fixed.reset().set("action", torch.zeros(1, dtype=torch.long))
    for _ in range(32):
        td = fixed.step(td)
        td = td["next"].set("action", torch.zeros(1, dtype=torch.long))
    assert td["truncated"].all()
