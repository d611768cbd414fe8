"""Times one SAC-GLAM update (the loss's forward, then the LLM's two backward passes as the updater
takes them with ``critic_llm_lr``) on a batch of 128 transitions of a preset's environment, and
compares its loss terms and gradients with those another checkout saved.

    OMP_NUM_THREADS=1 [PYTHONPATH=<checkout>] python experiments/loop_speed/length_groups/update_timing.py \
        --preset cpu_textworld_coin_collector --save OUT.pt [--compare REF.pt] [--repeats 3] [field=value ...]

The batch: 16 environments, 8 steps of the preset's agent acting (seed 0); TextWorld and BabyAI-Text
run with ``model.name=offline:tiny-t5`` (their own pretrained tiny T5s are built on first use,
~1 h; same shape). Prints the wall seconds of ``--repeats`` updates after one warm-up, then with
``--compare`` the largest absolute differences.
"""

from __future__ import annotations

import argparse
import time

import torch

from torchrl_glam.algorithms.sac_glam.build import make_loss, num_actions
from torchrl_glam.algorithms.sac_glam.config import make_config, parse_overrides
from torchrl_glam.training.factories import make_env

TERMS = ("loss_qvalue", "loss_actor", "loss_alpha", "loss_success", "td_error")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--save", required=True)
    parser.add_argument("--compare", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    torch.set_num_threads(1)
    overrides = {} if args.preset == "cpu" else {"model.name": "offline:tiny-t5"}
    overrides.update(parse_overrides(args.overrides))
    cfg = make_config(args.preset, overrides)
    torch.manual_seed(0)
    env = make_env(cfg, num_envs=16)
    loss = make_loss(cfg, num_actions=num_actions(cfg, env))
    env.set_seed(0)
    torch.manual_seed(0)
    batch = env.rollout(8, loss.glam_agent.policy(), break_when_any_done=False).reshape(-1)[:128]
    batch = batch.exclude("prompt", "actions", ("next", "prompt"), ("next", "actions"))
    parameters = loss.llm_parameters()

    def update():
        out = loss(batch)
        critic = torch.autograd.grad(out["loss_qvalue"] + out["loss_success"], parameters, retain_graph=True)
        actor = torch.autograd.grad(out["loss_actor"] + out["loss_alpha"], parameters)
        return out, critic, actor

    out, critic, actor = update()
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        update()
        seconds.append(time.perf_counter() - start)
    print(f"{args.preset} {' '.join(args.overrides)}: update s", " ".join(f"{s:.3f}" for s in seconds))
    result = {"terms": {k: out[k].detach() for k in TERMS}, "critic": list(critic), "actor": list(actor)}
    torch.save(result, args.save)
    if args.compare:
        reference = torch.load(args.compare, weights_only=True)
        for term in TERMS:
            print(f"  {term}: {float((result['terms'][term] - reference['terms'][term]).abs().max()):.2g}")
        for part in ("critic", "actor"):
            largest = max(float(r.abs().max()) for r in reference[part])
            difference = max(float((g - r).abs().max()) for g, r in zip(result[part], reference[part]))
            print(f"  {part} gradients: {difference:.2g} (largest {largest:.2g})")


if __name__ == "__main__":
    main()
