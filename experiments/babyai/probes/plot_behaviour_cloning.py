"""The behaviour-cloning probes' greedy success on training goals (go to / pick up) against updates,
from the CSVs ``behaviour_cloning.py`` wrote beside this file, with the random policy's level.

    python experiments/babyai/probes/plot_behaviour_cloning.py
"""

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
RANDOM_TRAIN = 0.141  # the uniformly random policy on go to / pick up (experiments/babyai/goto_pickup)
CURVES = {  # file suffix -> label
    "": "tiny T5, pretrained (cpu_babyai's), lr 3e-4",
    "_lr1e-3": "tiny T5, pretrained, lr 1e-3",
    "_width64_random_init": "tiny T5, random init",
    "_width128": "T5 d_model 128, random init",
    "_mlp": "network over the view + goal id",
    "_mlp_goalless": "network over the view only",
    "_mlp_10k_episodes": "network over the view + goal id, 10,000 episodes",
}


def main() -> None:
    fig, ax = plt.subplots(figsize=(8, 5))
    for suffix, label in CURVES.items():
        path = HERE / f"behaviour_cloning{suffix}.csv"
        if not path.exists():
            continue
        rows = list(csv.DictReader(path.open()))
        style = "--" if "network" in label else "-"
        ax.plot([int(r["updates"]) for r in rows], [float(r["train"]) for r in rows], style, marker="o", label=label)
    ax.axhline(RANDOM_TRAIN, color="grey", linestyle=":", label="uniformly random policy")
    ax.set_xlabel("updates of 64 bot steps")
    ax.set_ylabel("greedy success, training goals (128 episodes)")
    ax.set_title("Cloning minigrid's BabyAI bot on go to / pick up (seed 0)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(HERE / "behaviour_cloning.png", dpi=120)


if __name__ == "__main__":
    main()
