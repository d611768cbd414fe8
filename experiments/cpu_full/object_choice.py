"""Does the agent go to the object the goal names, where that choice decides the episode? On a run's
final checkpoint, with its greedy actor on 1,024 "train" episodes (goal types uniform, drawn as the
run's own evaluation draws its 128), at two kinds of states:

- ``grasp_first_step``: a grasp goal "Grasp D", first step (on nothing, empty hand). The useful
  actions are "Go to" an object matching D.
- ``grow_holding_supply``: a goal that starts with "Grow D" (grow, grow-then-grasp,
  grow-then-grow), the first state where the agent holds a supply and nothing has grown yet. The
  useful actions are "Go to" a living thing matching D that the held supply feeds.

The first step of a Grow goal is left out: "Go to water" starts a shortest solution of almost
every Grow goal, so a policy that ignores D gets it right. Each row gives the share of those states
where the choice is useful for the actor's greedy action, for the critic's (argmax over the legal
candidates of the smaller Q-head) and for a uniformly random legal action (expected share), and
the share where the actor goes to a supply (water or food) instead of choosing by the goal.

    python experiments/cpu_full/object_choice.py RUN_DIR [RUN_DIR ...]

A pretrained model before any training, first step only (``grasp_first_step``; no critic), on the
first ``--episodes`` of the same episodes (a CPU scores SmolLM2's 32 prompts in ~9 s); also the
best-scored "Go to" alone (``grasp_first_step_go_to_only``: does the prior copy the goal's object?)::

    python experiments/cpu_full/object_choice.py --zero-shot MODEL [--normalization mean] [--chat-template] [--episodes 256]
"""

import argparse
import copy
import sys
import tempfile
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import numpy as np
import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

from torchrl_glam.algorithms.sac_glam.build import load_trained_loss
from torchrl_glam.envs import get_environment
from torchrl_glam.envs.playground import GOAL_TYPES, OBJECT_NAMES, STATE_KEYS
from torchrl_glam.envs.playground.rules import feeds
from torchrl_glam.envs.playground.transforms import STEP_STATE_KEYS
from torchrl_glam.envs.playground.vocabulary import SUPPLIES
from torchrl_glam.modules import SCORES_KEY
from torchrl_glam.training.factories import act, agent_policy, make_env, make_eval_envs

PLAYGROUND = get_environment("playground")  # the environment object the library takes

EPISODES = 1024  # the run's own evaluation episodes are 128 (32 per goal type): more, for a tighter share
CPU_FULL = str(Path(__file__).resolve().parent / "presets" / "sac_glam" / "cpu_full.yaml")  # this study's preset
torch.set_num_threads(1)


def is_supply(object_id: int) -> bool:
    return OBJECT_NAMES[object_id].split(" ")[1] in SUPPLIES


@contextmanager
def as_run_dir(path: str):
    """A run directory, or one checkpoint file (e.g. a copy kept while the run went on) seen as the
    ``checkpoint.pt`` of a temporary run directory: what ``load_checkpoint`` and
    ``load_trained_loss`` read."""
    path = Path(path)
    if path.is_dir():
        yield path
        return
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "checkpoint.pt").symlink_to(path.resolve())
        yield Path(tmp)


def load_run_or_checkpoint(path: str):
    """(config, agent, env steps) of a run directory or of one checkpoint file (``as_run_dir``)."""
    with as_run_dir(path) as run_dir:
        return load_trained_loss(run_dir)


def train_evaluation_episodes(cfg):
    """The run's own "train" evaluation environment reset to its fixed episodes (goal types
    uniform), the first observation, and each episode's goal type [num_envs]."""
    env = make_eval_envs(cfg.replace(eval_sets=["train"]))["train"]
    env.set_seed(env.seed_value)
    td = env.reset()
    return env, td, torch.as_tensor(env.catalogue.goal_type[td["goal_id"].numpy()])


@cache
def _training_grasp_goals(catalogue) -> frozenset[str]:
    """The training goals of type grasp (once per catalogue: the probes draw one per scene)."""
    return frozenset(catalogue.goals[g] for g in catalogue.train_ids if catalogue.type_of(int(g)) == "grasp")


def training_grasp_goal(catalogue, objects: list[int], rng) -> tuple[str, list[int]]:
    """A training grasp goal "Grasp D" that an object of the scene matches, drawn with ``rng`` (a
    ``random.Random``), and the scene positions of the objects it matches (the capacity probes)."""
    goals = sorted(
        {f"Grasp {catalogue.descriptions[d]}" for o in objects for d in catalogue.object_descriptions[o]}
        & _training_grasp_goals(catalogue)
    )
    goal = rng.choice(goals)
    names = catalogue.matching_objects(goal.removeprefix("Grasp "))
    return goal, [i for i, o in enumerate(objects) if OBJECT_NAMES[o] in names]


@torch.no_grad()
def grasp_states(env, size: int, rng, catalogue):
    """``size`` compact states of ``env``'s scenes, each with a training grasp goal that one of its
    objects matches and the agent on one object with an empty hand, half of them on a matching
    object; with their labels (1: the object under the agent matches the goal) and whether that
    object is a supply. The states of the critic's probes (critic/capacity_probe.py,
    critic/success_head_readout.py)."""
    from tensordict import TensorDict

    rows, labels, supply = [], [], []
    while len(rows) < size:
        for objects in env.reset()["objects"].tolist():
            goal, match = training_grasp_goal(catalogue, objects, rng)
            other = [i for i in range(len(objects)) if i not in match]
            positive = not other or (len(rows) % 2 == 0)
            on = rng.choice(match if positive else other)
            rows.append((catalogue.id_of(goal), objects, on))
            labels.append(float(positive))
            supply.append(is_supply(objects[on]))
    rows = rows[:size]
    td = TensorDict(
        {
            "goal_id": torch.tensor([r[0] for r in rows]),
            "objects": torch.tensor([r[1] for r in rows]),
            "agent_on": torch.tensor([r[2] for r in rows]),
            "held": torch.full((size,), -1),
            "grown": torch.zeros(size, len(rows[0][1]), dtype=torch.bool),
        },
        batch_size=[size],
    )
    return td, torch.tensor(labels[:size]), torch.tensor(supply[:size])


def sampled_training_episodes(agent, cfg, num_envs: int = 512):
    """One episode per sub-environment of the agent's sampled policy (as in training) on training
    goals as training samples them, as a padded batch [E, T] assembled as training assembles them
    (``EpisodeAssembler``), on a seed no evaluation uses: what the run's replay receives, for the
    HER analyses."""
    from torchrl_glam.data.episodes import EpisodeAssembler

    torch.manual_seed(0)  # the sampled policy's draws
    env = make_env(cfg, num_envs=num_envs, goals="train", seed=4_242)
    assembler = EpisodeAssembler(num_envs, env.max_steps, environment=cfg.environment)
    td = env.reset()
    finished = []
    for _ in range(env.max_steps):  # every episode ends by max_steps at the latest
        act(agent, td, greedy=False)
        step, td = env.step_and_maybe_reset(td)
        episodes = assembler.add(step)
        if episodes is not None:
            finished.append(episodes)
    return torch.cat(finished), env


def useful_actions(catalogue, goal_id: int, scene: list[int], held: int) -> set[int]:
    """The "Go to" candidates (scene positions) that match the goal's first part: any matching object
    for "Grasp D"; for "Grow D", the matching living things that the held object feeds."""
    verb, description = catalogue.single_part_descriptions[catalogue.parts[goal_id, 0]]
    names = catalogue.matching_objects(description, growable_only=verb == "Grow")
    matching = [i for i, o in enumerate(scene) if OBJECT_NAMES[o] in names]
    if verb == "Grasp":
        return set(matching)
    return {i for i in matching if feeds(np.array([scene[held]]), np.array([scene[i]]))[0]}


@torch.no_grad()
def choices(agent, env):
    """{state kind: [(actor useful, critic useful, random's expected share, actor to a supply), ...]}."""
    env.set_seed(env.seed_value)
    td = env.reset()
    is_grasp = torch.as_tensor(env.catalogue.goal_type[td["goal_id"].numpy()] == GOAL_TYPES.index("grasp"))
    supply = torch.as_tensor([[is_supply(o) for o in scene] for scene in td["objects"].tolist()])
    measured = torch.zeros(env.num_envs, dtype=torch.bool)
    done = torch.zeros(env.num_envs, dtype=torch.bool)
    rows = {"grasp_first_step": [], "grow_holding_supply": []}
    for t in range(env.max_steps):
        held = td["held"]
        holding_supply = (held >= 0) & supply.gather(1, held.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        kind = torch.where(is_grasp, t == 0, holding_supply & ~td["grown"].any(-1))
        kind &= ~measured & ~done
        critic = agent.min_q_values(td).masked_fill(~td["action_mask"], float("-inf")).argmax(-1)
        actor = act(agent, td, greedy=True)["action"]
        for i in kind.nonzero().squeeze(-1).tolist():
            useful = useful_actions(env.catalogue, int(td["goal_id"][i]), td["objects"][i].tolist(), int(held[i]))
            to_supply = int(actor[i]) < supply.shape[1] and bool(supply[i, int(actor[i])])
            rows["grasp_first_step" if is_grasp[i] else "grow_holding_supply"].append(
                (
                    int(actor[i]) in useful,
                    int(critic[i]) in useful,
                    len(useful) / int(td["action_mask"][i].sum()),
                    to_supply,
                )
            )
        measured |= kind
        out = env.step(td)["next"]
        done |= out["done"].squeeze(-1)
        td = out.exclude("reward", "done", "terminated", "truncated")
    return rows


def print_row(run: str, steps: int, kind: str, values: list) -> None:
    shares = (np.mean(x) for x in zip(*values)) if values else (float("nan"),) * 4
    print(f"{run},{steps},{kind},{len(values)}," + ",".join(f"{x:.3f}" for x in shares), flush=True)


@torch.no_grad()
def zero_shot_first_step(model: str, normalization: str, chat_template: bool, episodes: int) -> list:
    """``grasp_first_step`` for a model's greedy choice before any training (critic: nan)."""
    from torchrl_glam.algorithms.sac_glam.config import make_config
    from torchrl_glam.modules import LLMConfig, LLMScorer, load_llm
    from torchrl_glam.training.zero_shot import ZeroShotPolicy

    env = make_eval_envs(make_config(CPU_FULL).replace(eval_sets=["train"], eval_episodes=EPISODES))["train"]
    env.set_seed(env.seed_value)
    td = env.reset()[:episodes]
    grasp = (env.catalogue.goal_type[td["goal_id"].numpy()] == GOAL_TYPES.index("grasp")).nonzero()[0]
    td = td[torch.as_tensor(grasp)]
    llm = load_llm(LLMConfig(model))
    scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder, normalization=normalization)
    policy = ZeroShotPolicy(scorer, chat_template=chat_template)
    prompts, actions, mask = PLAYGROUND.observations(td)
    chunks = range(0, len(prompts), 32)  # scoring all at once takes ~13 GB with SmolLM2
    scores = torch.cat(
        [scorer(policy.prompts(prompts[i : i + 32]), actions[i : i + 32], mask[i : i + 32])[0].float() for i in chunks]
    ).masked_fill(~mask, float("-inf"))
    num_objects = td["objects"].shape[1]
    # the greedy choice, and the best "Go to" alone: does the model's prior copy the goal's object?
    rows = {"grasp_first_step": [], "grasp_first_step_go_to_only": []}
    for kind, choice, legal in (
        ("grasp_first_step", scores.argmax(-1), mask.sum(-1)),
        ("grasp_first_step_go_to_only", scores[:, :num_objects].argmax(-1), mask[:, :num_objects].sum(-1)),
    ):
        for i in range(len(td)):
            scene, k = td["objects"][i].tolist(), int(choice[i])
            useful = useful_actions(env.catalogue, int(td["goal_id"][i]), scene, -1)
            to_supply = k < len(scene) and is_supply(scene[k])
            rows[kind].append((k in useful, float("nan"), len(useful) / int(legal[i]), to_supply))
    return rows


def state_key(td, i):
    return tuple(tuple(td[k][i].flatten().tolist()) for k in STEP_STATE_KEYS)


@torch.no_grad()
@torch.no_grad()
def greedy_choice(agent, td):
    """The actor's mode [B] in an environment tensordict, and its probabilities [B, A] over the
    legal candidates (critic/one_step_from_goal.py, critic/greedy_actions.py); ``act`` keeps only
    the action."""
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        out = agent_policy(agent, return_log_prob=True)(td.select(*STATE_KEYS, "action_mask"))
    return out["action"], out[SCORES_KEY].masked_fill(~td["action_mask"], float("-inf")).softmax(-1)


def one_step_outcomes(env, td):
    """[B, A] booleans: the candidate reaches the goal at once / changes nothing (illegal: False),
    each candidate tried in a copy of ``env`` (``state_dict`` / ``load_state_dict``), which is left
    as it was (critic/one_step_from_goal.py, critic/contrast_probe.py)."""
    saved = copy.deepcopy(env.state_dict())
    num, num_actions = td["action_mask"].shape
    wins = torch.zeros(num, num_actions, dtype=torch.bool)
    no_op = torch.zeros_like(wins)
    before = [state_key(td, i) for i in range(num)]
    for a in range(num_actions):
        env.load_state_dict(copy.deepcopy(saved))
        # an illegal candidate is replaced by a legal one (every env has "Grasp") and not counted
        action = torch.where(td["action_mask"][:, a], torch.tensor(a), torch.tensor(num_actions - 2))
        out = env.step(td.clone().set("action", action))["next"]
        wins[:, a] = td["action_mask"][:, a] & (out["reward"].reshape(-1) > 0)
        no_op[:, a] = td["action_mask"][:, a] & torch.tensor([state_key(out, i) == before[i] for i in range(num)])
    env.load_state_dict(saved)
    return wins, no_op


def train_on_labels(optimizers, loss_at, steps: int) -> None:
    """``steps`` steps of every optimiser on ``loss_at(step)``, a regression on oracle labels (the
    critic's probes: capacity_probe.py, contrast_probe.py), the loss on stderr every 100 steps."""
    for step in range(1, steps + 1):
        loss = loss_at(step)
        for optimizer in optimizers:
            optimizer.zero_grad()
        loss.backward()
        for optimizer in optimizers:
            optimizer.step()
        if step % 100 == 0:
            print(f"step {step}: loss {loss.item():.4f}", file=sys.stderr, flush=True)


if __name__ == "__main__":  # the scripts of hindsight/ and critic/ import the definitions above
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="*", help="SAC-GLAM run directories (their checkpoints), or checkpoint files")
    parser.add_argument("--zero-shot", metavar="MODEL", help="a pretrained model before training instead")
    parser.add_argument("--normalization", default="mean", choices=("sum", "mean"))
    parser.add_argument("--chat-template", action="store_true")
    parser.add_argument("--episodes", type=int, default=256)
    args = parser.parse_args()
    print("run,env_steps,state,states,actor_greedy,critic_greedy,random,actor_to_supply")
    if args.zero_shot:
        label = f"zero_shot:{args.zero_shot}:{args.normalization}" + (":chat" if args.chat_template else "")
        for kind, values in zero_shot_first_step(
            args.zero_shot, args.normalization, args.chat_template, args.episodes
        ).items():
            print_row(label, 0, kind, values)
    for run_dir in args.runs:
        cfg, agent, steps = load_run_or_checkpoint(run_dir)
        env = make_eval_envs(cfg.replace(eval_sets=["train"], eval_episodes=EPISODES))["train"]
        for kind, values in choices(agent, env).items():
            print_row(run_dir, steps, kind, values)
