"""Issue 43, items 3 and 9: a checkpoint changed after it was written is never trained on; a
checkpoint without a digest (0.1.0's) still loads, for its layout's refusal to name the version; one
with 0.2's digest is refused naming the version; a full disk and a torch file that is not a
checkpoint are named plainly."""

import errno
import os
import subprocess
import warnings

import pytest
import torch
from reliability_helpers import PYTHON, subprocess_env

from torchrl_glam.training import checkpoint as ckpt


def _flip_a_byte_in(path, inside: bytes):
    data = bytearray(path.read_bytes())
    at = data.index(inside) + len(inside) // 2
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _state(step):
    return {"step": step, "optimizer": {"exp_avg": torch.full((4096,), 0.25)}}


def test_a_flipped_byte_is_caught_and_the_previous_checkpoint_used(tmp_path):
    ckpt.save_checkpoint(_state(1), tmp_path)
    ckpt.save_checkpoint(_state(2), tmp_path)
    path = tmp_path / "checkpoint.pt"
    _flip_a_byte_in(path, torch.full((4096,), 0.25).numpy().tobytes())  # inside the tensor's bytes
    with pytest.warns(UserWarning, match="checkpoint.pt is corrupted.*integrity"):
        state = ckpt.load_checkpoint(tmp_path)
    assert state["step"] == 1 and torch.equal(state["optimizer"]["exp_avg"], torch.full((4096,), 0.25))
    (tmp_path / "checkpoint.prev.pt").unlink()
    with pytest.raises(ckpt.CheckpointError, match=rf"{path} is corrupted.*new --run-dir"):
        ckpt.load_checkpoint(tmp_path)


def test_a_checkpoint_without_a_digest_still_loads(tmp_path):
    torch.save({"step": 7, "x": torch.arange(3)}, tmp_path / "checkpoint.pt")  # an older version's file
    state = ckpt.load_checkpoint(tmp_path)
    assert state["step"] == 7 and ckpt.DIGEST_KEY not in state


def test_a_torch_file_that_is_not_a_checkpoint_is_named(tmp_path):
    torch.save(torch.zeros(3), tmp_path / "checkpoint.pt")
    with pytest.raises(ckpt.CheckpointError, match=r"checkpoint.pt holds a Tensor, not a checkpoint"):
        ckpt.load_checkpoint(tmp_path)


def test_a_full_disk_says_so_and_names_the_file(tmp_path, monkeypatch):
    def full_disk(obj, f):
        raise RuntimeError(
            "[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0: "
            "PytorchStreamWriter failed writing file data/0: file write failed; "
            "No space left on device"
        )

    ckpt.save_checkpoint(_state(1), tmp_path)
    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match=rf"No space left on device while writing {tmp_path / 'checkpoint.pt'}") as err:
        ckpt.save_checkpoint(_state(2), tmp_path)
    assert err.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert ckpt.load_checkpoint(tmp_path)["step"] == 1  # the previous checkpoint is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]  # no temporary left


# Issue 69, item 1: a checkpoint the run itself wrote must pass its own check, whatever the
# process that reads it. Playground's partner memory holds sets (sequential goals reported), whose
# iteration order after unpickling can differ from the order they were hashed in.
def _set_reordered_by_pickling():
    import pickle

    reported = set()
    for goal in (36, 34, 4, 40, 5):  # as the partner reports them, one by one
        reported.add(goal)
    unpickled = pickle.loads(pickle.dumps(reported))
    assert unpickled == reported
    assert list(unpickled) != list(reported), "this Python orders these sets alike: pick others"
    return reported


def test_a_checkpoint_holding_a_set_reordered_by_pickling_passes_its_own_check(tmp_path):
    reported = _set_reordered_by_pickling()
    state = {"env": {"rules": {"_sequential_done": [reported, set(), {3}]}}, "x": torch.arange(4)}
    ckpt.save_checkpoint(state, tmp_path)
    ckpt.save_checkpoint(state, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the previous checkpoint, no warning at all
        loaded = ckpt.load_checkpoint(tmp_path)
    assert loaded["env"]["rules"]["_sequential_done"] == [{36, 34, 4, 40, 5}, set(), {3}]


def test_the_digest_is_the_same_in_any_process(tmp_path):
    """Sets of strings iterate in an order that depends on the process's hash seed, dicts in the
    order they were filled: neither changes the digest of the same content."""
    script = (
        "import sys, torch\n"
        "from torchrl_glam.training.checkpoint import content_digest\n"
        "state = {'names': {'apple', 'tree', 'water', 'grow', 'red', 'blue'}, 'frozen': frozenset({'a', 'bb'}),\n"
        "         'order': dict(sorted({'b': 1, 'a': 2.5, 'c': None}.items(), reverse=sys.argv[1] == '1')),\n"
        "         'x': torch.arange(6, dtype=torch.bfloat16).reshape(2, 3), 'size': torch.Size([2, 3])}\n"
        "print(content_digest(state))\n"
    )
    digests = {
        subprocess.run(
            [PYTHON, "-c", script, str(seed % 2)],
            env=subprocess_env(PYTHONHASHSEED=str(seed)),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in range(4)
    }
    assert len(digests) == 1, digests


def test_the_digest_tells_apart_what_repr_confused():
    # values that the former repr-based digest hashed alike, or that differ only by type
    pairs = [
        ({"a": 1}, {"a": True}),
        ({"a": 1}, {"a": 1.0}),
        ({"a": "1"}, {"a": 1}),
        ([1, 2], (1, 2)),
        ({"a": torch.zeros(2)}, {"a": torch.zeros(2, dtype=torch.float64)}),
        ({"a": torch.zeros(4)}, {"a": torch.zeros(2, 2)}),
        ({"a": 0.1}, {"a": 0.1 + 1e-17 * 2}),
        ({"a": -0.0}, {"a": 0.0}),
        ({1: "x"}, {"1": "x"}),
    ]
    for left, right in pairs:
        assert ckpt.content_digest(left) != ckpt.content_digest(right), (left, right)


def test_a_value_a_checkpoint_cannot_hold_is_refused_when_saving(tmp_path):
    class Opaque:
        pass

    with pytest.raises(TypeError, match=r"state\['loss'\]\['thing'\] holds a Opaque"):
        ckpt.save_checkpoint({"loss": {"thing": Opaque()}}, tmp_path)
    assert not any(tmp_path.iterdir())  # nothing written, no temporary left


def test_a_checkpoint_of_0_2_is_refused_naming_the_version_without_falling_back(tmp_path):
    # 0.2's digest was a function of sets' iteration order: such a file cannot be verified
    ckpt.save_checkpoint(_state(1), tmp_path)
    ckpt.save_checkpoint(_state(2), tmp_path)  # a readable previous checkpoint: not used either
    torch.save({"step": 3, "content_sha256": "0" * 64}, tmp_path / "checkpoint.pt")
    refusal = r"checkpoint.pt was written by torchrl_glam 0\.2 \(its digest content_sha256\).*fresh --run-dir"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning
        with pytest.raises(ckpt.CheckpointVersionError, match=refusal):
            ckpt.load_checkpoint(tmp_path)
        with pytest.raises(ckpt.CheckpointVersionError, match=refusal):
            ckpt.read_checkpoint(tmp_path / "checkpoint.pt")


@pytest.mark.parametrize("code", [errno.EFBIG, errno.EDQUOT, errno.ENOSPC])
def test_a_write_that_fails_for_space_keeps_the_previous_checkpoint(tmp_path, monkeypatch, code):
    def failing(obj, f):
        raise OSError(code, os.strerror(code))

    ckpt.save_checkpoint(_state(1), tmp_path)
    monkeypatch.setattr(torch, "save", failing)
    says = rf"{os.strerror(code)} while writing .*checkpoint.pt.*previous checkpoint is intact"
    with pytest.raises(OSError, match=says):
        ckpt.save_checkpoint(_state(2), tmp_path)
    monkeypatch.undo()
    assert ckpt.load_checkpoint(tmp_path)["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]


def test_both_checkpoints_damaged_names_both_and_what_to_do(tmp_path):
    ckpt.save_checkpoint(_state(1), tmp_path)
    ckpt.save_checkpoint(_state(2), tmp_path)
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        _flip_a_byte_in(tmp_path / name, torch.full((4096,), 0.25).numpy().tobytes())
    with pytest.raises(
        ckpt.CheckpointError,
        match=r"both checkpoints.*checkpoint.pt is corrupted.*checkpoint.prev.pt is corrupted.*new --run-dir",
    ):
        ckpt.load_checkpoint(tmp_path)
