"""BabyAI-Text's default text is GLAM's, exactly (Carta et al. 2023, flowersteam/Grounding_LLMs_with_online_RL).

The reference below is written from GLAM's rules (the description of its bundled minigrid, the
prompt of its agents), independently of torchrl_glam.envs.babyai.text, and compared with what the
environment renders over many states of random play: several levels, carried objects, open, closed
and locked doors, objects in front of walls, with a history of two past observations.
"""

from collections import Counter

import numpy as np
import pytest
import torch

pytest.importorskip("minigrid", reason="BabyAI-Text needs the babyai extra: pip install 'minigrid>=3.0'")

from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX  # noqa: E402

from torchrl_glam.envs.babyai import BabyAITextEnv  # noqa: E402
from torchrl_glam.envs.babyai.text import ACTIONS, describe_view, render_prompt  # noqa: E402

KIND = {index: name for name, index in OBJECT_TO_IDX.items()}
COLOR = {index: name for name, index in COLOR_TO_IDX.items()}
DOOR_STATE = {0: "open", 1: "closed", 2: "locked"}
AGENT = (3, 6)  # minigrid's egocentric view: the agent at the bottom middle, facing up (y decreasing)
#: the cells of each straight line from the agent, nearest first
LINES = {
    "forward": [(3, y) for y in range(5, -1, -1)],
    "left": [(x, 6) for x in range(2, -1, -1)],
    "right": [(x, 6) for x in range(4, 7)],
}


def _steps(n: int, where: str) -> str:
    return f"{n} step{'s' if n > 1 else ''} {where}"


def glam_sentences(image: np.ndarray, carrying) -> list[str]:
    """GLAM's sentences for one view, from its rules: what is carried; per line (forward, left,
    right) the first cell that is neither unseen nor empty, said only when it is a wall; then
    every cell but unseen, empty and wall ones, column by column, "a <state> <color> door" for a
    door whatever its state ("a open")."""
    out = [f"You carry a {COLOR[int(carrying[1])]} {KIND[int(carrying[0])]}"] if carrying[0] >= 0 else []
    for where, (dx, dy) in (("forward", (0, -1)), ("left", (-1, 0)), ("right", (1, 0))):
        x, y, n = AGENT[0] + dx, AGENT[1] + dy, 1
        while 0 <= x < 7 and 0 <= y < 7:
            kind = KIND[int(image[x, y, 0])]
            if kind not in ("unseen", "empty"):
                if kind == "wall":
                    out.append(f"You see a wall {_steps(n, where)}")
                break
            x, y, n = x + dx, y + dy, n + 1
    for x in range(7):
        for y in range(7):
            kind = KIND[int(image[x, y, 0])]
            if (x, y) == AGENT or kind in ("unseen", "empty", "wall"):
                continue
            right, ahead = x - AGENT[0], AGENT[1] - y
            where = []
            if right:
                where.append(_steps(abs(right), "right" if right > 0 else "left"))
            if ahead:
                where.append(_steps(ahead, "forward"))
            color = COLOR[int(image[x, y, 1])]
            what = f"a {DOOR_STATE[int(image[x, y, 2])]} {color} door" if kind == "door" else f"a {color} {kind}"
            out.append(f"You see {what} {' and '.join(where)}")
    return out


def glam_prompt(goal: str, observations: list[list[str]], actions: list[str]) -> str:
    """GLAM's prompt: the actions line (each action followed by a comma, the last comma dropped),
    " \\n Goal of the agent: ", then each observation of the window numbered from 0 with every
    sentence followed by ", ", and "\\n Action i: " with the action taken after it (none after the
    current one)."""
    head = ("Possible action of the agent:" + "".join(f" {a}," for a in ACTIONS))[:-1]
    parts = [head, f" \n Goal of the agent: {goal}"]
    for i, sentences in enumerate(observations):
        parts.append(f" \n Observation {i}: " + "".join(f"{s}, " for s in sentences) + f"\n Action {i}: ")
        parts.append(actions[i] if i < len(actions) else "")
    return "".join(parts)


def _features(image: np.ndarray, carrying) -> Counter:
    """What a state shows that the text's rules treat apart (the test's coverage)."""
    found = Counter()
    found["carrying"] += carrying[0] >= 0
    doors = image[..., 0] == OBJECT_TO_IDX["door"]
    for state, name in DOOR_STATE.items():
        found[f"{name} door"] += bool((doors & (image[..., 2] == state)).any())
    for cells in (
        [(3, y) for y in range(5, -1, -1)],
        [(x, 6) for x in range(2, -1, -1)],
        [(x, 6) for x in range(4, 7)],
    ):
        kinds = [KIND[int(image[x, y, 0])] for x, y in cells]
        seen = [k for k in kinds if k not in ("unseen", "empty")]
        found["object in front of a wall"] += len(seen) >= 2 and seen[0] != "wall" and "wall" in seen
    return found


@pytest.mark.parametrize("level", ["MixedTrainLocal", "MixedTestLocal", "GoTo", "Pickup", "Open", "PutNextLocal"])
def test_prompts_are_glam_s_over_random_play_with_history(level, steps=100):
    # random legal actions (no-ops masked: more doors opened, objects carried)
    env = BabyAITextEnv(num_envs=8, level=level, seed=0, history=2, mask_noops=True)
    gen = torch.Generator().manual_seed(0)
    td = env.reset()
    windows = [([glam_sentences(td["image"][b].numpy(), td["carrying"][b].tolist())], []) for b in range(8)]
    found, mismatches = Counter(), []
    for _ in range(steps):
        td["action"] = torch.multinomial(td["action_mask"].float(), 1, generator=gen).squeeze(-1)
        step, td = env.step_and_maybe_reset(td)
        for b in range(8):
            image, carrying = td["image"][b].numpy(), td["carrying"][b].tolist()
            seen = glam_sentences(image, carrying)
            if step["next", "done"][b]:  # GLAM clears its queues at the end of an episode
                windows[b] = ([seen], [])
            else:
                observations, actions = windows[b]
                windows[b] = ((observations + [seen])[-3:], (actions + [ACTIONS[int(step["action"][b])]])[-2:])
            found += _features(image, carrying)
            expected = glam_prompt(td["goal"][b], *windows[b])
            if td["prompt"][b] != expected:
                mismatches.append((td["prompt"][b], expected))
    assert not mismatches, f"{len(mismatches)} of {steps * 8} prompts differ from GLAM's, e.g.\n" + "\n".join(
        mismatches[0]
    )
    assert found["object in front of a wall"] > 0  # the rule that differs most often is exercised
    assert found["carrying"] > 0
    if level.startswith("Mixed"):  # the open kind's locked door
        assert found["locked door"] > 0
    if level in ("GoTo", "Pickup", "Open"):  # 3x3 rooms joined by doors
        assert found["closed door"] > 0 and found["open door"] > 0


def _empty_view():
    image = np.zeros((7, 7, 3), dtype=np.uint8)
    image[..., 0] = OBJECT_TO_IDX["empty"]
    return image


@pytest.mark.parametrize("line", ["forward", "left", "right"])
def test_an_object_in_front_of_a_wall_hides_it_at_every_distance(line):
    """Every wall distance, every object before it, unseen or empty cells between, each kind of
    object (a door in each state) and a carried key: GLAM's sentences."""
    cells = LINES[line]
    objects = [("ball", "red", 0), ("box", "yellow", 0), ("key", "blue", 0)]
    objects += [("door", "green", state) for state in DOOR_STATE]
    checked = 0
    for wall in range(1, len(cells) + 1):
        for before in range(wall):  # 0: nothing in front of the wall
            for gap in ("empty", "unseen"):
                for kind, color, state in objects[: 1 if before == 0 else None]:
                    image = _empty_view()
                    image[0, 0, 0] = OBJECT_TO_IDX["unseen"]
                    for x, y in cells[: wall - 1]:
                        image[x, y, 0] = OBJECT_TO_IDX[gap]
                    image[cells[wall - 1]] = (OBJECT_TO_IDX["wall"], COLOR_TO_IDX["grey"], 0)
                    if before:
                        image[cells[before - 1]] = (OBJECT_TO_IDX[kind], COLOR_TO_IDX[color], state)
                    for carrying in ((-1, -1), (OBJECT_TO_IDX["key"], COLOR_TO_IDX["purple"])):
                        expected = glam_sentences(image, carrying)
                        assert describe_view(image, carrying) == expected, (line, wall, before, kind, state)
                        assert ("You see a wall " + _steps(wall, line) in expected) == (before == 0)
                        checked += 1
    assert checked > 50


def test_the_prompt_s_layout_is_glam_s():
    """The issue's example: GLAM's layout, with and without past observations, and an empty view."""
    image = _empty_view()
    image[3, 4] = image[5, 6] = (OBJECT_TO_IDX["wall"], COLOR_TO_IDX["grey"], 0)
    assert render_prompt("go to the purple ball", image, (-1, -1)) == (
        "Possible action of the agent: turn left, turn right, go forward, pick up, drop, toggle \n Goal of the agent: "
        "go to the purple ball \n Observation 0: You see a wall 2 steps forward, You see a wall 2 steps right, \n "
        "Action 0: "
    )
    other = _empty_view()
    other[2, 6] = (OBJECT_TO_IDX["door"], COLOR_TO_IDX["blue"], 0)
    past = [(other, (-1, -1), ACTIONS.index("turn left")), (_empty_view(), (-1, -1), ACTIONS.index("go forward"))]
    assert render_prompt("open the door", image, (-1, -1), past) == glam_prompt(
        "open the door",
        [["You see a open blue door 1 step left"], [], glam_sentences(image, (-1, -1))],
        ["turn left", "go forward"],
    )
    assert " \n Observation 1: \n Action 1: go forward \n Observation 2: You see" in render_prompt(
        "open the door", image, (-1, -1), past
    )
