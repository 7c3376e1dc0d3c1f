"""The GGUF tokenizers (zeptograd.models.tokenizer) against independent implementations: SentencePiece itself for
the "llama" kind (a BPE model trained here with byte fallback), Hugging Face's `tokenizers` for the "gpt2" kind (a
byte-level BPE trained here), the `regex` package running GPT-2's pattern for the pre-tokenizer, a textbook BPE
loop, and hand-checked merges; plus round trips and the path through a GGUF file's metadata."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from zeptograd.helpers import ArgumentError
from zeptograd.models.tokenizer import BYTE, CONTROL, NORMAL, UNKNOWN, Tokenizer, byte_to_unicode, gpt2_pretokenize

CORPUS = [
    "Hello world. The quick brown fox jumps over the lazy dog.",
    "Once upon a time there was a model that wrote words, and it's what we'll test: don't stop!",
    "tensors and kernels, numbers and graphs; 12345 67890 -- über naïve café",
    "    indented code\n\tdef f(x): return x * 2  # twice\n",
] * 20

SAMPLES = [
    "Hello world",
    "The quick brown fox",
    " leading space",
    "trailing space ",
    "two  spaces   and three",
    "newline\nand\ttab",
    "über naïve café, 日本語, emoji 🙂!",
    "numbers 1234567890 and 3.14159",
    "it's they're I've we'll I'm he'd don't 'quoted'",
    "punctuation!!! ??? ... ---",
    "a",
    "",
    "    indented\n\n\n  ",
]


def random_texts(rng: np.random.Generator, count: int) -> list[str]:
    alphabet = list("abcdefghij ABC  \t\n'.,!?0123456789") + ["é", "ü", "日", "🙂", "₂", "\u00a0", "s", "t", "re", "ll"]
    return ["".join(rng.choice(alphabet, size=rng.integers(0, 24))) for _ in range(count)]


# ---- "llama": SentencePiece BPE


@pytest.fixture(scope="module")
def sentencepiece_model():
    spm = pytest.importorskip("sentencepiece", reason="sentencepiece (the test extra) is the SPM tokenizer's oracle")
    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS),
        model_writer=proto,
        vocab_size=400,
        model_type="bpe",
        byte_fallback=True,
        normalization_rule_name="identity",  # LLaMA's: no NFKC, spaces kept as they are
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        character_coverage=1.0,
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_proto=proto.getvalue())
    n = sp.get_piece_size()

    def kind(i: int) -> int:
        if sp.is_unknown(i):
            return UNKNOWN
        if sp.is_control(i):
            return CONTROL
        if sp.is_byte(i):
            return BYTE
        return NORMAL

    ours = Tokenizer(
        [sp.id_to_piece(i) for i in range(n)],
        scores=[sp.get_score(i) for i in range(n)],
        token_types=[kind(i) for i in range(n)],
        bos_id=sp.bos_id(),
        eos_id=sp.eos_id(),
        unk_id=sp.unk_id(),
    )
    return sp, ours


def test_spm_matches_sentencepiece(sentencepiece_model):
    sp, ours = sentencepiece_model
    texts = SAMPLES + CORPUS[:4] + random_texts(np.random.default_rng(0), 200)
    for text in texts:
        assert ours.encode(text, add_bos=False) == sp.encode(text), text
        assert ours.encode(text) == [sp.bos_id(), *sp.encode(text)], text


def test_spm_decode_matches_sentencepiece_and_round_trips(sentencepiece_model):
    sp, ours = sentencepiece_model
    for text in SAMPLES + random_texts(np.random.default_rng(1), 200):
        ids = sp.encode(text)
        assert ours.decode(ids) == sp.decode(ids) == text, text
        assert ours.decode(ours.encode(text)) == text
    # a character cut between its byte tokens decodes to U+FFFD, not an exception
    ids = ours.encode("日", add_bos=False)
    assert [ours.tokens[i] for i in ids] == ["▁", "<0xE6>", "<0x97>", "<0xA5>"]
    assert ours.decode(ids[:-1]) == "\ufffd"


def test_spm_merges_by_score_by_hand():
    # "abc" is "▁abc": with "bc" scored above "ab", b+c merges first and a is left to "▁a"; the other way round
    # a+b merges first and nothing joins "▁" or "c" to "ab"
    tokens = ["<unk>", "▁", "a", "b", "c", "▁a", "ab", "bc"]
    types = [UNKNOWN] + [NORMAL] * 7
    bc_first = Tokenizer(tokens, scores=[0, -9, -9, -9, -9, -5, -3, -1], token_types=types, unk_id=0, add_bos=False)
    assert [tokens[i] for i in bc_first.encode("abc")] == ["▁a", "bc"]
    ab_first = Tokenizer(tokens, scores=[0, -9, -9, -9, -9, -5, -1, -3], token_types=types, unk_id=0, add_bos=False)
    assert [tokens[i] for i in ab_first.encode("abc")] == ["▁", "ab", "c"]
    # equal scores: the leftmost pair first ("aaa" -> "▁" "aa" "a" only if "▁a" is no token)
    tokens = ["<unk>", "▁", "a", "aa"]
    tie = Tokenizer(tokens, scores=[0, -9, -9, -1], token_types=[UNKNOWN, 1, 1, 1], unk_id=0, add_bos=False)
    assert tie.encode("aaa") == [1, 3, 2]
    # no byte tokens: an unknown character is the unknown id
    assert tie.encode("ab") == [1, 2, 0]


# ---- "gpt2": byte-level BPE


@pytest.fixture(scope="module")
def hf_bpe():
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers (the test extra) is the byte-level BPE's oracle")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(CORPUS, trainer=trainer)
    model = json.loads(hf.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in vocab]
    assert [i for _, i in vocab] == list(range(len(tokens)))
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    types = [CONTROL if t == "<|endoftext|>" else NORMAL for t in tokens]
    eos = tokens.index("<|endoftext|>")
    ours = Tokenizer(tokens, token_types=types, merges=merges, model="gpt2", bos_id=eos, eos_id=eos)
    return hf, ours


def test_bpe_matches_tokenizers(hf_bpe):
    hf, ours = hf_bpe
    texts = SAMPLES + CORPUS[:4] + random_texts(np.random.default_rng(2), 300)
    for text in texts:
        assert ours.encode(text) == hf.encode(text).ids, text


def test_bpe_decode_matches_tokenizers_and_round_trips(hf_bpe):
    hf, ours = hf_bpe
    for text in SAMPLES + random_texts(np.random.default_rng(3), 200):
        ids = hf.encode(text).ids
        assert ours.decode(ids) == hf.decode(ids) == text, text
    assert ours.decode([ours.eos_id, *ours.encode("hi")]) == "hi"  # a control token decodes to nothing


def textbook_bpe(word: list[str], merges: list[tuple[str, str]]) -> list[str]:
    """Apply the merges in rank order, each to every occurrence, left to right (the training loop replayed)."""
    for left, right in merges:
        out, k = [], 0
        while k < len(word):
            if k + 1 < len(word) and word[k] == left and word[k + 1] == right:
                out.append(left + right)
                k += 2
            else:
                out.append(word[k])
                k += 1
        word = out
    return word


def test_bpe_matches_the_textbook_loop():
    rng = np.random.default_rng(4)
    letters = list("abcd")
    merges = [("a", "b"), ("c", "d"), ("ab", "c"), ("b", "b"), ("a", "a"), ("abc", "d"), ("d", "a"), ("aa", "a")]
    tokens = [*letters, *(left + right for left, right in merges)]
    tok = Tokenizer(tokens, merges=[f"{a} {b}" for a, b in merges], model="gpt2")
    for _ in range(300):
        word = "".join(rng.choice(letters, size=rng.integers(1, 12)))
        assert [tokens[i] for i in tok.encode(word)] == textbook_bpe(list(word), merges), word


def test_gpt2_pretokenizer_matches_the_regex():
    regex = pytest.importorskip("regex", reason="the regex package (the test extra) runs GPT-2's own pattern")
    pattern = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
    for text in SAMPLES + random_texts(np.random.default_rng(5), 500):
        assert gpt2_pretokenize(text) == pattern.findall(text), repr(text)


def test_byte_to_unicode_is_gpt2s():
    table = byte_to_unicode()
    assert sorted(table) == list(range(256)) and len(set(table.values())) == 256
    # printable bytes stand for themselves; the rest take U+0100 on, in byte order (GPT-2's encoder.py)
    assert table[ord("!")] == "!" and table[ord("~")] == "~" and table[0xA1] == "¡" and table[0xFF] == "ÿ"
    assert table[0] == "\u0100" and table[ord(" ")] == "\u0120" and table[0xAD] == "\u0143"


# ---- from a GGUF file's metadata


def test_from_gguf_reads_the_metadata(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "tok.gguf"
    tokens = ["<unk>", "<s>", "</s>", "<0x41>", "▁", "h", "i", "hi", "▁hi"]
    types = [UNKNOWN, CONTROL, CONTROL, BYTE, NORMAL, NORMAL, NORMAL, NORMAL, NORMAL]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0, 0.0, 0.0, 0.0, -5.0, -6.0, -7.0, -2.0, -1.0])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tok = Tokenizer.from_gguf(path)
    assert tok.vocab_size == len(tokens) and (tok.bos_id, tok.eos_id, tok.unk_id) == (1, 2, 0)
    # "hi hiA": "▁hi" twice by score, "A" through its byte token, BOS and EOS around
    assert tok.encode("hi hiA") == [1, 8, 8, 3, 2]
    assert tok.decode(tok.encode("hi hiA")) == "hi hiA"


def test_bad_tokenizers_are_refused():
    with pytest.raises(ArgumentError, match="'wordpiece' is not supported"):
        Tokenizer(["a"], model="wordpiece")
    with pytest.raises(ArgumentError, match="needs merges"):
        Tokenizer(["a"], model="gpt2")
    with pytest.raises(ArgumentError, match="2 scores for 3 tokens"):
        Tokenizer(["a", "b", "c"], scores=[0.0, 1.0])
    with pytest.raises(ArgumentError, match="bos_id 5 is not a token id"):
        Tokenizer(["a"], bos_id=5)
    with pytest.raises(ArgumentError, match="no bos_id"):
        Tokenizer(["▁a"]).encode("a")
    with pytest.raises(ArgumentError, match="id 7 at position 1"):
        Tokenizer(["a"]).decode([0, 7])
    with pytest.raises(ArgumentError, match="no tokenizer"):
        Tokenizer.from_gguf_metadata({"general.architecture": "llama"})
