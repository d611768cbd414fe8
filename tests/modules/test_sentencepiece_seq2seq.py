"""Exact tokenisation on the encoder-decoder path with a SentencePiece-style tokenizer (issue 14).

No real SentencePiece model can be had offline, so one is built the way T5's fast tokenizer is made:
a Unigram model behind a Metaspace pre-tokenizer ("▁" for spaces, prepended), trained on the
environment's prompts, and "</s>" appended to encoder inputs. On it, the prompt's trailing space
becomes a lone "▁" token at the end of the encoder input when tokenised apart ("separate");
"exact" moves it to the candidate, where Metaspace absorbs it (" Go" and "Go" give the same pieces).
"""

import pytest
import torch

from torchrl_glam.envs.playground import PlaygroundTextEnv, render_actions
from torchrl_glam.envs.playground.vocabulary import OBJECT_NAMES
from torchrl_glam.modules import LLMScorer


@pytest.fixture(scope="module")
def sentencepiece_t5():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    env = PlaygroundTextEnv(num_envs=64, goals="train", seed=0)
    corpus = list(env.reset()["prompt"]) + render_actions(range(len(OBJECT_NAMES)))
    backend = Tokenizer(models.Unigram())
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    backend.train_from_iterator(
        corpus * 4,
        trainers.UnigramTrainer(vocab_size=400, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>"),
    )
    backend.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", backend.token_to_id("</s>"))]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        num_heads=4,
        d_ff=64,
        num_layers=2,
        decoder_start_token_id=tokenizer.pad_token_id,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        dropout_rate=0.0,
    )
    return T5ForConditionalGeneration(config).eval(), tokenizer


@torch.no_grad()
def reference(model, tokenizer, encoder_text, continuation_ids):
    encoder_ids = torch.tensor([tokenizer(encoder_text)["input_ids"]])
    decoder_ids = torch.tensor([[model.config.decoder_start_token_id] + continuation_ids])
    logp = model(input_ids=encoder_ids, decoder_input_ids=decoder_ids[:, :-1]).logits.log_softmax(-1)[0]
    return logp.gather(1, torch.tensor(continuation_ids)[:, None]).sum().item()


def test_trailing_space_is_a_lone_piece_only_when_tokenised_apart(sentencepiece_t5):
    _, tokenizer = sentencepiece_t5
    pieces = tokenizer.convert_ids_to_tokens(tokenizer("You have grown: nothing\nAction: ")["input_ids"])
    assert pieces[-2:] == ["▁", "</s>"]  # what "separate" feeds the encoder
    stripped = tokenizer.convert_ids_to_tokens(tokenizer("You have grown: nothing\nAction:")["input_ids"])
    assert stripped[-2:] != ["▁", "</s>"]
    for text in ("Go to red door", "Grasp"):
        assert (
            tokenizer(" " + text, add_special_tokens=False)["input_ids"]
            == tokenizer(text, add_special_tokens=False)["input_ids"]
        )  # the moved space is absorbed


@pytest.mark.parametrize("tokenization", ["exact", "separate"])
def test_seq2seq_scores_equal_the_direct_reference(sentencepiece_t5, tokenization):
    model, tokenizer = sentencepiece_t5
    env = PlaygroundTextEnv(num_envs=3, goals="train", seed=1)
    td = env.reset()
    prompts, candidates = list(td["prompt"]), [list(row) for row in td["actions"]]
    mask = td["action_mask"]
    scorer = LLMScorer(model, tokenizer, is_encoder_decoder=True, tokenization=tokenization)
    with torch.no_grad():
        shared, naive = scorer(prompts, candidates, mask)[0], scorer.naive(prompts, candidates, mask)[0]
    expected = torch.tensor(
        [
            [
                reference(
                    model,
                    tokenizer,
                    prompt.rstrip() if tokenization == "exact" else prompt,
                    tokenizer((" " + c) if tokenization == "exact" else c, add_special_tokens=False)["input_ids"],
                )
                for c in row
            ]
            for prompt, row in zip(prompts, candidates)
        ]
    )
    torch.testing.assert_close(shared, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(naive, expected, atol=1e-5, rtol=0)
