"""The LLM scorer: one forward gives every candidate's log-probability score and the hidden states
the critic reads (SAC-GLAM, paper eq. 1-2 and App. B).

For a prompt p and a candidate action a = (w_1, ..., w_n), the score is
``sum_t log P(w_t | p, w_<t)`` (``normalization="sum"``, the paper) or its mean over the n tokens
(``"mean"``); the actor turns the scores of the candidates into a softmax. The scorer also returns

* ``action_hidden`` [*B, A, H]: the LLM's last hidden state at each candidate's last token (the
  representation of prompt + action, input of the observation-action critic), and
* ``prompt_hidden`` [*B, H]: the representation of the prompt alone (input of the observation-only
  critic): for an encoder-decoder, the decoder's last hidden state at the decoder start token; for a
  decoder-only model, the last hidden state at the prompt's last token.

Tokenisation (``tokenization="exact"``, the default) follows lm-evaluation-harness's
log-likelihood of a continuation: whitespace at the end of the prompt ("...Action: ") moves to the
start of the candidate (" Go to red cat"), so that a subword tokenizer sees the word with its
leading space, as in pretraining, instead of a lone space token followed by a space-less word. For a
decoder-only model the whole text is tokenised once and the candidate's tokens are those after the
prompt's own tokenisation; the prompt's tokens are the shared prefix. Where a BPE merge crosses the
boundary (the whole text's tokens do not start with the prompt's), the harness would drop the merged
characters; the candidate text (with the moved whitespace) is then tokenised alone, so that the
scored tokens always spell prompt + candidate. For an encoder-decoder, the stripped prompt goes to
the encoder and the candidate (with the moved whitespace) is tokenised alone for the decoder.
``tokenization="separate"`` tokenises the prompt and the candidate apart, as Lamorel (the authors'
library) does; with SmolLM2 that costs ~10 nats per candidate. Word-level tokenizers (the offline
tiny models) give the same tokens either way.

Shared-prefix scoring (the default) computes what depends on the prompt once per prompt, and the
candidates as a prefix tree where the model allows it (``modules/prefix_tree.py``: each distinct
prefix of a prompt's candidates runs once; on the full task set the six "Go to <colour> <type>"
share "Go" and "Go to"):

* encoder-decoder (``modules/seq2seq_scoring.py``): the encoder runs once per prompt; a T5-family
  decoder runs the prompt's tree in one call, other decoders each candidate over a cache repeated
  from the start token's;
* decoder-only (``modules/causal_scoring.py``): Llama-family models run the prompt and its tree
  packed into one sequence, a 4D mask letting each node see the prompt and its ancestors; other
  models run the prompt once with a KV cache repeated over the candidates.

On the tree paths only the last hidden state is kept and the LM head is applied where a candidate
token is predicted, a chunk at a time (``modules/token_log_probs.py``).

:meth:`LLMScorer.naive` computes the same quantities by running every (prompt, candidate) pair as
its own sequence; tests check both agree to 1e-5 and the benchmark compares their speed.
With gradient checkpointing on and the model training, transformers drops every KV cache, so the
scorer falls back to caches-free paths: encoder once per prompt and the decoder over the repeated
encoder states (encoder-decoder); the decoder-only tree needs no cache, other decoder-only models
run the naive pairs.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor, nn

from torchrl_glam.envs import ACTION_MASK_KEY, ACTIONS_KEY, PROMPT_KEY
from torchrl_glam.modules.causal_scoring import CausalScoring
from torchrl_glam.modules.length_groups import CPU_GROUP_TOKEN_PAIRS, gather_groups, length_groups, select_prompts
from torchrl_glam.modules.loading import LLMConfig, LoadedLLM, is_quantized, load_llm
from torchrl_glam.modules.scorer_inputs import flatten_inputs
from torchrl_glam.modules.seq2seq_scoring import Seq2SeqScoring
from torchrl_glam.modules.tokenisation import CandidateTokeniser, legal_candidates_only
from torchrl_glam.modules.transformers_compat import activation_checkpointing

SCORES_KEY = "action_scores"
ACTION_HIDDEN_KEY = "action_hidden"
PROMPT_HIDDEN_KEY = "prompt_hidden"

Normalization = Literal["sum", "mean"]
Tokenization = Literal["exact", "separate"]


class LLMScorer(nn.Module):
    """Scores candidate actions with an LLM; see the module docstring.

    Args:
        model (nn.Module): a ``transformers`` seq2seq or causal LM (possibly wrapped by peft).
        tokenizer (PreTrainedTokenizerBase): its tokenizer.
        is_encoder_decoder (bool): which of the two kinds ``model`` is.
        normalization (Normalization): ``"sum"`` of token log-probs (the paper) or ``"mean"`` per token.
        shared_prefix (bool): compute the prompt's part once per prompt (``False``: naive pairs).
        tokenization (Tokenization): ``"exact"`` (default): a candidate's tokens are those of the continuation as
            lm-evaluation-harness defines it (see the module docstring); ``"separate"``: prompt and
            candidate tokenised apart, as Lamorel (the authors' code) does.
        autocast (str | None): ``"bfloat16"``: the LLM's forward (and so its backward) under ``torch.autocast``
            in bfloat16, its weights kept as they are (float32 master weights;
            ``modules/mixed_precision.py``); ``None``: the weights' dtype throughout.

    Examples:
        >>> import torch
        >>> from torchrl_glam.modules import LLMScorer, load_llm
        >>> llm = load_llm()  # the offline tiny T5
        >>> scorer = LLMScorer(llm.model, llm.tokenizer, llm.is_encoder_decoder)
        >>> prompts = ["Goal: Grasp red cactus. Action:", "Goal: Grow blue lion. Action:"]
        >>> actions = [["Go to red cactus", "Grasp", "Release"]] * 2
        >>> mask = torch.tensor([[True, True, False], [True, False, True]])
        >>> scores, action_hidden, prompt_hidden = scorer(prompts, actions, mask)
        >>> scores.shape, action_hidden.shape, prompt_hidden.shape
        (torch.Size([2, 3]), torch.Size([2, 3, 64]), torch.Size([2, 64]))
        >>> bool((scores <= 0).all())  # sums of token log-probabilities
        True
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer,
        is_encoder_decoder: bool,
        normalization: Normalization = "sum",
        shared_prefix: bool = True,
        tokenization: Tokenization = "exact",
        autocast: str | None = None,
    ):
        super().__init__()
        if autocast not in (None, "bfloat16"):
            raise ValueError(f"autocast must be None or 'bfloat16', got {autocast!r}")
        #: the dtype the LLM computes in under ``torch.autocast`` (``modules/mixed_precision.py``)
        self.autocast_dtype = torch.bfloat16 if autocast == "bfloat16" else None
        if normalization not in ("sum", "mean"):
            raise ValueError(f"normalization must be 'sum' or 'mean', got {normalization!r}")
        if tokenization not in ("exact", "separate"):
            raise ValueError(
                f"tokenization must be 'exact' (lm-evaluation-harness) or 'separate' (Lamorel), got {tokenization!r}"
            )
        self.tokenization = tokenization
        self.model = model
        self.tokenizer = tokenizer
        self.is_encoder_decoder = is_encoder_decoder
        self.normalization = normalization
        self.shared_prefix = shared_prefix
        #: on the CPU, prompts are scored in groups of similar length of at most this many
        #: (query, key) token pairs (``modules/length_groups.py``); ``None``: the batch at once
        self.group_token_pairs: int | None = CPU_GROUP_TOKEN_PAIRS
        self._tokenise = CandidateTokeniser(tokenizer, is_encoder_decoder, tokenization)
        self.pad_id = self._tokenise.pad_id
        config = model.config
        self.hidden_size = getattr(config, "d_model", None) or config.hidden_size
        # bitsandbytes repacks 4-bit weights on a forward in eval mode (see loading.py), after which
        # LoRA gradients vanish: a quantised LLM is kept in train mode whatever its parent does.
        self._quantized = is_quantized(model)
        # plain objects, not modules: the LLM's parameters stay registered once, under ``model``
        if is_encoder_decoder:
            self._seq2seq = Seq2SeqScoring(model, prefix_tree=shared_prefix)
        else:
            self._causal = CausalScoring(model)

    # ------------------------------------------------------------------ public API
    def forward(self, prompt, actions, action_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Scores [*B, A], action hidden states [*B, A, H] and prompt hidden states [*B, H].

        ``prompt``: a str or (nested) list of str / NonTensorStack of batch shape ``*B``;
        ``actions``: (nested) lists of str / NonTensorStack of shape [*B, A]; ``action_mask``: bool
        tensor [*B, A]. Masked candidates are not scored (no compute on the prefix-tree paths): their
        scores and hidden states are 0, and the actor gives them probability 0.
        """
        return self._score(prompt, actions, action_mask, naive=not self.shared_prefix)

    def naive(self, prompt, actions, action_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The same as :meth:`forward`, running every (prompt, candidate) pair as its own sequence."""
        return self._score(prompt, actions, action_mask, naive=True)

    def train(self, mode: bool = True) -> LLMScorer:
        super().train(mode)
        if self._quantized:
            self.model.train(True)
        return self

    @property
    def _candidate_ids(self) -> dict[str, tuple[int, ...]]:
        """Each candidate text's tokens, tokenised once."""
        return self._tokenise.candidate_ids

    def _encode(self, texts: list[str], add_special_tokens: bool = True) -> list[list[int]]:
        return self._tokenise.encode(texts, add_special_tokens)

    # ------------------------------------------------------------------ dispatch
    def _score(self, prompt, actions, action_mask: Tensor, naive: bool):
        prompts, candidates, mask, batch_shape = flatten_inputs(prompt, actions, action_mask)
        if self._quantized and not self.model.training:
            warnings.warn(
                "the quantised LLM was put in eval mode; switching it back to train mode "
                "(bitsandbytes would silently zero the LoRA gradients)",
                stacklevel=3,
            )
            self.model.train(True)
        checkpointing = self.model.training and activation_checkpointing(self.model)
        device = next(self.model.parameters()).device
        if self.is_encoder_decoder:
            left_padded = False
            path = functools.partial(self._seq2seq, naive=naive, reuse_cache=not checkpointing)
        elif naive or (checkpointing and not self._causal.lean):
            left_padded, path = False, self._causal.pairs
        else:
            left_padded = True
            path = self._causal.tree if self._causal.lean else self._causal.repeated_cache
        batch = self._tokenise(prompts, candidates, mask, left_pad_prompts=left_padded, device=device)
        batch = legal_candidates_only(batch, mask)
        max_pairs = self.group_token_pairs if device.type == "cpu" else None
        groups = length_groups(batch.prompt_mask.sum(1), max_pairs)
        precision = (
            torch.autocast(device.type, dtype=self.autocast_dtype)
            if self.autocast_dtype is not None
            else contextlib.nullcontext()
        )
        with precision:
            if len(groups) == 1:
                per_token = path(batch)
            else:  # see modules/length_groups.py
                parts = [path(select_prompts(batch, rows, left_padded)) for rows in groups]
                per_token = gather_groups(parts, groups, batch.num_candidates)
        legal = mask.to(device)
        scores = self._reduce(per_token.token_logp.float(), batch.action_lengths)
        scores = torch.where(legal, scores.view_as(legal), 0.0)
        action_hidden = per_token.action_hidden.float().view(*legal.shape, -1)
        action_hidden = torch.where(legal[..., None], action_hidden, 0.0)
        num_candidates = batch.num_candidates
        return (
            scores.reshape(*batch_shape, num_candidates),
            action_hidden.reshape(*batch_shape, num_candidates, -1),
            per_token.prompt_hidden.float().reshape(*batch_shape, -1),
        )

    def _reduce(self, token_logp: Tensor, lengths: Tensor) -> Tensor:
        steps = torch.arange(token_logp.shape[1], device=token_logp.device)
        summed = token_logp.masked_fill(steps >= lengths[:, None], 0.0).sum(-1)
        return summed if self.normalization == "sum" else summed / lengths


# ---------------------------------------------------------------------- factory
def make_scorer(
    llm: LoadedLLM | LLMConfig | str | None = None,
    normalization: Normalization = "sum",
    shared_prefix: bool = True,
    tokenization: Tokenization = "exact",
    autocast: str | None = None,
    in_keys: Sequence[str] = (PROMPT_KEY, ACTIONS_KEY, ACTION_MASK_KEY),
    out_keys: Sequence[str] = (SCORES_KEY, ACTION_HIDDEN_KEY, PROMPT_HIDDEN_KEY),
):
    """A ``TensorDictModule`` wrapping :class:`LLMScorer`.

    Reads ``"prompt"``, ``"actions"``, ``"action_mask"``; writes ``"action_scores"`` [*B, A],
    ``"action_hidden"`` [*B, A, H], ``"prompt_hidden"`` [*B, H]. ``llm`` is a loaded model, an
    :class:`LLMConfig`, a model name/path, or ``None`` for the offline tiny T5. The scorer itself is
    ``module.module`` (its ``.model`` holds the LLM parameters to optimise).

    Examples:
        >>> from torchrl_glam.envs.playground import PlaygroundTextEnv
        >>> from torchrl_glam.modules import make_scorer
        >>> scorer = make_scorer(None)  # the offline tiny T5 (hidden size 64)
        >>> env = PlaygroundTextEnv(num_envs=2, goals="simplified", seed=0)
        >>> td = scorer(env.reset())  # 2 prompts, 5 candidates each
        >>> td["action_scores"].shape, td["action_hidden"].shape, td["prompt_hidden"].shape
        (torch.Size([2, 5]), torch.Size([2, 5, 64]), torch.Size([2, 64]))
    """
    from tensordict.nn import TensorDictModule

    if not isinstance(llm, LoadedLLM):
        llm = load_llm(llm if isinstance(llm, LLMConfig) else LLMConfig(name_or_path=llm))
    scorer = LLMScorer(
        llm.model,
        llm.tokenizer,
        llm.is_encoder_decoder,
        normalization=normalization,
        shared_prefix=shared_prefix,
        tokenization=tokenization,
        autocast=autocast,
    )
    return TensorDictModule(scorer, in_keys=list(in_keys), out_keys=list(out_keys))
