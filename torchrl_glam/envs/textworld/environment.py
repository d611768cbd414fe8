"""TextWorld behind :class:`~torchrl_glam.envs.protocol.TextEnvironment`: the registered
environments ``"textworld_coin_collector"``, ``"textworld_treasure_hunter"`` and
``"textworld_cooking"`` (the ``[textworld]`` extra; ``textworld`` is imported when one is chosen).

Goal sets: ``"train"`` plays the pool's training games and ``"held_out"`` its held-out games, each
episode's goal being its game's own quest; ``"train_and_rooms"`` plays the training games with half
the episodes' goal a room of their game to go to (what the partner reports becomes a task too).
The social partner reports every goal fact (a room reached, an object taken, a container opened,
food eaten, cut or cooked) at the step it first becomes true in the episode, and the quest when
TextWorld says the game is won: hindsight relabeling trains on those. A family of other settings or
pool sizes is an environment of its own::

    from torchrl_glam.envs import register_environment
    from torchrl_glam.envs.textworld import TextWorldText

    register_environment("coin_collector_10", lambda: TextWorldText("coin_collector", {"level": 10}))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from torchrl_glam.envs.keys import ACHIEVED_GOAL_COUNT_KEY, ACHIEVED_GOAL_IDS_KEY, GAME_OVER_KEY
from torchrl_glam.envs.options import EnvOption
from torchrl_glam.envs.protocol import TextEnvironment
from torchrl_glam.envs.textworld.games import GamePool
from torchrl_glam.envs.textworld.text import GOAL_TYPES, HISTORY_KEYS, MAX_HISTORY, ROOMS_GOAL_SET

if TYPE_CHECKING:
    import torch
    from tensordict import TensorDictBase

    from torchrl_glam.envs.textworld.text import TextWorldGoalCatalogue
    from torchrl_glam.envs.textworld.torchrl_env import TextWorldEnv

#: family -> the widths of its compact state: candidates (A), observation bytes, command bytes
WIDTHS = {
    "coin_collector": (8, 768, 48),
    "treasure_hunter": (16, 1024, 64),
    "cooking": (64, 2048, 64),
}
#: the compact state's step keys (the history's come after them): texts as UTF-8 bytes, and whether
#: the game is over (won or lost), which hindsight relabeling reads
STEP_KEYS = ("observation", "inventory", "commands", GAME_OVER_KEY)
#: the commands certain to change no fact of the game (HER's no-op twins)
NOOP_PREFIXES = ("look", "inventory", "examine ")


def transcript_text(environment: TextWorldText) -> str:
    """The pool its offline models were pretrained on: a model of another pool is never reused (the
    history option changes the prompts' length, not their words: one model serves all)."""
    return environment.pool.folder("train").name


#: How its offline tiny models are pretrained (``torchrl_glam.offline.recipes``, declared in the
#: entry-point group "torchrl_glam.transcript_recipes" for each family)
TRANSCRIPT_RECIPE = {"max_steps": 20, "text": transcript_text}


class TextWorldText(TextEnvironment):
    """A pool of TextWorld games of one family (:class:`~torchrl_glam.envs.textworld.games.GamePool`).

    Args:
        family (str): "coin_collector", "treasure_hunter" or "cooking" (TextWorld's challenges).
        settings (Mapping[str, Any] | None): the family's settings over its defaults
            (:data:`~torchrl_glam.envs.textworld.games.FAMILIES`), e.g. ``{"level": 10}``.
        train_games / held_out_games: the pool's sizes.
        history (int): past observations in the prompt, each with the command taken after it
            (the config's ``env.options.history``).
        name (str | None): the registry name (default ``"textworld_<family>"``).
        cache (str | None): the folder of the game pools (default ``$TORCHRL_GLAM_CACHE/textworld``).
    """

    goal_types = GOAL_TYPES
    goal_sets = ("train", "held_out", ROOMS_GOAL_SET)
    held_out_goal_set = "held_out"
    options = (
        EnvOption(
            "history",
            int,
            0,
            "past observations shown in the prompt before the current one, each with the command taken "
            "after it; 0: the current observation only",
            minimum=0,
            maximum=MAX_HISTORY,
            state=True,
        ),
        EnvOption(
            "room_take_goals",
            bool,
            False,
            'the partner also reports "go to the <room> and take the <object>" (a treasure hunter\'s quest form) '
            "when the player holds an object in the room it started in, so that hindsight relabels with "
            "tasks of the quests' form",
        ),
    )

    def __init__(
        self,
        family: str = "coin_collector",
        settings: Mapping[str, Any] | None = None,
        train_games: int = 64,
        held_out_games: int = 32,
        history: int = 0,
        name: str | None = None,
        cache: str | None = None,
    ) -> None:
        try:
            import textworld  # noqa: F401 - refused here, naming the extra, rather than at the first game
        except ImportError as error:
            raise ImportError(
                f"the TextWorld environments need the textworld package ({error}): "
                "pip install 'torchrl_glam[textworld]'"
            ) from None
        self.pool = GamePool.of(family, settings, train_games=train_games, held_out_games=held_out_games, cache=cache)
        self.name = name or f"textworld_{family}"
        self.history = history
        self.step_keys = STEP_KEYS + (HISTORY_KEYS if history else ())
        self.max_commands, self.text_bytes, self.command_bytes = WIDTHS[family]
        self._variants: dict[int, TextWorldText] = {history: self}
        self._shared: dict[str, TextWorldGoalCatalogue] = {}  # the catalogue, one for every history

    def with_options(self, history: int = 0) -> TextWorldText:
        """This environment with ``history`` past observations in its prompts."""
        if not 0 <= history <= MAX_HISTORY:
            raise ValueError(f"history={history}: from 0 to {MAX_HISTORY}")
        if history not in self._variants:
            variant = TextWorldText.__new__(TextWorldText)
            variant.__dict__.update(self.__dict__)
            variant.history = history
            variant.step_keys = STEP_KEYS + (HISTORY_KEYS if history else ())
            self._variants[history] = variant
        return self._variants[history]

    @property
    def catalogue(self) -> TextWorldGoalCatalogue:
        """The pool's goals (builds the missing games first, with progress)."""
        from torchrl_glam.envs.textworld.text import TextWorldGoalCatalogue

        if "catalogue" not in self._shared:
            self.pool.build()
            self._shared["catalogue"] = TextWorldGoalCatalogue(self.pool)
        return self._shared["catalogue"]

    def make_env(
        self,
        num_envs: int,
        seed: int | None = None,
        goals: str | None = None,
        max_steps: int | None = None,
        goal_sampling: str = "uniform",
        **options,
    ) -> TextWorldEnv:
        """``goals``: "train" (the training games, the default) or "held_out", each episode's goal
        being its game's quest, or "train_and_rooms" (the training games, half the episodes' goal
        their quest, half "go to the <room>" of a room of their game the player does not start in);
        ``goal_sampling`` "by_type" draws as "uniform" does; ``options``: ``room_take_goals`` (the
        option) and :class:`~torchrl_glam.envs.textworld.torchrl_env.TextWorldEnv`'s own."""
        from torchrl_glam.envs.textworld.torchrl_env import TextWorldEnv

        goals = goals or "train"
        if goals not in self.goal_sets:
            raise ValueError(f"goals={goals!r} is not a TextWorld goal set; choose one of {self.goal_sets}")
        if goal_sampling not in ("uniform", "by_type"):
            raise ValueError(f"goal_sampling={goal_sampling!r}; choose 'uniform' or 'by_type'")
        return TextWorldEnv(
            self.pool,
            self.catalogue,
            num_envs=num_envs,
            split="train" if goals == ROOMS_GOAL_SET else goals,
            room_goals=goals == ROOMS_GOAL_SET,
            seed=seed,
            max_steps=max_steps or 20,
            history=self.history,
            max_commands=self.max_commands,
            text_bytes=self.text_bytes,
            command_bytes=self.command_bytes,
            **options,
        )

    def num_actions(self, env: Any) -> int:
        return self.max_commands

    def render(self, state: Mapping[str, torch.Tensor]) -> tuple[list[str], list[list[str]]]:
        from torchrl_glam.envs.textworld.text import render_batch

        return render_batch(state, self.catalogue.goals, self.history)

    def action_mask(self, state: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return state["commands"][..., 0] != 0

    def vocabulary_words(self) -> list[str]:
        from torchrl_glam.envs.textworld.text import vocabulary_words

        return vocabulary_words()

    def transcript_targets(self, steps: Mapping[str, Any], candidates: list[list[str]]) -> list[str]:
        """The chosen command, what the game answered, then the goals reported:
        "go east : -= Studio =- You're now in the studio. ... : go to the studio"."""
        from torchrl_glam.envs.textworld.text import decode

        nxt, goals = steps["next"], self.catalogue.goals
        targets = []
        for b, chosen in enumerate(steps["action"].tolist()):
            count = int(nxt[ACHIEVED_GOAL_COUNT_KEY][b])
            reports = [goals[g] for g in nxt[ACHIEVED_GOAL_IDS_KEY][b, :count].tolist()]
            answer = decode(nxt["observation"][b])
            targets.append(f"{candidates[b][chosen]} : {answer} : {', '.join(reports) if reports else 'nothing'}")
        return targets

    def reset_in_groups(self, env: Any, group_size: int) -> TensorDictBase:
        """Each group of ``group_size`` sub-environments from one start: the same game and goal."""
        from torchrl_glam.envs.env_state import reset_in_groups

        return reset_in_groups(env, group_size)

    def noop_actions(self, state: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """ "look", "inventory" and "examine ...": they change no fact of the game."""
        import torch

        from torchrl_glam.envs.textworld.text import decode

        commands = state["commands"]
        flat = commands.reshape(-1, commands.shape[-1])
        noop = [decode(row).startswith(NOOP_PREFIXES) for row in flat]
        return torch.tensor(noop, dtype=torch.bool).reshape(commands.shape[:-1])


def coin_collector() -> TextWorldText:
    """The registered ``textworld_coin_collector``: level 6 (a chain of six rooms)."""
    return TextWorldText("coin_collector")


def treasure_hunter() -> TextWorldText:
    """The registered ``textworld_treasure_hunter``: level 4 (easy: five rooms, no doors)."""
    return TextWorldText("treasure_hunter")


def cooking() -> TextWorldText:
    """The registered ``textworld_cooking``: one ingredient to take in one room, held-out games
    from TextWorld's test food split."""
    return TextWorldText("cooking")


__all__ = ["TextWorldText", "coin_collector", "cooking", "treasure_hunter"]
