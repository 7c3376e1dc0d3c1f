"""Text to token ids and back, from the tokenizer a GGUF file carries in its metadata (`tokenizer.ggml.*`).

Two kinds, as `tokenizer.ggml.model` names them:

- "llama": SentencePiece's BPE, as LLaMA 1 and 2 use it. Spaces become the marker "▁" (with one put before the
  text when `tokenizer.ggml.add_space_prefix`, true by default), the text is split into characters, and the
  adjacent pair whose concatenation is a token with the highest score (`tokenizer.ggml.scores`; the leftmost of
  equals) is merged until no pair is a token. A piece that is not a token is spelt in byte tokens `<0xNN>` (byte
  fallback), or the unknown token where there are none.
- "gpt2": GPT-2's byte-level BPE. The text is split by GPT-2's pre-tokenizer (words with their leading space,
  numbers, runs of punctuation, whitespace), each piece's UTF-8 bytes are written as GPT-2's printable stand-ins
  (`byte_to_unicode`), and within a piece the adjacent pair of lowest rank in `tokenizer.ggml.merges` is merged
  until none is left. The pre-tokenizer is GPT-2's whatever `tokenizer.ggml.pre` says (LLaMA 3's differs in how it
  groups digits and a few other cases).

Special tokens written in the text ("<s>", "<|endoftext|>") are text like any other: they are not read as their
ids. `encode` puts the BOS id first where the metadata asks (`tokenizer.ggml.add_bos_token`; by default for
"llama", not for "gpt2"); `decode` leaves control tokens out.

>>> tok = Tokenizer(["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab"], scores=[0, 0, 0, -1, -2, -3, -4, -5,
...     -6], token_types=[2, 3, 3, 1, 1, 1, 1, 1, 1], bos_id=1, eos_id=2, unk_id=0)
>>> tok.encode("ab ab")
[1, 8, 8]
>>> tok.decode([1, 8, 8])
'ab ab'
"""

from __future__ import annotations

import heapq
import itertools
import os
import unicodedata
from collections.abc import Sequence
from typing import Any

from zeptograd.helpers import ArgumentError

__all__ = ["Tokenizer", "byte_to_unicode", "gpt2_pretokenize"]

# tokenizer.ggml.token_type values (llama.cpp's)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
_SPACE = "\u2581"  # SentencePiece's "▁"
_OP = "Tokenizer"


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte: printable Latin-1 bytes stand for themselves, the others (control
    characters, the space, ...) for the characters from U+0100 on, in byte order.

    >>> table = byte_to_unicode()
    >>> table[ord("a")], table[ord(" ")], table[ord("\\n")], len(set(table.values()))
    ('a', 'Ġ', 'Ċ', 256)
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return dict(sorted(table.items()))


_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")


def _kind(ch: str) -> str:
    """'L' (letter), 'N' (number), 'S' (whitespace) or 'O' (anything else), GPT-2's pre-tokenizer's classes."""
    if ch.isspace():
        return "S"
    category = unicodedata.category(ch)[0]
    return category if category in "LN" else "O"


def gpt2_pretokenize(text: str) -> list[str]:
    """The pieces GPT-2's pre-tokenizer splits `text` into, the matches of its pattern
    `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`, scanned by hand so that
    no regular-expression package with Unicode classes is needed.

    >>> gpt2_pretokenize("I'll pay 42 dollars!!  ok\\n")
    ['I', "'ll", ' pay', ' 42', ' dollars', '!!', ' ', ' ok', '\\n']
    """
    pieces, i, n = [], 0, len(text)
    while i < n:
        if text[i] == "'":
            suffix = next((s for s in _CONTRACTIONS if text.startswith(s, i + 1)), None)
            if suffix is not None:
                pieces.append(text[i : i + 1 + len(suffix)])
                i += 1 + len(suffix)
                continue
        # an optional leading space (only " ", not other whitespace), then a run of one class
        start = i + 1 if text[i] == " " and i + 1 < n and _kind(text[i + 1]) != "S" else i
        kind = _kind(text[start])
        if kind != "S":
            end = start + 1
            while end < n and _kind(text[end]) == kind:
                end += 1
            pieces.append(text[i:end])
            i = end
            continue
        # whitespace: all of it at the end of the text; else all but the last character, which goes with what
        # follows (as a leading space) when the run is longer than one
        end = i
        while end < n and _kind(text[end]) == "S":
            end += 1
        if end < n and end - i > 1:
            end -= 1
        pieces.append(text[i:end])
        i = end
    return pieces


class Tokenizer:
    """A SentencePiece-BPE ("llama") or byte-level BPE ("gpt2") tokenizer over `tokens` (the vocabulary, by id),
    with `scores` (one per token; "llama" merges by them), `token_types` (llama.cpp's: 1 normal, 2 unknown, 3
    control, 4 user-defined, 5 unused, 6 byte) and `merges` ("gpt2": "left right" strings, by rank).
    """

    def __init__(
        self,
        tokens: Sequence[str],
        scores: Sequence[float] | None = None,
        token_types: Sequence[int] | None = None,
        merges: Sequence[str] | None = None,
        model: str = "llama",
        bos_id: int | None = None,
        eos_id: int | None = None,
        unk_id: int | None = None,
        add_bos: bool | None = None,
        add_eos: bool = False,
        add_space_prefix: bool = True,
    ):
        if model not in ("llama", "gpt2"):
            raise ArgumentError(f"{_OP}: tokenizer model {model!r} is not supported (supported: 'llama', 'gpt2')")
        if not tokens:
            raise ArgumentError(f"{_OP}: the vocabulary is empty")
        n = len(tokens)
        for name, values in (("scores", scores), ("token_types", token_types)):
            if values is not None and len(values) != n:
                raise ArgumentError(f"{_OP}: {len(values)} {name} for {n} tokens")
        for name, value in (("bos_id", bos_id), ("eos_id", eos_id), ("unk_id", unk_id)):
            if value is not None and not 0 <= value < n:
                raise ArgumentError(f"{_OP}: {name} {value} is not a token id (the vocabulary has {n})")
        if model == "gpt2" and merges is None:
            raise ArgumentError(f"{_OP}: a 'gpt2' tokenizer needs merges (tokenizer.ggml.merges)")
        self.model, self.tokens = model, list(tokens)
        self.scores = [0.0] * n if scores is None else [float(s) for s in scores]
        self.token_types = [NORMAL] * n if token_types is None else [int(t) for t in token_types]
        self.bos_id, self.eos_id, self.unk_id = bos_id, eos_id, unk_id
        self.add_bos = (model == "llama") if add_bos is None else add_bos
        self.add_eos, self.add_space_prefix = add_eos, add_space_prefix
        # the tokens text can be split into: control, unused and byte tokens are reached only by id
        self._ids: dict[str, int] = {}
        for i, (text, kind) in enumerate(zip(self.tokens, self.token_types)):
            if kind in (NORMAL, USER_DEFINED):
                self._ids.setdefault(text, i)
        self._bytes = {}  # byte -> its <0xNN> token
        for i, (text, kind) in enumerate(zip(self.tokens, self.token_types)):
            if kind == BYTE and len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
                self._bytes.setdefault(int(text[3:5], 16), i)
        if model == "gpt2":
            self._ranks: dict[tuple[str, str], int] = {}
            for rank, merge in enumerate(merges or ()):
                left, sep, right = merge.partition(" ")
                if not sep or not left or not right:
                    raise ArgumentError(f"{_OP}: merge {rank} is {merge!r}, not 'left right'")
                self._ranks.setdefault((left, right), rank)
            self._to_unicode = byte_to_unicode()
            self._to_byte = {c: b for b, c in self._to_unicode.items()}
            self._cache: dict[str, list[str]] = {}

    @classmethod
    def from_gguf_metadata(cls, metadata: dict[str, Any]) -> Tokenizer:
        """The tokenizer a GGUF's metadata describes (`tokenizer.ggml.model`, `.tokens`, `.scores`, `.token_type`,
        `.merges`, `.bos_token_id`, `.eos_token_id`, `.unknown_token_id`, `.add_bos_token`, `.add_eos_token`,
        `.add_space_prefix`).

        >>> meta = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["h", "i", "hi"],
        ...         "tokenizer.ggml.merges": ["h i"]}
        >>> Tokenizer.from_gguf_metadata(meta).encode("hi")
        [2]
        """
        key = "tokenizer.ggml."
        model = metadata.get(key + "model")
        if model is None or key + "tokens" not in metadata:
            raise ArgumentError(f"{_OP}: the metadata has no tokenizer ({key}model and {key}tokens)")
        return cls(
            metadata[key + "tokens"],
            scores=metadata.get(key + "scores"),
            token_types=metadata.get(key + "token_type"),
            merges=metadata.get(key + "merges"),
            model=model,
            bos_id=metadata.get(key + "bos_token_id"),
            eos_id=metadata.get(key + "eos_token_id"),
            unk_id=metadata.get(key + "unknown_token_id"),
            add_bos=metadata.get(key + "add_bos_token"),
            add_eos=metadata.get(key + "add_eos_token", False),
            add_space_prefix=metadata.get(key + "add_space_prefix", True),
        )

    @classmethod
    def from_gguf(cls, path: str | os.PathLike) -> Tokenizer:
        """The tokenizer in a GGUF file's metadata (no tensor is read).

        >>> import os, tempfile
        >>> from zeptograd.models.tiny_gguf import write_tiny_llama_gguf
        >>> path = write_tiny_llama_gguf(os.path.join(tempfile.mkdtemp(), "tiny.gguf"), dim=32, n_layers=1)
        >>> tok = Tokenizer.from_gguf(path)
        >>> tok.decode(tok.encode("Hello world"))
        'Hello world'
        """
        from zeptograd.nn.gguf import gguf_load

        return cls.from_gguf_metadata(gguf_load(path)[0])

    @property
    def vocab_size(self) -> int:
        """The number of tokens."""
        return len(self.tokens)

    def encode(self, text: str, add_bos: bool | None = None, add_eos: bool | None = None) -> list[int]:
        """The token ids of `text`, after the BOS id if `add_bos` (None: as the metadata says) and before the EOS
        id if `add_eos`.

        >>> tok = Tokenizer(["a", "b", "ab", "<s>"], token_types=[1, 1, 1, 3], merges=["a b"], model="gpt2", bos_id=3)
        >>> tok.encode("abba"), tok.encode("ab", add_bos=True)
        ([2, 1, 0], [3, 2])
        """
        if not isinstance(text, str):
            raise TypeError(f"{_OP}.encode: expected a str, got {type(text).__name__}")
        ids = self._encode_spm(text) if self.model == "llama" else self._encode_bpe(text)
        if self.add_bos if add_bos is None else add_bos:
            if self.bos_id is None:
                raise ArgumentError(f"{_OP}.encode: a BOS token is asked for, but the tokenizer has no bos_id")
            ids.insert(0, self.bos_id)
        if self.add_eos if add_eos is None else add_eos:
            if self.eos_id is None:
                raise ArgumentError(f"{_OP}.encode: an EOS token is asked for, but the tokenizer has no eos_id")
            ids.append(self.eos_id)
        return ids

    def _unknown(self, piece: str) -> list[int]:
        """The ids of a piece that is no token: its bytes' tokens, else the unknown token."""
        raw = piece.encode("utf-8")
        if all(b in self._bytes for b in raw):
            return [self._bytes[b] for b in raw]
        if self.unk_id is None:
            raise ArgumentError(f"{_OP}.encode: {piece!r} is no token, has no byte tokens and there is no unk_id")
        return [self.unk_id]

    def _encode_spm(self, text: str) -> list[int]:
        if not text:
            return []
        if self.add_space_prefix:
            text = " " + text
        symbols: list[str | None] = list(text.replace(" ", _SPACE))
        nxt = [*range(1, len(symbols)), -1]
        prv = list(range(-1, len(symbols) - 1))
        heap: list[tuple[float, int, str]] = []

        def push(i: int) -> None:
            if i >= 0 and nxt[i] >= 0:
                merged = str(symbols[i]) + str(symbols[nxt[i]])
                if (tid := self._ids.get(merged)) is not None:
                    heapq.heappush(heap, (-self.scores[tid], i, merged))

        for i in range(len(symbols) - 1):
            push(i)
        while heap:
            _, i, merged = heapq.heappop(heap)
            j = nxt[i]
            # an entry made stale by an earlier merge (either side changed) is skipped
            if symbols[i] is None or j < 0 or str(symbols[i]) + str(symbols[j]) != merged:
                continue
            symbols[i], symbols[j] = merged, None
            nxt[i] = nxt[j]
            if nxt[i] >= 0:
                prv[nxt[i]] = i
            push(prv[i])
            push(i)
        ids: list[int] = []
        for piece in symbols:
            if piece is not None:
                tid = self._ids.get(piece)
                ids.extend([tid] if tid is not None else self._unknown(piece))
        return ids

    def _bpe(self, word: str) -> list[str]:
        """A pre-tokenized piece (in GPT-2's byte stand-ins) merged by rank: the lowest-ranked adjacent pair, every
        occurrence left to right, until no pair is a merge."""
        if word in self._cache:
            return self._cache[word]
        parts = list(word)
        while len(parts) > 1:
            ranked = [(self._ranks.get(pair, -1), k) for k, pair in enumerate(itertools.pairwise(parts))]
            ranked = [(r, k) for r, k in ranked if r >= 0]
            if not ranked:
                break
            best = parts[min(ranked)[1]], parts[min(ranked)[1] + 1]
            merged, k = [], 0
            while k < len(parts):
                if k + 1 < len(parts) and (parts[k], parts[k + 1]) == best:
                    merged.append(parts[k] + parts[k + 1])
                    k += 2
                else:
                    merged.append(parts[k])
                    k += 1
            parts = merged
        self._cache[word] = parts
        return parts

    def _encode_bpe(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in gpt2_pretokenize(text):
            word = "".join(self._to_unicode[b] for b in piece.encode("utf-8"))
            for part in self._bpe(word):
                tid = self._ids.get(part)
                if tid is not None:
                    ids.append(tid)
                elif self.unk_id is not None:
                    ids.append(self.unk_id)
                else:
                    raise ArgumentError(
                        f"{_OP}.encode: the byte-level piece {part!r} is no token, and there is no unk_id"
                    )
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids (control tokens left out; bytes that are not valid UTF-8 become U+FFFD).

        >>> tok = Tokenizer(["a", "b", "ab", "<s>"], token_types=[1, 1, 1, 3], merges=["a b"], model="gpt2")
        >>> tok.decode([3, 2, 1, 0])
        'abba'
        """
        out = bytearray()
        for position, tid in enumerate(ids):
            tid = int(tid)
            if not 0 <= tid < len(self.tokens):
                raise ArgumentError(
                    f"{_OP}.decode: id {tid} at position {position} is not in 0..{len(self.tokens) - 1}"
                )
            text, kind = self.tokens[tid], self.token_types[tid]
            if kind in (CONTROL, UNUSED):
                continue
            if kind == BYTE and self.model == "llama":
                out.append(int(text[3:5], 16))
            elif self.model == "llama":
                out += (" \u2047 " if kind == UNKNOWN else text.replace(_SPACE, " ")).encode("utf-8")
            elif kind == USER_DEFINED:
                out += text.encode("utf-8")
            else:
                for ch in text:
                    b = self._to_byte.get(ch)
                    out += bytes([b]) if b is not None else ch.encode("utf-8")
        decoded = out.decode("utf-8", errors="replace")
        if self.model == "llama" and self.add_space_prefix and decoded.startswith(" "):
            decoded = decoded[1:]  # the space encode put before the text
        return decoded
