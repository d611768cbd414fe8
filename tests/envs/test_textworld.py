"""TextWorld through the protocol: specs that pass TorchRL's checks, a stock TorchRL collector
over it, goals from the games' logic, exact state restore, and one-line refusals of bad input."""

import json
import subprocess
import sys

import pytest
import torch

pytest.importorskip("textworld", reason="the TextWorld environments need the textworld extra")

from tensordict.nn import TensorDictModule  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

from torchrl_glam.envs import get_environment, register_environment, unregister_environment  # noqa: E402
from torchrl_glam.envs.textworld import GameBuildError, GameFileError, GamePool, TextWorldText  # noqa: E402
from torchrl_glam.envs.textworld.text import clean, decode, vocabulary_words  # noqa: E402


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    """The folder of this module's small pools (built once)."""
    return str(tmp_path_factory.mktemp("textworld_games"))


def small(games, family="coin_collector", **kwargs):
    return TextWorldText(family, train_games=3, held_out_games=2, cache=games, **kwargs)


@pytest.mark.parametrize("family", ["coin_collector", "treasure_hunter", "cooking"])
def test_every_family_passes_torchrls_spec_checks(games, family):
    environment = small(games, family)
    env = environment.make_env(2, seed=0, max_steps=6)
    check_env_specs(env, seed=0)
    td = env.reset()
    assert td["action_mask"].any(-1).all()
    prompts, candidates = environment.render(td)
    assert all(len(c) == environment.max_commands for c in candidates)
    assert "Goal of the agent:" in prompts[0] and prompts[0].endswith("Action 0: ")


def test_with_history_and_text_keys_the_specs_still_pass(games):
    env = small(games, history=2).make_env(3, seed=1, max_steps=5, text=True)
    check_env_specs(env, seed=1)


@pytest.mark.parametrize("policy", ["random", "glam"])
def test_a_stock_torchrl_collector_plays_it_with_legal_commands_only(games, policy):
    from torchrl_glam.modules import GLAMAgent, make_scorer

    environment = small(games)
    env = environment.make_env(4, seed=2, max_steps=10)
    if policy == "random":  # uniform over the legal commands
        actor = TensorDictModule(
            lambda mask: torch.multinomial(mask.float(), 1).squeeze(-1), ["action_mask"], ["action"]
        )
    else:
        actor = GLAMAgent(make_scorer(None), environment=environment).policy()
    collector = Collector(env, actor, frames_per_batch=40, total_frames=80, auto_register_policy_transforms=False)
    batches = list(collector)
    collector.shutdown()
    assert sum(b.numel() for b in batches) == 80
    for batch in batches:
        chosen = batch["action_mask"].gather(-1, batch["action"].unsqueeze(-1))
        assert chosen.all()  # the action spec's mask follows each state
        reward, success = batch["next", "reward"].squeeze(-1), batch["next", "success"]
        assert torch.equal(reward > 0, success)


def test_the_partner_reports_each_goal_fact_when_it_first_becomes_true(games):
    """Following the game's walkthrough: each room entered is reported once, the quest at the end."""
    import textworld

    environment = small(games)
    env = environment.make_env(1, seed=0, max_steps=50)
    env.start_episode(0, game=0, goal_id=env.quests[0])
    walkthrough = json.loads(env.games[0].with_suffix(".json").read_text())["metadata"]["walkthrough"]
    goals, reported = environment.catalogue.goals, []
    for command in walkthrough:
        commands = env._commands[0]
        td = env.step(env.observation().set("action", torch.tensor([commands.index(command)])))["next"]
        reported.append([goals[g] for g in td["achieved_goal_ids"][0, : int(td["achieved_goal_count"][0])]])
    assert reported[-1] == ["take the coin"] and td["reward"].item() == 1.0 and td["terminated"].item()
    rooms = [r for step in reported[:-1] for r in step]
    assert all(r.startswith("go to the ") for r in rooms) and len(rooms) == len(set(rooms)) == len(walkthrough) - 1
    assert textworld.__version__  # the walkthrough is TextWorld's own: its quest is the game's


def test_held_out_games_are_other_games_with_their_own_quests(games):
    environment = small(games)
    pool = environment.pool
    assert not set(pool.seeds("train")) & set(pool.seeds("held_out"))
    train, held_out = environment.make_env(1, goals="train"), environment.make_env(1, goals="held_out")
    assert not {p.read_bytes() for p in train.games} & {p.read_bytes() for p in held_out.games}
    assert set(environment.catalogue.goal_set("held_out")) == set(held_out.quests)


def test_restoring_the_state_replays_every_episode_exactly(games):
    environment = small(games, history=1)
    env = environment.make_env(3, seed=4, max_steps=12)
    td = env.reset()
    generator = torch.Generator().manual_seed(0)
    for _ in range(17):
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1)
        _, td = env.step_and_maybe_reset(td)
    copy = environment.make_env(3, seed=99, max_steps=12)
    copy.load_state_dict(env.state_dict())
    assert (copy.observation() == env.observation()).all()
    for _ in range(9):  # and the same future: the sampler's state came along
        td["action"] = td["action_mask"].float().argmax(-1)
        a, after = env.step_and_maybe_reset(td.clone())
        b, _ = copy.step_and_maybe_reset(td.clone())
        assert (a == b).all()
        td = after


def test_the_vocabulary_covers_held_out_games():
    """Random play on games no vocabulary saw (fresh seeds, three families) meets no unknown word."""
    import re

    words = set(vocabulary_words())
    unknown = set()
    for family, settings in (("coin_collector", {"level": 9}), ("treasure_hunter", {"level": 7})):
        environment = TextWorldText(family, settings, train_games=1, held_out_games=1)
        env = environment.make_env(2, seed=5, max_steps=15, goals="held_out")
        td = env.reset()
        for _ in range(30):
            prompts, candidates = environment.render(td)
            for text in prompts + [c for cs in candidates for c in cs]:
                unknown |= {w for w in re.findall(r"\w+|[^\w\s]", text) if w not in words}
            td["action"] = td["action_mask"].float().argmax(-1)
            _, td = env.step_and_maybe_reset(td)
    assert not unknown


def test_cleaning_drops_the_prompt_and_status_line():
    raw = "\nYou are carrying nothing.\n\n\n\n>                  -= Cellar =-0/2"
    assert clean(raw) == "You are carrying nothing."
    assert decode(torch.tensor([104, 105, 0, 0], dtype=torch.uint8)) == "hi"


# ---------------------------------------------------------------- refusals


def test_an_unknown_family_or_setting_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="unknown TextWorld family 'zork'; choose one of"):
        TextWorldText("zork")
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['levl'\].*its settings: \['level'\]"):
        TextWorldText("coin_collector", {"levl": 3})
    with pytest.raises(ValueError, match="setting level='3'.*expected int"):
        TextWorldText("coin_collector", {"level": "3"})


def test_a_game_that_cannot_be_generated_names_the_family_the_seed_and_what_to_try(tmp_path):
    pool = GamePool.of("coin_collector", {"level": 500}, train_games=1, held_out_games=1, cache=str(tmp_path))
    with pytest.raises(GameBuildError, match=r"tw-coin_collector game with seed 0 .*try other settings"):
        pool.build(progress=False)


def test_a_platform_without_inform7_is_refused_with_what_to_do(tmp_path, monkeypatch):
    import platform

    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    pool = GamePool.of("coin_collector", {"level": 2}, train_games=1, held_out_games=1, cache=str(tmp_path))
    with pytest.raises(GameBuildError, match="Inform7's compilers for Linux and macOS x86_64 only.*aarch64"):
        pool.build(progress=False)


def test_a_missing_or_damaged_game_file_is_refused_naming_it(games, tmp_path):
    import shutil

    environment = small(games)
    environment.pool.build(progress=False)
    copy = tmp_path / "copy"
    shutil.copytree(environment.pool.folder("train"), copy / environment.pool.folder("train").name)
    broken = TextWorldText("coin_collector", train_games=3, held_out_games=2, cache=str(copy))
    game = broken.pool.path("train", 1)
    game.with_suffix(".json").unlink()
    with pytest.raises(
        GameFileError, match=rf"{game.with_suffix('.json')} not found.*python -m torchrl_glam.envs.textworld"
    ):
        broken.pool.games("train")
    broken.pool.build(progress=False)  # the rebuild command's work
    data = bytearray(game.read_bytes())
    data[1000] ^= 0xFF
    game.write_bytes(bytes(data))
    with pytest.raises(GameFileError, match=rf"{game} is damaged"):
        broken.make_env(1)


def test_without_the_extra_the_config_is_refused_in_one_line_naming_it(tmp_path):
    code = (
        "import sys; sys.modules['textworld'] = None\n"
        "from torchrl_glam.algorithms.sac_glam.train import cli\n"
        "sys.exit(cli(['env=textworld_coin_collector', '--run-dir', sys.argv[1]]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith("pip install 'torchrl_glam[textworld]'")
    assert not (tmp_path / "run").exists()


def test_a_registered_variant_trains_through_the_config(games):
    from torchrl_glam.algorithms.sac_glam.config import make_config

    register_environment("textworld_small", lambda: small(games))
    try:
        cfg = make_config("smoke", {"env": "textworld_small", "env.goals": "train", "history": 1})
        assert cfg.environment.history == 1 and get_environment("textworld_small").history == 0
    finally:
        unregister_environment("textworld_small")


def test_train_and_rooms_sets_half_the_episodes_a_room_of_their_game_and_rewards_reaching_it(games):
    """Issue 85's widened goal set: the facts the partner reports ("go to the <room>") become tasks
    training sets, so hindsight relabels to goals the agent is given."""
    environment = small(games)
    catalogue = environment.catalogue
    env = environment.make_env(8, seed=5, goals="train_and_rooms", max_steps=12)
    check_env_specs(env, seed=0)
    generator = torch.Generator().manual_seed(0)
    td = env.reset()
    starts = env.state_dict()["episodes"]
    kinds, room_successes = [], 0
    for _ in range(120):
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=generator).squeeze(-1)
        step, td = env.step_and_maybe_reset(td)
        nxt = step["next"]
        for b in range(8):
            game, goal = starts[b]
            reports = nxt["achieved_goal_ids"][b, : int(nxt["achieved_goal_count"][b])].tolist()
            assert goal == int(step["goal_id"][b])
            assert bool(nxt["terminated"][b]) >= (goal in reports) and nxt["reward"][b].item() == float(goal in reports)
            if bool(nxt["done"][b]):
                is_room = goal in catalogue.rooms_of["train"][game]
                assert is_room or goal == catalogue.quest_of["train"][game]
                kinds.append(is_room)
                room_successes += is_room and goal in reports
        starts = env.state_dict()["episodes"]
    assert len(kinds) >= 60 and 0.3 < sum(kinds) / len(kinds) < 0.7 and room_successes > 0
    assert set(catalogue.goal_set("train_and_rooms")) == set(catalogue.quest_of["train"]) | {
        g for game in catalogue.rooms_of["train"] for g in game
    }
    copy = environment.make_env(8, seed=99, goals="train_and_rooms", max_steps=12)
    copy.load_state_dict(env.state_dict())  # a resume replays each episode with its drawn goal
    assert (copy.observation() == env.observation()).all()


def test_train_and_rooms_is_a_goal_set_a_config_accepts(games):
    from torchrl_glam.algorithms.sac_glam.config import make_config

    register_environment("textworld_small_rooms", lambda: small(games))
    try:
        cfg = make_config("smoke", {"env": "textworld_small_rooms", "env.goals": "train_and_rooms"})
        assert cfg.env.goals == "train_and_rooms"
    finally:
        unregister_environment("textworld_small_rooms")


def test_room_take_goals_report_each_object_taken_in_its_room_in_the_quests_words(games):
    """Issue 85: with ``room_take_goals`` the treasure hunter's partner reports "go to the <room> and
    take the <object>" for the wrong object too, a task of the quests' form that hindsight can relabel
    with; an episode given that goal succeeds where the other ended lost."""
    environment = small(games, "treasure_hunter")
    catalogue = environment.catalogue
    takes = {g for g in catalogue.goals if " and take the " in g}
    quests = {catalogue.goals[q] for q in catalogue.quest_of["train"] + catalogue.quest_of["held_out"]}
    assert quests <= takes
    # the other room takes come last: every other goal keeps the id earlier versions gave it (checkpoints)
    others = sorted(catalogue.id_of(g) for g in takes - quests)
    assert others == list(range(len(catalogue) - len(others), len(catalogue)))
    plain, reporting = (
        environment.make_env(1, max_steps=30),
        environment.make_env(1, max_steps=30, room_take_goals=True),
    )

    def play(env, goal_id, commands=None):
        """Random moves until the wrong object can be taken, then its take (or ``commands`` again):
        what the last step reported, its output and the commands."""
        env.start_episode(0, game=0, goal_id=goal_id)
        quest_take = json.loads(env.games[0].with_suffix(".json").read_text())["metadata"]["walkthrough"][-1]
        generator, commands, played = torch.Generator().manual_seed(0), commands or [], []
        while not played or not played[-1].startswith("take "):
            listed = env._commands[0]
            wrong = [c for c in listed if c.startswith("take ") and c != quest_take]
            moves = [c for c in listed if c.startswith("go ")]
            command = (
                commands[len(played)]
                if commands
                else (wrong or [moves[torch.randint(len(moves), (1,), generator=generator)]])[0]
            )
            td = env.step(env.observation().set("action", torch.tensor([listed.index(command)])))["next"]
            played.append(command)
        return [catalogue.goals[g] for g in td["achieved_goal_ids"][0, : int(td["achieved_goal_count"][0])]], td, played

    reported, td, commands = play(plain, plain.quests[0])
    assert reported and not set(reported) & takes and td["reward"].item() == 0.0 and td["terminated"].item()
    reported, td, _ = play(reporting, reporting.quests[0], commands)
    wrong_take = [g for g in reported if g in takes]
    assert len(wrong_take) == 1 and td["reward"].item() == 0.0 and td["terminated"].item()  # the game is lost
    reported, td, _ = play(reporting, catalogue.id_of(wrong_take[0]), commands)
    assert wrong_take[0] in reported and td["reward"].item() == 1.0 and td["terminated"].item()
    check_env_specs(reporting, seed=0)
