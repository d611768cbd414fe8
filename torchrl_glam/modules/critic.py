"""The critic heads of SAC-GLAM (an MLP on the LLM's hidden states; paper §2.2, App. B, App. C)
and PPO-GLAM's value head: the networks a training script builds and hands to its loss, as
TorchRL's losses take theirs (``DiscreteSACLoss(actor_network, qvalue_network, ...)``).

The four designs of App. B are two independent choices:

* ``critic_input="observation_action"``: one Q-value per candidate, from the hidden state at the
  candidate's last token (``"action_hidden"`` [*B, A, H] -> [*B, A]); ``"observation"``: ``A``
  Q-values from the prompt's representation (``"prompt_hidden"`` [*B, H] -> [*B, A]).
* ``critic_backprop=True``: the critic loss trains the shared LLM weights too (its gradient flows
  back through the hidden states); ``False``: it does not. The loss decides it
  (:class:`~torchrl_glam.objectives.sac_glam.SACGLAMLoss`'s ``critic_backprop``), as it decides
  the warm-up's and the actor's detaching: the heads here are plain networks that detach nothing.

The paper found observation-action input with backpropagation best; it is the default.

``dueling=True`` (not in the paper) splits the observation-action head as a dueling network
(Wang et al., 2016): Q(s, a) = V(s) + A(s, a) - mean of A(s, .) over the legal candidates, V read
from ``"prompt_hidden"`` and A from each candidate's ``"action_hidden"``. The state's value and the
candidates' differences are then two outputs: the TD error's share that is about the state goes to
V, and the LLM's candidate states only get gradient for what tells one candidate from another. For
states where a plain head values a winning candidate no higher than one that changes nothing.

The head is deliberately only the MLP: TorchRL's ``DiscreteSACLoss`` makes ``num_qvalue_nets``
copies of the parameters of the network it is given (re-initialising them) plus target copies, so
the LLM must stay outside it (the scorer runs before the loss and writes the hidden states).
"""

from __future__ import annotations

from typing import Literal

from torch import Tensor, nn

from torchrl_glam.modules.scoring import ACTION_HIDDEN_KEY, ACTION_MASK_KEY, PROMPT_HIDDEN_KEY

CriticInput = Literal["observation_action", "observation"]
ACTION_VALUE_KEY = "action_value"
#: PPO-GLAM's value head's output
VALUE_KEY = "state_value"


class CriticHead(nn.Module):
    """MLP from hidden states to one Q-value per candidate; see the module docstring.

    Args:
        hidden_size (int): the LLM's hidden size H.
        critic_input (CriticInput): ``"observation_action"`` or ``"observation"``.
        num_actions (int | None): number of candidates A (required for ``"observation"``, which has A outputs).
        width (int): units of each of the two hidden layers (1024 in the paper, App. C).
    """

    def __init__(
        self,
        hidden_size: int,
        critic_input: CriticInput = "observation_action",
        num_actions: int | None = None,
        width: int = 1024,
        depth: int = 2,
    ):
        super().__init__()
        from torchrl.modules import MLP

        if critic_input not in ("observation_action", "observation"):
            raise ValueError(f"critic_input must be 'observation_action' or 'observation', got {critic_input!r}")
        if critic_input == "observation" and not num_actions:
            raise ValueError("an observation-only critic has one output per candidate: give num_actions")
        self.critic_input = critic_input
        out_features = 1 if critic_input == "observation_action" else num_actions
        self.mlp = MLP(
            in_features=hidden_size, out_features=out_features, num_cells=[width] * depth, activation_class=nn.ReLU
        )

    def forward(self, hidden: Tensor) -> Tensor:
        values = self.mlp(hidden)
        return values.squeeze(-1) if self.critic_input == "observation_action" else values


class DuelingCriticHead(nn.Module):
    """Q(s, a) = V(s) + A(s, a) - mean of A(s, .) over the legal candidates; see the module docstring.

    TorchRL's ``DuelingMlpDQNet`` reads one input and averages A over a fixed action set; here V and
    A read different hidden states (the prompt's, each candidate's) and the mean must skip the
    masked candidates, whose values no policy ever takes.

    Args:
        hidden_size (int): the LLM's hidden size H.
        width, depth (int): each of the two MLPs (value and advantage), as :class:`CriticHead`'s.
    """

    def __init__(self, hidden_size: int, width: int = 1024, depth: int = 2):
        super().__init__()
        from torchrl.modules import MLP

        self.value = MLP(in_features=hidden_size, out_features=1, num_cells=[width] * depth, activation_class=nn.ReLU)
        self.advantage = MLP(
            in_features=hidden_size, out_features=1, num_cells=[width] * depth, activation_class=nn.ReLU
        )

    def forward(self, action_hidden: Tensor, prompt_hidden: Tensor, action_mask: Tensor) -> Tensor:
        advantage = self.advantage(action_hidden).squeeze(-1)  # [*B, A]
        legal = action_mask.to(advantage.dtype)
        mean = (advantage * legal).sum(-1, keepdim=True) / legal.sum(-1, keepdim=True).clamp(min=1)
        return self.value(prompt_hidden) + advantage - mean


def make_critic_heads(
    hidden_size: int,
    critic_input: CriticInput = "observation_action",
    num_actions: int | None = None,
    width: int = 1024,
    depth: int = 2,
    in_key: str | None = None,
    out_key: str = ACTION_VALUE_KEY,
    *,
    dueling: bool = False,
):
    """The Q-value head as a ``TensorDictModule``, ready for ``DiscreteSACLoss``.

    Reads ``"action_hidden"`` (observation-action) or ``"prompt_hidden"`` (observation) and writes
    ``"action_value"`` [*B, A]. Give it to the loss with ``num_qvalue_nets=2``: the loss makes the
    twin heads and their target copies from it (only these small MLPs are ever copied). With
    ``dueling`` (observation-action only) it reads ``"action_hidden"``, ``"prompt_hidden"`` and
    ``"action_mask"`` (:class:`DuelingCriticHead`).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl_glam.modules import make_critic_heads
        >>> head = make_critic_heads(64, width=32)  # the LLM's hidden size, the MLP's width
        >>> head.in_keys, head.out_keys
        (['action_hidden'], ['action_value'])
        >>> td = head(TensorDict({"action_hidden": torch.zeros(2, 5, 64)}, batch_size=[2]))
        >>> td["action_value"].shape  # one Q-value per candidate
        torch.Size([2, 5])
    """
    from tensordict.nn import TensorDictModule

    if dueling:
        if critic_input != "observation_action":
            raise ValueError(
                "a dueling critic splits the observation-action head: use "
                f"critic_input='observation_action', got {critic_input!r}"
            )
        return TensorDictModule(
            DuelingCriticHead(hidden_size, width, depth),
            in_keys=[in_key or ACTION_HIDDEN_KEY, PROMPT_HIDDEN_KEY, ACTION_MASK_KEY],
            out_keys=[out_key],
        )
    head = CriticHead(hidden_size, critic_input, num_actions, width, depth)
    if in_key is None:
        in_key = ACTION_HIDDEN_KEY if critic_input == "observation_action" else PROMPT_HIDDEN_KEY
    return TensorDictModule(head, in_keys=[in_key], out_keys=[out_key])


def make_value_head(hidden_size: int, width: int = 1024, depth: int = 2):
    """GLAM's value head (PPO-GLAM's critic): "prompt_hidden" [*B, H] -> "state_value" [*B, 1],
    an MLP on the prompt's representation, which does not depend on the candidates."""
    from tensordict.nn import TensorDictModule
    from torchrl.modules import MLP

    mlp = MLP(in_features=hidden_size, out_features=1, num_cells=[width] * depth, activation_class=nn.ReLU)
    return TensorDictModule(mlp, in_keys=[PROMPT_HIDDEN_KEY], out_keys=[VALUE_KEY])
