"""TextWorld games as a batched TorchRL ``EnvBase``: one game per sub-environment.

TextWorld's interpreter (Jericho's Frotz) holds each started game apart, so the games of a batch
run in one process; a started game is kept for the next episode of the same game (starting one
costs ~0.1 s, a reset ~0.01 s).

A checkpoint names each episode's game by its index in the pool, so it also records the pool
(:meth:`~torchrl_glam.envs.textworld.games.GamePool.identity`): a resume on a pool whose games
changed since is refused rather than played on other games.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict, TensorDictBase
from torchrl.data import Binary, Bounded, Categorical, Composite, NonTensor
from torchrl.envs import EnvBase

from torchrl_glam.envs.env_state import ReplayedEpisodes
from torchrl_glam.envs.keys import GAME_OVER_KEY
from torchrl_glam.envs.protocol import EnvironmentStateError
from torchrl_glam.envs.textworld.games import GameFileError, GamePool
from torchrl_glam.envs.textworld.text import (
    HISTORY_KEYS,
    MAX_HISTORY,
    MAX_REPORTS,
    QUEST_SHARE,
    TextWorldGoalCatalogue,
    clean,
    encode,
    render_batch,
)

#: the checkpoint's record of the pool (absent from checkpoints written before it: not checked)
POOL_STATE = "pool"
#: what to do about a checkpoint whose games are not this pool's
OTHER_POOL_FIX = "put back the pool the run trained on, or start a new run"


def _text(values: list, device: torch.device) -> NonTensorStack:
    return NonTensorStack(*[NonTensorData(data=v, device=device) for v in values], device=device)


class TextWorldEnv(ReplayedEpisodes, EnvBase):
    """TextWorld games, batched over ``num_envs`` sub-environments; each reset draws a game of
    ``split`` uniformly and sets its goal to the game's own quest (with ``room_goals``, half the
    time to "go to the <room>" of one of its rooms the player does not start in).

    Args:
        pool (GamePool): the games (:class:`~torchrl_glam.envs.textworld.games.GamePool`), built already.
        catalogue (TextWorldGoalCatalogue): the pool's goals
            (:class:`~torchrl_glam.envs.textworld.text.TextWorldGoalCatalogue`).
        num_envs (int): sub-environments stepped together.
        split (str): "train" or "held_out": the games played.
        seed (int | None): the game sampler's seed; same seed, same games and rollouts.
        max_steps (int): the time limit of an episode (a truncation).
        history (int): past observations shown in the prompt, each with the command taken after it.
        max_commands (int): A, the candidates' width; a state with more admissible commands keeps the
            first A (in TextWorld's order) and warns once.
        text_bytes (int): the bytes kept of an observation (longer ones are cut, with a warning once).
        command_bytes (int): the bytes kept of a command.
        text (bool): also write "prompt", "actions", "goal" and "achieved_goals".
        room_goals (bool): the "train_and_rooms" goal set's episodes: half of them a room of their game to go to.
        room_take_goals (bool): the partner also reports "go to the <room> and take the <object>" when the
            player is in an object's starting room holding it (the catalogue's room takes).
    """

    batch_locked = True

    def __init__(
        self,
        pool: GamePool,
        catalogue: TextWorldGoalCatalogue,
        num_envs: int = 1,
        split: str = "train",
        seed: int | None = None,
        max_steps: int = 20,
        history: int = 0,
        max_commands: int = 8,
        text_bytes: int = 768,
        command_bytes: int = 48,
        device: torch.device | str = "cpu",
        text: bool = False,
        room_goals: bool = False,
        room_take_goals: bool = False,
    ) -> None:
        import textworld

        if num_envs < 1:
            raise ValueError(f"num_envs={num_envs} must be at least 1")
        if max_steps < 1:
            raise ValueError(f"max_steps={max_steps} must be at least 1")
        if not 0 <= history <= MAX_HISTORY:
            raise ValueError(f"history={history}: from 0 to {MAX_HISTORY} past observations in the prompt")
        super().__init__(device=device, batch_size=torch.Size([num_envs]))
        self.pool, self.catalogue, self.split = pool, catalogue, split
        self.games = pool.games(split)  # checked against the manifest: a damaged game is refused here
        self.pool_identity = pool.identity()  # both splits: the evaluation's held-out games too
        self.quests = catalogue.quest_of[split]
        # "train_and_rooms": half the episodes go to a room of their game instead of its quest
        self.rooms = catalogue.rooms_of[split] if room_goals else None
        self.num_envs, self.max_steps, self.history, self.text = num_envs, max_steps, history, text
        self.room_take_goals = room_take_goals
        self.max_commands, self.text_bytes, self.command_bytes = max_commands, text_bytes, command_bytes
        self._infos = textworld.EnvInfos(
            admissible_commands=True, facts=True, won=True, lost=True, description=True, inventory=True
        )
        self._started: dict[int, list] = {}  # game index -> started games not in use
        self._running: list = [None] * num_envs
        self._episodes = [[0, 0] for _ in range(num_envs)]  # [game index, goal id]
        self._actions: list[list[str]] = [[] for _ in range(num_envs)]  # the commands since the reset
        self._reported: list[set[int]] = [set() for _ in range(num_envs)]
        self._achieved: list[list[int]] = [[] for _ in range(num_envs)]
        self._success = np.zeros(num_envs, dtype=bool)
        self._over = np.zeros(num_envs, dtype=bool)  # won or lost: the game cannot go on
        self._observation_text = [""] * num_envs
        self._inventory_text = [""] * num_envs
        self._commands: list[list[str]] = [[] for _ in range(num_envs)]
        self._past_observations = np.zeros((num_envs, history, text_bytes), dtype=np.uint8)
        self._past_actions = np.zeros((num_envs, history, command_bytes), dtype=np.uint8)
        self._warned: set[str] = set()
        self._make_specs()
        self.set_seed(seed)

    def _make_specs(self) -> None:
        B, A, K, G, dev = self.num_envs, self.max_commands, MAX_REPORTS, len(self.catalogue), self.device
        byte = dict(low=0, high=255, dtype=torch.uint8, device=dev)
        self.observation_spec = Composite(
            action_mask=Binary(n=A, shape=(B, A), dtype=torch.bool, device=dev),
            goal_id=Categorical(G, shape=(B,), dtype=torch.int64, device=dev),
            observation=Bounded(shape=(B, self.text_bytes), **byte),
            inventory=Bounded(shape=(B, self.command_bytes * 4), **byte),
            commands=Bounded(shape=(B, A, self.command_bytes), **byte),
            achieved_goal_ids=Bounded(low=-1, high=G - 1, shape=(B, K), dtype=torch.int64, device=dev),
            achieved_goal_count=Bounded(low=0, high=K, shape=(B,), dtype=torch.int64, device=dev),
            success=Categorical(2, shape=(B,), dtype=torch.bool, device=dev),
            game_over=Categorical(2, shape=(B,), dtype=torch.bool, device=dev),
            shape=(B,),
            device=dev,
        )
        if self.history:
            H = self.history
            self.observation_spec[HISTORY_KEYS[0]] = Bounded(shape=(B, H, self.text_bytes), **byte)
            self.observation_spec[HISTORY_KEYS[1]] = Bounded(shape=(B, H, self.command_bytes), **byte)
        if self.text:
            examples = {"prompt": "Goal of the agent: take the coin", "actions": ["look"], "goal": "take the coin"}
            for key, example in {**examples, "achieved_goals": []}.items():
                self.observation_spec[key] = NonTensor(shape=(B,), example_data=example, device=dev)
        self.action_spec = Categorical(A, shape=(B,), dtype=torch.int64, device=dev)
        self.reward_spec = Bounded(low=0.0, high=1.0, shape=(B, 1), dtype=torch.float32, device=dev)
        done = Categorical(2, shape=(B, 1), dtype=torch.bool, device=dev)
        self.done_spec = Composite(done=done, terminated=done.clone(), truncated=done.clone(), shape=(B,), device=dev)

    # ------------------------------------------------------------------ games
    def _start(self, game: int):
        """A started game ``game`` not in use (kept from an earlier episode, or started now)."""
        import textworld

        idle = self._started.setdefault(game, [])
        if idle:
            return idle.pop()
        try:
            with warnings.catch_warnings():  # Jericho's score detection: TextWorld tracks the game's state itself
                warnings.filterwarnings("ignore", message=".*is not fully supported", category=UserWarning)
                return textworld.start(str(self.games[game]), self._infos)
        except Exception as error:  # noqa: BLE001 - Jericho refuses a damaged story file in many ways
            raise GameFileError(
                f"TextWorld could not start the game {self.games[game]} ({type(error).__name__}: {error}): "
                f"delete it and run {self.pool.build_command()}"
            ) from None

    def close(self, *args, **kwargs):
        for env in [e for games in self._started.values() for e in games] + [e for e in self._running if e]:
            env.close()
        self._started, self._running = {}, [None] * self.num_envs
        return super().close(*args, **kwargs)

    # ------------------------------------------------------------------ EnvBase API
    def _set_seed(self, seed: int | None) -> None:
        self.seed_value = seed
        self.rng = np.random.default_rng(seed)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        reset = np.ones(self.num_envs, dtype=bool)
        if tensordict is not None and "_reset" in tensordict.keys():
            reset = tensordict.get("_reset").reshape(self.num_envs).cpu().numpy()
        for b in np.flatnonzero(reset):
            game = int(self.rng.integers(len(self.games)))
            self._reset_one(int(b), game, self.quests[game] if self.rooms is None else None)
        return self.observation()

    def _reset_one(self, b: int, game: int, goal_id: int | None) -> None:
        """Starts game ``game`` in sub-environment ``b`` with goal ``goal_id`` (``None``: drawn, the
        quest or one of the game's rooms the player is not in)."""
        if self._running[b] is not None:
            self._started.setdefault(self._episodes[b][0], []).append(self._running[b])
        self._running[b] = env = self._start(game)
        state = env.reset()
        self._reported[b] = self.catalogue.reported(state.facts, self.room_take_goals)
        if goal_id is None:
            rooms = [g for g in self.rooms[game] if g not in self._reported[b]]
            goal_id = self.quests[game]
            if rooms and self.rng.random() >= QUEST_SHARE:
                goal_id = rooms[int(self.rng.integers(len(rooms)))]
        self._episodes[b], self._actions[b] = [game, int(goal_id)], []
        self._achieved[b], self._success[b], self._over[b] = [], False, False
        self._past_observations[b], self._past_actions[b] = 0, 0
        self._read(b, state, clean(state.description))

    def _read(self, b: int, state, observation: str) -> None:
        """The texts of a game state: the observation, the inventory and the admissible commands."""
        description = clean(state.description)
        if description and description not in observation:  # "inventory", "take ..." show no room
            observation = f"{observation} {description}"
        self._observation_text[b] = self._fit(observation, self.text_bytes, "observation")
        self._inventory_text[b] = self._fit(clean(state.inventory), self.command_bytes * 4, "inventory")
        commands = list(state.admissible_commands)
        if len(commands) > self.max_commands:
            self._warn_once(
                "commands",
                f"{len(commands)} admissible commands, more than max_commands={self.max_commands}: the first are kept",
            )
            commands = commands[: self.max_commands]
        self._commands[b] = [self._fit(c, self.command_bytes, "command") for c in commands]

    def _fit(self, text: str, width: int, what: str) -> str:
        if len(text.encode("utf-8")) > width:
            self._warn_once(what, f"a TextWorld {what} of {len(text.encode())} bytes is cut to {width}")
            return text.encode("utf-8")[:width].decode("utf-8", errors="ignore")
        return text

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message + " (raise it where the environment is made)", stacklevel=3)

    def _env_state(self) -> dict:
        return {**super()._env_state(), POOL_STATE: self.pool_identity}

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Refuses the state of another pool (:class:`EnvironmentStateError`) before replaying it:
        its game indices would name other games."""
        state_dict = dict(state_dict)
        recorded = state_dict.pop(POOL_STATE, None)
        if recorded is not None:
            self._check_pool(recorded)
        elif "episodes" in state_dict:
            warnings.warn(
                "this checkpoint records no TextWorld pool (written before torchrl_glam recorded it): its games are "
                f"taken to be those of {self.pool.folder(self.split)}, unchecked",
                stacklevel=2,
            )
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def _check_pool(self, recorded) -> None:
        for split, now in self.pool_identity.items():
            then = recorded.get(split) if isinstance(recorded, dict) else None
            if then == now:
                continue
            folder = self.pool.folder(split)
            if isinstance(then, dict) and then.get("folder") not in (None, now["folder"]):
                raise EnvironmentStateError(
                    f"the checkpoint played the TextWorld pool {then['folder']} and this run the pool {folder} "
                    f"(other settings or another TextWorld version): resume with the settings and TextWorld version "
                    f"the run trained on, or start a new run"
                )
            raise EnvironmentStateError(
                f"the {split} games of the TextWorld pool {folder} changed since the checkpoint (other games, another "
                f"order or another number of them than the run's episodes name by index): {OTHER_POOL_FIX}"
            )

    def _replay_episode(self, b: int, episode: list, actions: list) -> None:
        """Game and goal, then the commands since the reset (TextWorld's games are deterministic)."""
        game, goal_id = episode
        if not 0 <= game < len(self.games):
            raise EnvironmentStateError(
                f"game {game} of sub-environment {b} is not in the {len(self.games)} {self.split} games of the "
                f"TextWorld pool {self.pool.folder(self.split)}: {OTHER_POOL_FIX}"
            )
        self.start_episode(b, int(game), int(goal_id))
        for step, command in enumerate(actions, 1):
            if command not in self._commands[b]:  # the game differs from the one the checkpoint played
                raise EnvironmentStateError(
                    f"the checkpoint's command {command!r} (step {step} of sub-environment {b}'s episode) is not "
                    f"admissible in the TextWorld game {self.games[game]}: not the game the checkpoint played; "
                    f"{OTHER_POOL_FIX}"
                )
            self._step_one(b, self._commands[b].index(command))

    def start_episode(self, b: int, game: int, goal_id: int) -> None:
        """Starts sub-environment ``b`` on game ``game`` of the split with goal ``goal_id`` (a
        replay's start)."""
        self._reset_one(b, game, goal_id)

    def _check_action(self, tensordict: TensorDictBase) -> np.ndarray:
        action = tensordict.get("action")
        if action.dtype == torch.bool or action.is_floating_point() or action.is_complex():
            raise TypeError(
                f"'action' has dtype {action.dtype}; pass integer indices into the admissible commands "
                "(one-hot actions: action.argmax(-1))"
            )
        if action.numel() != self.num_envs:
            raise ValueError(f"'action' must be {self.num_envs} indices, got shape {tuple(action.shape)}")
        action = action.reshape(self.num_envs).cpu().numpy()
        for b, a in enumerate(action.tolist()):
            if not 0 <= a < len(self._commands[b]):
                raise ValueError(
                    f"action {a} of sub-environment {b} is masked: it has {len(self._commands[b])} admissible "
                    f"commands ({self._commands[b]}); sample from the legal actions of 'action_mask'"
                )
        return action

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._step_each(self._check_action(tensordict))

    def _step_one(self, b: int, action: int) -> tuple[float, bool, bool]:
        """Steps sub-environment ``b`` with its ``action``-th command: its reward, terminated, truncated."""
        command = self._commands[b][action]
        if self.history:  # the observation being left and the command taken, last in the history
            self._past_observations[b] = np.roll(self._past_observations[b], -1, axis=0)
            self._past_actions[b] = np.roll(self._past_actions[b], -1, axis=0)
            self._past_observations[b, -1] = encode([self._observation_text[b]], self.text_bytes)[0]
            self._past_actions[b, -1] = encode([command], self.command_bytes)[0]
        state, _, _ = self._running[b].step(command)
        self._actions[b].append(command)
        self._read(b, state, clean(state.feedback))
        now = self.catalogue.reported(state.facts, self.room_take_goals)
        if state.won:  # TextWorld's own quest tracking decides the game's quest
            now.add(self._quest(b))
        achieved = sorted(now - self._reported[b])
        if len(achieved) > MAX_REPORTS:
            raise RuntimeError(f"{len(achieved)} goals reported at one step, more than MAX_REPORTS={MAX_REPORTS}")
        self._reported[b] |= now
        self._achieved[b] = achieved
        goal = self._episodes[b][1]
        self._success[b] = success = goal in achieved
        self._over[b] = bool(state.won or state.lost)
        terminated = success or self._over[b]
        truncated = not terminated and len(self._actions[b]) >= self.max_steps
        return float(success), terminated, truncated

    def _quest(self, b: int) -> int:
        return self.quests[self._episodes[b][0]]

    # ------------------------------------------------------------------ output
    def _observation(self) -> TensorDict:
        B, A = self.num_envs, self.max_commands
        ids = np.full((B, MAX_REPORTS), -1, dtype=np.int64)
        for b, achieved in enumerate(self._achieved):
            ids[b, : len(achieved)] = achieved
        commands = np.zeros((B, A, self.command_bytes), dtype=np.uint8)
        for b, listed in enumerate(self._commands):
            if listed:
                commands[b, : len(listed)] = encode(listed, self.command_bytes)
        state = {
            "goal_id": torch.tensor([e[1] for e in self._episodes], dtype=torch.int64),
            "observation": torch.from_numpy(encode(self._observation_text, self.text_bytes)),
            "inventory": torch.from_numpy(encode(self._inventory_text, self.command_bytes * 4)),
            "commands": torch.from_numpy(commands),
            GAME_OVER_KEY: torch.from_numpy(self._over.copy()),
        }
        if self.history:
            state[HISTORY_KEYS[0]] = torch.from_numpy(self._past_observations.copy())
            state[HISTORY_KEYS[1]] = torch.from_numpy(self._past_actions.copy())
        out = TensorDict(
            {
                **state,
                "action_mask": torch.from_numpy(commands[:, :, 0] != 0),
                "achieved_goal_ids": torch.from_numpy(ids),
                "achieved_goal_count": torch.tensor([len(a) for a in self._achieved], dtype=torch.int64),
                "success": torch.from_numpy(self._success.copy()),
            },
            batch_size=self.batch_size,
            device=self.device,
        )
        if self.text:
            prompts, actions = render_batch(state, self.catalogue.goals, self.history)
            goals = self.catalogue.goals
            out.set("prompt", _text(prompts, self.device))
            out.set("actions", _text(actions, self.device))
            out.set("goal", _text([goals[e[1]] for e in self._episodes], self.device))
            out.set("achieved_goals", _text([[goals[g] for g in a] for a in self._achieved], self.device))
        self.action_spec.update_mask(out["action_mask"])
        return out


__all__ = ["TextWorldEnv"]
