"""Self-supervised pretraining of the offline tiny model on transcripts of random play.

SAC-GLAM fine-tunes a *pretrained* LLM (Flan-T5): its prior knows the words of the task (a cat is
an animal, water is a supply, "Go to" moves) and gives every candidate a sensible probability. No
weights can be downloaded here, so this module gives the offline tiny model a stand-in for that
prior, learned from the environment's own language and nothing else:

* **data**: transcripts of a *uniformly random* policy in Playground-Text (simplified and full
  scenes, half each), generated on the fly. The goal line of each prompt is the episode's sampled
  goal, which the random actions ignore. No successful, relabeled or oracle behaviour is used.
  The ``hindsight`` data (``offline:tiny-t5-hindsight``) replaces half of them by transcripts whose
  goal line is a goal the social partner reported later in the same random episode (HER applied to
  random play, :class:`~torchrl_glam.offline.transcripts.HindsightTranscripts`): still no behaviour
  but the random policy's, and no goal outside the task sets, but the goal now says where the
  random actions went.
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

    python -m torchrl_glam.offline.pretraining [--out DIR] [--kind t5|llama] [--steps 3000]
    python -m torchrl_glam.offline.pretraining --ship   # maintainers: the package's shipped copy

Without ``--out`` it rebuilds the default model into the cache and says where.
:func:`default_pretrained_model_path` returns the copy shipped in the package (see
:mod:`torchrl_glam.offline.shipped`: checked against its manifest, built by ``--ship``) and only
builds into the cache when the package holds none for the current recipe.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from torchrl_glam.envs import DEFAULT_ENVIRONMENT, TextEnvironment, get_environment
from torchrl_glam.offline.cache import build_into_cache, is_main_process
from torchrl_glam.offline.models import (
    DATA,
    DEFAULT_BATCH_SIZE,
    DEFAULT_LR,
    DEFAULT_SEED,
    DEFAULT_STEPS,
    HINDSIGHT_SHARE,
    PRETRAINING_VERSION,
    BuildStopped,
    ModelKind,
    offline_name,
    pretraining_recipe,
)
from torchrl_glam.offline.recipes import recipe_of, vocabulary_environment
from torchrl_glam.offline.shipped import SHIPPED_MODELS, recipe_version, ship
from torchrl_glam.offline.tiny import build_tiny_model, save_model_and_tokenizer
from torchrl_glam.offline.transcripts import HindsightTranscripts, RandomPlayTranscripts
from torchrl_glam.storage import cache_root, make_folder, write_atomic_file

#: Seconds per step of 128 transcripts on one CPU core (tiny T5) on the default environment's
#: transcripts, for the "how long" of the first message; another environment's prompts differ in
#: length, so it gets no figure (its pace follows in the progress lines).
SECONDS_PER_STEP = 1.0
#: In a log file, a progress line at least this often (and every ``log_every`` steps)
PROGRESS_SECONDS = 30.0
#: A resumable build saves its state (weights, optimiser, step) at least this often, and when
#: stopped: a kill or a preemption loses at most this much of it.
CHECKPOINT_SECONDS = 60.0
#: The held-out transcripts of :func:`transcript_loss` (a seed the training stream never uses).
TRANSCRIPT_LOSS_SEED = 12_345
#: A batch of transcripts runs in groups of similar target length, each padded to its own longest
#: rows, of at most this many logits (rows x target tokens x vocabulary) and this many encoder
#: (query, key) pairs (rows x longest prompt², as the scorer's ``modules/length_groups.py``): with
#: TextWorld's 13.6k words a batch's logits alone took ~700 MB and most of a step, half of them on
#: padding. A Playground-Text batch is one group.
GROUP_LOGITS = 1 << 23
GROUP_TOKEN_PAIRS = 1 << 19


#: name -> ``factory(seed, environment)`` of the stream (:func:`register_transcript_stream`).
TRANSCRIPT_STREAMS: dict[str, Callable] = {
    "random": lambda seed, environment: RandomPlayTranscripts(seed=seed, environment=environment),
    "hindsight": lambda seed, environment: HindsightTranscripts(
        seed=seed, hindsight_share=HINDSIGHT_SHARE, environment=environment
    ),
}


def register_transcript_stream(name: str, factory: Callable) -> None:
    """Makes ``factory(seed, environment)`` the pretraining stream of ``name``."""
    TRANSCRIPT_STREAMS[name] = factory


def transcript_stream(
    data: str = "random", seed: int = DEFAULT_SEED, environment: TextEnvironment | None = None
) -> RandomPlayTranscripts:
    """The pretraining data of a name of :data:`DATA` (or of :func:`register_transcript_stream`)."""
    if data not in TRANSCRIPT_STREAMS:
        raise ValueError(f"unknown pretraining data {data!r}; choose one of {DATA}")
    return TRANSCRIPT_STREAMS[data](seed, environment)


def lm_batch(tokenizer, prompts: list[str], targets: list[str], is_encoder_decoder: bool) -> dict:
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
        labels[r, len(p) : len(row)] = torch.tensor(row[len(p) :])
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def transcripts_nll(model, batch: dict, is_encoder_decoder: bool, backward: bool = False) -> float:
    """The mean negative log-likelihood of a :func:`lm_batch`'s target tokens (what
    ``model(**batch).loss`` is), computed in groups of similar length (:data:`GROUP_LOGITS`), each
    group's gradient accumulated with ``backward``: the same value and gradients, up to the order
    of floating-point sums, without computing on the batch's padding."""
    labels, attention = batch["labels"], batch["attention_mask"]
    targets, widths = (labels != -100).sum(1), attention.sum(1)
    # the rows' logits: at each target token (seq2seq), at every token of the row (decoder-only)
    positions = targets if is_encoder_decoder else widths
    total, vocabulary = targets.sum(), model.config.vocab_size

    def fits(rows: int, longest_positions: int, longest_prompt: int) -> bool:
        return rows * longest_positions * vocabulary <= GROUP_LOGITS and rows * longest_prompt**2 <= GROUP_TOKEN_PAIRS

    if fits(len(targets), int(positions.max()), int(widths.max())):
        loss = model(**batch).loss  # one group: the batch as it is
        if backward:
            loss.backward()
        return loss.item()
    order = positions.argsort(descending=True, stable=True)
    value, start = 0.0, 0
    while start < len(order):
        end, longest_positions, longest_prompt = start + 1, int(positions[order[start]]), int(widths[order[start]])
        while end < len(order):
            longer = max(longest_positions, int(positions[order[end]])), max(longest_prompt, int(widths[order[end]]))
            if not fits(end - start + 1, *longer):
                break
            end, (longest_positions, longest_prompt) = end + 1, longer
        rows = order[start:end]
        width = int(widths[rows].max())
        # seq2seq labels are right-padded with -100: trimmed to the group's longest target
        label_width = int(targets[rows].max()) if is_encoder_decoder else width
        group = {
            "input_ids": batch["input_ids"][rows, :width],
            "attention_mask": attention[rows, :width],
            "labels": labels[rows, :label_width],
        }
        loss = model(**group).loss * (targets[rows].sum() / total)
        if backward:
            loss.backward()
        value += loss.item()
        start = end
    return value


def _describe(stream: str | RandomPlayTranscripts) -> str:
    """What a pretraining stream (or its name) is, in words."""
    if stream == "hindsight":
        return f"random-play transcripts, {HINDSIGHT_SHARE:g} of them with hindsight goals"
    return stream.description if isinstance(stream, RandomPlayTranscripts) else "random-play transcripts"


def _progress_message(
    what: str,
    steps: int,
    batch_size: int,
    out,
    why: str | None,
    transcripts: str = "random-play transcripts",
    environment: TextEnvironment | None = None,
) -> str:
    if vocabulary_environment(environment).name != DEFAULT_ENVIRONMENT:
        usually = "the time left follows from its pace"
    else:
        minutes = steps * batch_size / 128 * SECONDS_PER_STEP / 60
        usually = "usually " + (f"about {minutes:.0f} min" if minutes >= 1 else f"about {minutes * 60:.0f} s")
    return (
        f"pretraining {what} on {transcripts} into {out}"
        + (f" ({why})" if why else "")
        + f": {steps} steps of {batch_size} transcripts, {usually} on one CPU core"
    )


def pretrain(
    out: str | os.PathLike,
    start_from: str | os.PathLike | None = None,
    kind: ModelKind = "t5",
    steps: int = DEFAULT_STEPS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    lr: float = DEFAULT_LR,
    seed: int = DEFAULT_SEED,
    log_every: int = 50,
    why: str | None = None,
    data: str | RandomPlayTranscripts = "random",
    environment: TextEnvironment | None = None,
    checkpoint: str | os.PathLike | None = None,
) -> Path:
    """Pretrain ``start_from`` (default: the random-init tiny model of ``kind``, built afresh) on
    random-play transcripts (``data``: a name of :data:`DATA`, or a stream such as
    ``HindsightTranscripts(seed=1, hindsight_share=1.0)`` for a probe) and write the result to ``out``;
    returns ``out``. See the module docstring. ``why`` goes into the one-line message printed before
    it starts. ``environment``: whose transcripts (default Playground-Text; the random-init model is
    then built from its vocabulary).

    Progress: a tqdm bar (steps, loss, time left) on a terminal; in a log file (stderr not a
    terminal) one line every ``log_every`` steps and at least every 30 s; nothing off the main process
    (rank 0).

    Stops and resumes: Ctrl-C or SIGTERM stop it at the end of a step (a second Ctrl-C at once)
    with :class:`~torchrl_glam.offline.models.BuildStopped`. With ``checkpoint`` (a file; the
    cache's builds and the command line give one beside the output) it saves its state there
    every :data:`CHECKPOINT_SECONDS` and when stopped, and a later call with the same settings
    continues from it: it replays the transcripts up to that step (no model work), so the result
    is the uninterrupted build's, bit for bit. The file is removed once the model is written.
    """
    return _pretrain(out, start_from, kind, steps, batch_size, lr, seed, log_every, why, data, environment, checkpoint)[
        0
    ]


def partial_build_path(out: str | os.PathLike) -> Path:
    """Where a build into ``out`` keeps its state while it runs (hidden, beside ``out``)."""
    out = Path(out)
    return out.parent / f".{out.name}.partial.pt"


@contextmanager
def _stop_requests() -> Iterator[threading.Event]:
    """Ctrl-C and SIGTERM set the event (the build stops at the end of its step); a second Ctrl-C
    stops it at once. Signals reach the main thread only: elsewhere the event is never set."""
    requested = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield requested
        return

    def handler(signum, frame):
        if requested.is_set() and signum == signal.SIGINT:
            signal.default_int_handler(signum, frame)
        requested.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield requested
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _build_settings(start_from, kind, steps, batch_size, lr, seed, data, environment) -> str:
    """The settings a saved build state belongs to: a state of other settings is not resumed."""
    settings = {
        "pretraining_version": PRETRAINING_VERSION,
        "start_from": None if start_from is None else str(Path(start_from).resolve()),
        "kind": kind,
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "data": data,
        "environment": vocabulary_environment(environment).name,
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def _load_build_state(path: Path, settings: str) -> dict | None:
    """The saved state of a build of these settings at ``path``, or ``None`` (no file, another
    build's, or unreadable: that build starts afresh and replaces it). Read with
    ``weights_only=True``: tensors and plain data, nothing that runs code."""
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # a file this code did not write whole: start afresh
        print(f"ignoring the unreadable build state {path} ({error}); starting afresh", file=sys.stderr)
        return None
    if state.get("settings") != settings:
        print(f"the build state {path} is of other settings; starting afresh (it is replaced)", file=sys.stderr)
        return None
    return state


def _save_build_state(path: Path, state: dict) -> None:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    fix = f"choose a writable folder for {path.parent}"
    make_folder(path.parent, fix=fix)  # the output's folder is made when the model is written, later
    write_atomic_file(path, buffer.getvalue(), fix=fix)


def _pretrain(
    out,
    start_from,
    kind,
    steps,
    batch_size,
    lr,
    seed,
    log_every,
    why,
    data="random",
    environment: TextEnvironment | None = None,
    checkpoint=None,
) -> tuple[Path, dict]:
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    if steps < 1 or batch_size < 1 or lr <= 0:
        raise ValueError(f"steps={steps}, batch_size={batch_size} and lr={lr} must be positive")
    if isinstance(data, str):
        pretraining_recipe(kind, data=data, environment=environment)  # an unknown name fails here, before any work
    if checkpoint is not None and not isinstance(data, str):
        raise ValueError("a build from a stream object cannot be resumed: give data by name, or no checkpoint")
    main = is_main_process()
    what = f"the tiny {kind} model" if start_from is None else str(start_from)
    if main:
        message = _progress_message(what, steps, batch_size, out, why, _describe(data), environment)
        print(message, file=sys.stderr, flush=True)
    settings = None
    if checkpoint is not None:
        checkpoint = Path(checkpoint)
        settings = _build_settings(start_from, kind, steps, batch_size, lr, seed, data, environment)
    with tempfile.TemporaryDirectory() as scratch, _stop_requests() as stop:
        # from scratch: the random-init model of the recipe, never a cached or shipped copy
        source = (
            Path(start_from)
            if start_from is not None
            else build_tiny_model(Path(scratch) / "init", kind, seed=0, environment=environment)
        )
        tokenizer = AutoTokenizer.from_pretrained(source)
        with torch.random.fork_rng(devices=[]):  # leave the caller's RNG streams alone
            torch.manual_seed(seed)
            try:
                model = AutoModelForSeq2SeqLM.from_pretrained(source)
            except ValueError:
                model = AutoModelForCausalLM.from_pretrained(source)
            is_encoder_decoder = bool(model.config.is_encoder_decoder)
            stream = transcript_stream(data, seed, environment) if isinstance(data, str) else data
            model.train()
            optimizer = torch.optim.Adam(model.parameters(), lr=lr)
            schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 100))
            running, done, seconds_before = None, 0, 0.0
            state = None if checkpoint is None else _load_build_state(checkpoint, settings)
            if state is not None:
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                schedule.load_state_dict(state["schedule"])
                running, done, seconds_before = state["running"], state["step"], state["seconds"]
                if main:
                    print(
                        f"continuing the build from step {done}/{steps} ({checkpoint}): replaying its first "
                        f"{done} batches of transcripts (no model work), so the result is an uninterrupted build's",
                        file=sys.stderr,
                        flush=True,
                    )
                for _ in range(done):
                    stream.batch(batch_size)
                torch.set_rng_state(state["torch_rng"])

            def save(step: int) -> None:
                _save_build_state(
                    checkpoint,
                    {
                        "settings": settings,
                        "step": step,
                        "running": running,
                        "seconds": seconds_before + time.perf_counter() - start,
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "schedule": schedule.state_dict(),
                        "torch_rng": torch.get_rng_state(),
                    },
                )

            start = last_line = last_save = time.perf_counter()
            # tqdm's disable=None: off when stderr is not a terminal (log files get the lines below)
            bar = tqdm(
                total=steps,
                initial=done,
                desc="pretraining",
                unit="step",
                disable=None if main else True,
                dynamic_ncols=True,
            )
            log_lines = main and bar.disable
            with bar:
                for step in range(done + 1, steps + 1):
                    if stop.is_set():
                        _stopped(what, step - 1, steps, checkpoint, save if main else None)
                    optimizer.zero_grad(set_to_none=True)
                    batch = lm_batch(tokenizer, *stream.batch(batch_size), is_encoder_decoder)
                    loss = transcripts_nll(model, batch, is_encoder_decoder, backward=True)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    schedule.step()
                    running = loss if running is None else 0.98 * running + 0.02 * loss
                    bar.set_postfix(loss=f"{running:.3f}", refresh=False)
                    bar.update()
                    now = time.perf_counter()
                    if log_lines and (step % log_every == 0 or step == steps or now - last_line >= PROGRESS_SECONDS):
                        elapsed, last_line = now - start, now
                        print(
                            f"pretraining step {step}/{steps}: loss {running:.3f} ({seconds_before + elapsed:.0f} s, "
                            f"{elapsed / (step - done) * (steps - step):.0f} s left)",
                            file=sys.stderr,
                            flush=True,
                        )
                    if checkpoint is not None and main and step < steps and now - last_save >= CHECKPOINT_SECONDS:
                        save(step)
                        last_save = now
    seconds = seconds_before + time.perf_counter() - start
    out = save_model_and_tokenizer(model, tokenizer, out)
    if checkpoint is not None and main:
        checkpoint.unlink(missing_ok=True)
    origin = "the random-init tiny model (seed 0)" if start_from is None else str(start_from)
    (out / "pretraining.txt").write_text(
        f"{_describe(stream)}, version {PRETRAINING_VERSION}: {steps} steps x {batch_size}, "
        f"lr {lr}, seed {seed}, from {origin}\n"
    )
    return out, {"running_loss": running, "seconds": seconds}


def _stopped(what: str, step: int, steps: int, checkpoint: Path | None, save: Callable | None) -> None:
    """Saves the build's state at ``step`` (where there is a checkpoint and something to save) and
    raises :class:`BuildStopped` saying how it goes on."""
    if checkpoint is not None and step > 0:
        if save is not None:
            save(step)
        raise BuildStopped(
            f"stopped pretraining {what} at step {step}/{steps}; its state is saved in {checkpoint}, and the same "
            "command (or a training run that needs this model) continues from there"
        )
    raise BuildStopped(f"stopped pretraining {what} at step {step}/{steps}; nothing is saved")


def transcript_loss(
    path: str | os.PathLike,
    batches: int = 8,
    batch_size: int = 128,
    seed: int = TRANSCRIPT_LOSS_SEED,
    environment: TextEnvironment | None = None,
) -> float:
    """Mean token negative log-likelihood of the model at ``path`` on fixed random-play transcripts
    that pretraining never sees (their own seed): the quality measure of a pretrained build."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(path)
    except ValueError:
        model = AutoModelForCausalLM.from_pretrained(path)
    model.eval()  # no dropout (the tiny models have none; a loaded one might)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        data = RandomPlayTranscripts(seed=seed, environment=environment)
        is_encoder_decoder = bool(model.config.is_encoder_decoder)
        losses = [
            transcripts_nll(model, lm_batch(tokenizer, *data.batch(batch_size), is_encoder_decoder), is_encoder_decoder)
            for _ in range(batches)
        ]
    return sum(losses) / len(losses)


def transcripts_fingerprint(
    batch_size: int = DEFAULT_BATCH_SIZE,
    seed: int = DEFAULT_SEED,
    data: str = "random",
    environment: TextEnvironment | None = None,
) -> str:
    """sha256 of the first batch of the pretraining stream: it changes when anything that makes the
    data changes (environment dynamics, rendering, the target format), which the recipe's values
    alone cannot see. The manifest records it; a test compares it with the code's."""
    with torch.random.fork_rng(devices=[]):
        prompts, targets = transcript_stream(data, seed, environment).batch(batch_size)
    return hashlib.sha256("\n\0".join(prompts + targets).encode()).hexdigest()


def build_pretrained_into_cache(
    final: Path, kind: ModelKind, data: str, environment: TextEnvironment, why: str
) -> Path:
    """Pretrains the default recipe's model on ``environment``'s transcripts ``data`` into the
    cache folder ``final`` (once: concurrent callers wait for one build; a stopped build continues
    from its saved state) and returns it; ``why`` opens its first message.
    :meth:`~torchrl_glam.offline.resolve.ResolvedModel.build` calls it where the model is missing."""
    return build_into_cache(
        final,
        lambda directory: pretrain(
            directory,
            kind=kind,
            why=f"offline:{final.name}: {why}; once, then cached",
            data=data,
            environment=environment,
            checkpoint=partial_build_path(final),
        ),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default=None, help="directory to write the pretrained model to (default: rebuild the cache's copy)"
    )
    parser.add_argument("--start-from", default=None, help="model directory (default: the random-init tiny model)")
    parser.add_argument("--kind", choices=["t5", "llama"], default="t5")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--lr", type=float, default=DEFAULT_LR)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--data",
        choices=DATA,
        default="random",
        help="the transcripts: random play, or half of it with hindsight goals (offline:tiny-<kind>-hindsight)",
    )
    parser.add_argument(
        "--env",
        default=DEFAULT_ENVIRONMENT,
        help=f"the environment whose transcripts (a registered name; default {DEFAULT_ENVIRONMENT})",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument(
        "--ship",
        action="store_true",
        help="build the default recipe into the package folder with its manifest entry "
        "(maintainers; commit torchrl_glam/offline/weights/ afterwards)",
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    env = get_environment(args.env)  # the command line's name, resolved once
    recipe = pretraining_recipe(args.kind, args.steps, args.batch_size, args.lr, args.seed, args.data, env)
    version = recipe_version(recipe)
    name = offline_name(args.kind, args.data, env)
    if args.ship:
        if args.out or args.start_from or recipe != pretraining_recipe(args.kind, data=args.data, environment=env):
            parser.error(
                "--ship builds the default recipe into the package: no --out, --start-from, "
                "--steps, --batch-size, --lr or --seed"
            )
        if name not in SHIPPED_MODELS:  # before the build, not after it
            parser.error(f"offline:{name} is not one of the shipped models: add it to offline/shipped.py first")
        with tempfile.TemporaryDirectory() as directory:
            built, stats = _pretrain(
                Path(directory) / "model",
                None,
                args.kind,
                args.steps,
                args.batch_size,
                args.lr,
                args.seed,
                50,
                "the copy shipped in the package",
                args.data,
                env,
                cache_root() / f".ship-{name}-{version}.partial.pt",
            )
            path = ship(
                name,
                built,
                {
                    "recipe": recipe,
                    "recipe_version": version,
                    "seed": args.seed,
                    "command": " ".join(
                        ["python -m torchrl_glam.offline.pretraining --ship"]
                        + (["--kind", args.kind] if args.kind != "t5" else [])
                        + (["--data", args.data] if args.data != "random" else [])
                        + ([] if recipe_of(env).unsuffixed else ["--env", env.name])
                    ),
                    "torch_threads": torch.get_num_threads(),
                    "build_seconds": round(stats["seconds"]),
                    "final_running_loss": round(stats["running_loss"], 4),
                    "transcript_loss": round(transcript_loss(built, environment=env), 4),
                    "transcripts_sha256": transcripts_fingerprint(args.batch_size, args.seed, args.data, env),
                },
            )
        print(f"shipped the pretrained model in {path} (commit torchrl_glam/offline/weights/)")
        return
    if args.out is None:
        if args.start_from is not None:
            parser.error("--start-from needs --out")
        out = cache_root() / f"{name}-{version}"
        path = build_into_cache(
            out,
            lambda directory: pretrain(
                directory,
                kind=args.kind,
                steps=args.steps,
                batch_size=args.batch_size,
                lr=args.lr,
                seed=args.seed,
                why="rebuilding the cache's copy",
                data=args.data,
                environment=env,
                checkpoint=partial_build_path(out),
            ),
            rebuild=True,
        )
    else:
        path = pretrain(
            args.out,
            args.start_from,
            args.kind,
            args.steps,
            args.batch_size,
            args.lr,
            args.seed,
            data=args.data,
            environment=env,
            checkpoint=partial_build_path(args.out),
        )
    print(
        f"wrote the pretrained model to {path} (recipe {version}); load it with LLMConfig(name_or_path={str(path)!r})"
    )


def cli(argv: list[str] | None = None) -> int:
    """The command line: a stop (Ctrl-C, SIGTERM) is one line and exit code 3, as for training."""
    try:
        main(argv)
    except BuildStopped as stop:
        print(f"stopped: {stop}", file=sys.stderr)
        return BuildStopped.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(cli())
