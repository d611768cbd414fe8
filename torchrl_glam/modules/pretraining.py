"""Self-supervised pretraining of the offline tiny model on transcripts of random play.

SAC-GLAM fine-tunes a *pretrained* LLM (Flan-T5): its prior knows the words of the task (a cat is
an animal, water is a supply, "Go to" moves) and gives every candidate a sensible probability. No
weights can be downloaded here, so this module gives the offline tiny model a stand-in for that
prior, learned from the environment's own language and nothing else:

* **data**: transcripts of a *uniformly random* policy in Playground-Text (simplified and full
  scenes, half each), generated on the fly. The goal line of each prompt is the episode's sampled
  goal, which the random actions ignore. No successful, relabeled or oracle behaviour is used.
* **objective**: given the prompt, predict the transcript's continuation: the random action that
  was taken, then what followed it, in the prompt's own words::

      prompt:  Goal: Grasp any animal / You see: red cat, blue water, green rose / ... / Action:
      target:  Go to red cat : You are on: red cat , You are holding: nothing , You have grown:
               nothing : nothing

  and after a Grasp on the red cat the last field lists the social partner's reports ("Grasp red
  cat, Grasp any animal, Grasp red animal, ..."). Predicting the random action teaches a prior over
  candidates that ignores their length in tokens (with summed log-probs a random-init model gives
  the 1-token "Grasp" ~66^3 the probability of a 4-token "Go to red cat"; after the default 600
  steps the model does not copy object names yet, so mean-normalised scores are the near-uniform
  ones). Predicting what follows teaches the dynamics and the descriptions (what an animal is,
  what water grows) into the hidden state at the action's last token, the critic's input.
* **budget**: ``steps`` Adam updates of ``batch_size`` transcripts (defaults: 600 x 128, i.e.
  77k transcripts, about 10 minutes on one CPU core for the tiny T5). Every agent of a comparison
  starts from the same pretrained weights.

Command line (writes a model directory that ``LLMConfig(name_or_path=DIR)`` loads)::

    python -m torchrl_glam.modules.pretraining --out DIR [--kind t5|llama] [--steps 3000]

:func:`default_pretrained_model_path` builds it once into the cache (like the random-init one).
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from torchrl_glam.modules.offline import (
    ModelKind,
    build_into_cache,
    cache_root,
    default_tiny_model_path,
    save_model_and_tokenizer,
)

#: Bump when the data, objective or defaults below change, so stale cached builds are not reused.
PRETRAINING_VERSION = 1
DEFAULT_STEPS = 600
DEFAULT_BATCH_SIZE = 128
DEFAULT_LR = 1e-3


class RandomPlayTranscripts:
    """An endless stream of (prompt, continuation) pairs from a uniformly random policy.

    Half of the environments play the simplified task set (3 objects), half the training set
    (6 objects), so the model sees both scene sizes.
    """

    def __init__(self, num_envs: int = 64, seed: int = 0, max_steps: int = 10) -> None:
        from torchrl_glam.envs import PlaygroundTextEnv

        half = max(num_envs // 2, 1)
        self.envs = [
            PlaygroundTextEnv(num_envs=half, goals=goals, max_steps=max_steps, seed=seed + i, text=False)
            for i, goals in enumerate(("simplified", "train"))
        ]
        self.catalogue = self.envs[0].catalogue
        self.tds = [env.reset() for env in self.envs]
        self.generator = torch.Generator().manual_seed(seed)

    def _step(self, index: int) -> tuple[list[str], list[str]]:
        from torchrl_glam.envs import render_batch
        from torchrl_glam.envs.vocabulary import OBJECT_NAMES

        env, td = self.envs[index], self.tds[index]
        mask = td["action_mask"]
        action = torch.multinomial(mask.float(), 1, generator=self.generator).squeeze(-1)
        td["action"] = action
        prompts, actions = render_batch(td["goal_id"], td["objects"], td["agent_on"], td["held"], td["grown"],
                                        self.catalogue)
        step, self.tds[index] = env.step_and_maybe_reset(td)
        nxt = step["next"]
        goals = self.catalogue.goals
        targets = []
        for b, prompt in enumerate(prompts):
            names = [OBJECT_NAMES[i] for i in td["objects"][b].tolist()]
            on, held = int(nxt["agent_on"][b]), int(nxt["held"][b])
            grown = [n for n, g in zip(names, nxt["grown"][b].tolist()) if g]
            reports = [goals[g] for g in nxt["achieved_goal_ids"][b, : int(nxt["achieved_goal_count"][b])].tolist()]
            chosen = actions[b][int(action[b])]
            targets.append(
                f"{chosen} : You are on: {names[on] if on >= 0 else 'nothing'} , "
                f"You are holding: {names[held] if held >= 0 else 'nothing'} , "
                f"You have grown: {', '.join(grown) if grown else 'nothing'} : "
                f"{', '.join(reports) if reports else 'nothing'}"
            )
        return prompts, targets

    def batch(self, size: int) -> tuple[list[str], list[str]]:
        prompts, targets = [], []
        while len(prompts) < size:
            for index in range(len(self.envs)):
                p, t = self._step(index)
                prompts += p
                targets += t
        order = torch.randperm(len(prompts), generator=self.generator)[:size].tolist()
        return [prompts[i] for i in order], [targets[i] for i in order]


def _lm_batch(tokenizer, prompts: list[str], targets: list[str], is_encoder_decoder: bool) -> dict:
    """Model inputs whose loss is the log-likelihood of the targets given the prompts."""
    if is_encoder_decoder:
        enc = tokenizer(prompts, padding=True, return_tensors="pt")
        labels = tokenizer(targets, padding=True, return_tensors="pt")["input_ids"]  # ends with </s>
        labels[labels == tokenizer.pad_token_id] = -100
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "labels": labels}
    # decoder-only: one right-padded sequence per pair, loss on the continuation tokens only
    prompt_ids = tokenizer(prompts)["input_ids"]  # with <s>
    target_ids = tokenizer(targets, add_special_tokens=False)["input_ids"]
    rows = [p + t + [tokenizer.eos_token_id] for p, t in zip(prompt_ids, target_ids)]
    width = max(map(len, rows))
    input_ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    labels = torch.full((len(rows), width), -100)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for r, (row, p) in enumerate(zip(rows, prompt_ids)):
        input_ids[r, : len(row)] = torch.tensor(row)
        attention[r, : len(row)] = 1
        labels[r, len(p): len(row)] = torch.tensor(row[len(p):])
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def pretrain(
    out: str | os.PathLike,
    start_from: str | os.PathLike | None = None,
    kind: ModelKind = "t5",
    steps: int = DEFAULT_STEPS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    lr: float = DEFAULT_LR,
    seed: int = 0,
    log_every: int = 250,
) -> Path:
    """Pretrain ``start_from`` (default: the random-init tiny model of ``kind``) on random-play
    transcripts and write the result to ``out``; returns ``out``. See the module docstring."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    if steps < 1 or batch_size < 1 or lr <= 0:
        raise ValueError(f"steps={steps}, batch_size={batch_size} and lr={lr} must be positive")
    source = Path(start_from) if start_from is not None else default_tiny_model_path(kind)
    tokenizer = AutoTokenizer.from_pretrained(source)
    with torch.random.fork_rng(devices=[]):  # leave the caller's RNG streams alone
        torch.manual_seed(seed)
        try:
            model = AutoModelForSeq2SeqLM.from_pretrained(source)
        except ValueError:
            model = AutoModelForCausalLM.from_pretrained(source)
        is_encoder_decoder = bool(model.config.is_encoder_decoder)
        model.train()
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 100))
        data = RandomPlayTranscripts(seed=seed)
        start, running = time.perf_counter(), None
        for step in range(1, steps + 1):
            loss = model(**_lm_batch(tokenizer, *data.batch(batch_size), is_encoder_decoder)).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            running = loss.item() if running is None else 0.98 * running + 0.02 * loss.item()
            if step % log_every == 0 or step == steps:
                print(f"pretraining step {step}/{steps}: loss {running:.3f} ({time.perf_counter() - start:.0f} s)",
                      flush=True)
    out = save_model_and_tokenizer(model, tokenizer, out)
    (out / "pretraining.txt").write_text(
        f"random-play transcripts, version {PRETRAINING_VERSION}: {steps} steps x {batch_size}, "
        f"lr {lr}, seed {seed}, from {source}, {time.perf_counter() - start:.0f} s\n"
    )
    return out


def default_pretrained_model_path(kind: ModelKind = "t5") -> Path:
    """The pretrained offline model, built once into the cache with the default budget (about ten
    minutes on a CPU the first time; concurrent callers are safe, see ``build_into_cache``)."""
    final = cache_root() / f"tiny-{kind}-pretrained-v{PRETRAINING_VERSION}"
    if not (final / "config.json").exists():
        print(f"pretraining the offline tiny {kind} on random-play transcripts into {final} "
              f"({DEFAULT_STEPS} steps, once; python -m torchrl_glam.modules.pretraining does the same)",
              flush=True)
    return build_into_cache(final, lambda directory: pretrain(directory, kind=kind))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory to write the pretrained model to")
    parser.add_argument("--start-from", default=None, help="model directory (default: the random-init tiny model)")
    parser.add_argument("--kind", choices=["t5", "llama"], default="t5")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--lr", type=float, default=DEFAULT_LR)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    path = pretrain(args.out, args.start_from, args.kind, args.steps, args.batch_size, args.lr, args.seed)
    print(f"wrote the pretrained model to {path}; load it with LLMConfig(name_or_path={str(path)!r})")


if __name__ == "__main__":
    main()
