"""Issue 43, items 3 and 9: a checkpoint changed after it was written is never trained on; a
checkpoint without a digest (written before it existed) still loads; a full disk and a torch file
that is not a checkpoint are named plainly."""

import errno

import pytest
import torch

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
