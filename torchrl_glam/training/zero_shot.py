"""Zero-shot baseline: any LLM as a policy over a text environment's candidates, before any training.

The paper's learning curves start from the pretrained model's own prior; this measures it. For
every combination of goal set (``simplified``, ``train``, ``held_out``), score normalisation
(``sum``, ``mean``), chat template (off / on, for models that have one) and action choice
(``greedy``: the best-scored legal candidate; ``sampled``: drawn from the softmax over the legal
candidates), one episode runs in each of ``--episodes`` sub-environments with fixed seeds, and a
CSV row gives success overall and per goal type. ``train`` goals are drawn uniformly over goal
types (as in the training scripts' evaluations), so every type is represented.

    python -m torchrl_glam.training.zero_shot --model smollm2-135m --episodes 32 \\
        --out experiments/zero_shot/zero_shot.csv

``--model none`` is the random-init offline tiny T5; any name or path of
:class:`~torchrl_glam.modules.LLMConfig` works (hub names, local folders, ``.gguf`` files,
``offline:tiny-t5-pretrained``, ``smollm2-135m``); ``--model random`` is the uniformly random
policy over legal candidates (the chance level; one row per goal set). ``--env babyai`` runs
another registered environment (its goal sets, e.g. ``--goals train test``; ``--max-steps`` its
time limit, as the training config's ``max_steps``); the offline tiny models then mean that
environment's own (``offline.resolve``). Rows are appended as each setting finishes, so
an interrupted run keeps what it measured; a setting already in the CSV (same label and setting)
is skipped, so rerunning the command resumes it.

With the chat template, the prompt (its trailing whitespace stripped) is the user's message and
the candidate is scored as the beginning of the assistant's reply (the template's generation
prompt ends the prefix).
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from collections.abc import Sequence

import torch

from torchrl_glam.envs import DEFAULT_ENVIRONMENT, TextEnvironment, environment_or_default, get_environment
from torchrl_glam.modules import MASKED_LOGIT, LLMConfig, LLMScorer, load_llm
from torchrl_glam.offline.resolve import resolve
from torchrl_glam.training.evaluation import evaluate

NORMALIZATIONS = ("sum", "mean")
MODES = ("greedy", "sampled")
#: ``--model random``: the uniformly random policy over legal candidates
RANDOM = "random"


_KEY_COLUMNS = ("model", "chat_template", "goals", "normalization", "mode", "tokenization", "episodes", "seed")


def columns(goal_types: Sequence[str]) -> tuple[str, ...]:
    """The CSV's columns for an environment's goal types."""
    return (*_KEY_COLUMNS, "success", *(f"success/{name}" for name in goal_types), "episode_length", "seconds")


class ZeroShotPolicy:
    """Renders the prompts of compact states, scores the candidates and picks an action.

    ``policy(td, greedy=True)`` writes ``td["action"]`` (the ``evaluate`` protocol); ``mode``
    overrides ``greedy``: ``"sampled"`` draws from the softmax over legal candidates with its own
    generator, so a run is reproducible.
    """

    def __init__(
        self,
        scorer: LLMScorer | None,
        mode: str = "greedy",
        chat_template: bool = False,
        seed: int = 0,
        environment: TextEnvironment | None = None,
    ):
        if mode not in MODES + (RANDOM,):
            raise ValueError(f"mode must be one of {MODES + (RANDOM,)}, got {mode!r}")
        if scorer is None and mode != RANDOM:
            raise ValueError(f"mode={mode!r} needs a scorer; only mode='random' plays without one")
        if chat_template and getattr(scorer.tokenizer, "chat_template", None) is None:
            raise ValueError(
                "chat_template=True but the model's tokenizer has no chat template; "
                "use it with instruct models only (e.g. smollm2-135m)"
            )
        self.scorer, self.mode, self.chat_template = scorer, mode, chat_template
        self.environment = environment_or_default(environment)
        self.generator = torch.Generator().manual_seed(seed)

    def prompts(self, prompts: list[str]) -> list[str]:
        if not self.chat_template:
            return prompts
        return [
            self.scorer.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt.rstrip()}], tokenize=False, add_generation_prompt=True
            )
            for prompt in prompts
        ]

    @torch.no_grad()
    def __call__(self, td, greedy: bool = True):
        state = {key: td[key].cpu() for key in self.environment.state_keys}
        if self.mode == RANDOM:  # uniform over the legal candidates, no model
            mask = self.environment.action_mask(state)
            td["action"] = (
                torch.multinomial(mask.float(), 1, generator=self.generator).squeeze(-1).to(td["goal_id"].device)
            )
            return td
        prompts, actions, mask = self.environment.observations(state)
        scores = (
            self.scorer(self.prompts(prompts), actions, mask.to(next(self.scorer.model.parameters()).device))[0]
            .float()
            .cpu()
        )
        logits = scores.masked_fill(~mask, MASKED_LOGIT)
        if self.mode == "greedy":
            action = logits.argmax(-1)
        else:
            action = torch.multinomial(logits.softmax(-1), 1, generator=self.generator).squeeze(-1)
        td["action"] = action.to(td["goal_id"].device)
        return td


def make_zero_shot_env(
    goals: str,
    episodes: int,
    seed: int,
    environment: TextEnvironment | None = None,
    max_steps: int | None = None,
    goal_types: Sequence[str] | None = None,
):
    """One episode per sub-environment; ``train`` goals by type, as the training evaluations draw them;
    ``goal_types``: only those (an environment with the ``goal_types`` option, as the config's)."""
    sampling = "by_type" if goals == "train" else "uniform"
    environment = environment_or_default(environment)
    options = {}
    if goal_types is not None:
        if not any(option.name == "goal_types" and not option.state for option in environment.options):
            raise ValueError(f"environment {environment.name!r} has no goal_types option; leave --goal-types out")
        options["goal_types"] = tuple(goal_types)
    return environment.make_env(
        episodes, seed=seed, goals=goals, max_steps=max_steps, goal_sampling=sampling, **options
    )


def _done_settings(path: str) -> set[tuple]:
    if not os.path.exists(path):
        return set()
    with open(path, newline="") as handle:
        return {
            (
                row["model"],
                row["chat_template"],
                row["goals"],
                row["normalization"],
                row["mode"],
                row["tokenization"],
                row["episodes"],
                row["seed"],
            )
            for row in csv.DictReader(handle)
        }


def run_zero_shot(
    model: str | None,
    out: str,
    label: str | None = None,
    goals: Sequence[str] | None = None,
    normalizations: Sequence[str] = NORMALIZATIONS,
    modes: Sequence[str] = MODES,
    chat_template: str = "auto",
    episodes: int = 32,
    seed: int = 0,
    tokenization: str = "exact",
    dtype: str = "float32",
    device: str = "cpu",
    log=print,
    environment: TextEnvironment | None = None,
    max_steps: int | None = None,
    goal_types: Sequence[str] | None = None,
) -> list[dict]:
    """Evaluates every setting and appends one CSV row per setting to ``out``; returns the new rows.
    ``goals``: goal sets of ``environment`` (default: every one of its ``goal_sets``);
    ``model="random"``: the random policy;
    ``goal_types``: only those goal types (not a column of the CSV: give it a file of its own)."""
    environment = environment_or_default(environment)
    goal_sets = environment.goal_sets
    goals = goal_sets if goals is None else goals
    row_columns = columns(environment.goal_types)
    if model == RANDOM:
        normalizations, modes, chat_template, tokenization = ("",), (RANDOM,), "off", ""
    for name, values, allowed in (
        ("goals", goals, goal_sets),
        ("normalization", normalizations, NORMALIZATIONS),
        ("mode", modes, MODES),
    ):
        if model == RANDOM and name != "goals":
            continue
        bad = [value for value in values if value not in allowed]
        if bad:
            raise ValueError(f"unknown {name} {bad}; choose from {allowed}")
    if chat_template not in ("auto", "off", "on", "both"):
        raise ValueError(f"chat_template must be 'auto', 'off', 'on' or 'both', got {chat_template!r}")
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    label = label or model or "offline:tiny-t5"
    if model == RANDOM:
        llm, has_template = None, False
    else:
        llm = load_llm(LLMConfig(resolve(model, environment).build(), dtype=dtype, device=device))
        has_template = getattr(llm.tokenizer, "chat_template", None) is not None
    if chat_template == "on" and not has_template:
        raise ValueError(f"the tokenizer of {label!r} has no chat template; use --chat-template off")
    templates = {
        "off": [False],
        "on": [True],
        "both": [False, True],
        "auto": [False, True] if has_template else [False],
    }[chat_template]
    if chat_template == "both" and not has_template:
        templates = [False]
    done = _done_settings(out)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    new_rows = []
    for goal_set in goals:
        for normalization in normalizations:
            scorer = (
                None
                if llm is None
                else LLMScorer(
                    llm.model,
                    llm.tokenizer,
                    llm.is_encoder_decoder,
                    normalization=normalization,
                    tokenization=tokenization,
                )
            )
            for template in templates:
                for mode in modes:
                    key = (label, str(template), goal_set, normalization, mode, tokenization, str(episodes), str(seed))
                    if key in done:
                        continue
                    start = time.perf_counter()
                    policy = ZeroShotPolicy(
                        scorer, mode=mode, chat_template=template, seed=seed, environment=environment
                    )
                    env = make_zero_shot_env(goal_set, episodes, seed, environment, max_steps, goal_types)
                    results = evaluate(policy, env, goal_types=environment.goal_types)
                    row = dict(zip(_KEY_COLUMNS, key))
                    row.update(
                        {
                            column: round(results[column], 4) if column in results else ""
                            for column in row_columns[len(_KEY_COLUMNS) : -1]
                        }
                    )
                    row["seconds"] = round(time.perf_counter() - start, 1)
                    _append(out, row, row_columns)
                    new_rows.append(row)
                    log(", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    return new_rows


def _append(path: str, row: dict, fieldnames: Sequence[str]) -> None:
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fieldnames)
        if new:
            writer.writeheader()
        writer.writerow(row)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model",
        required=True,
        help="name or path as in LLMConfig; 'none' for the random-init offline tiny T5; "
        "'random' for the uniformly random policy",
    )
    parser.add_argument("--label", help="the model's name in the CSV (default: --model)")
    parser.add_argument("--out", required=True, help="CSV file; rows are appended, settings already there skipped")
    parser.add_argument("--env", default=DEFAULT_ENVIRONMENT, help="a registered environment")
    parser.add_argument(
        "--goals",
        nargs="+",
        default=None,
        help="goal sets (default: every goal set of the environment)",
    )
    parser.add_argument("--max-steps", type=int, default=None, help="the time limit (default: the environment's)")
    parser.add_argument(
        "--goal-types",
        nargs="+",
        default=None,
        help="only these goal types (BabyAI-Text: e.g. goto pickup), as the config's goal_types",
    )
    parser.add_argument(
        "--history", type=int, default=0, help="past observations in the prompt (BabyAI-Text; as the config's history)"
    )
    parser.add_argument("--normalization", nargs="+", default=list(NORMALIZATIONS), choices=NORMALIZATIONS)
    parser.add_argument("--mode", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument(
        "--chat-template",
        default="auto",
        choices=("auto", "off", "on", "both"),
        help="auto: with and without it where the tokenizer has one, else without",
    )
    parser.add_argument("--episodes", type=int, default=32, help="episodes (sub-environments) per setting")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenization", default="exact", choices=("exact", "separate"))
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    model = None if args.model.lower() == "none" else args.model
    environment = get_environment(args.env)
    if args.history:
        if not any(option.name == "history" and option.state for option in environment.options):
            parser.error(f"environment {environment.name!r} has no history option; leave --history out")
        environment = environment.with_options(history=args.history)
    run_zero_shot(
        model,
        args.out,
        label=args.label,
        goals=args.goals,
        normalizations=args.normalization,
        modes=args.mode,
        chat_template=args.chat_template,
        episodes=args.episodes,
        seed=args.seed,
        tokenization=args.tokenization,
        dtype=args.dtype,
        device=args.device,
        environment=environment,
        max_steps=args.max_steps,
        goal_types=args.goal_types,
    )


if __name__ == "__main__":
    main()
