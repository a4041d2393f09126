"""Generated corpora with wiki-18's shape, fitted to real Wikipedia text (Wikispeedia's 4,604 articles).

Why generated: wiki-18 (DPR's 21M 100-word passages of the Dec 2018 English Wikipedia)
is not on this machine and cannot be downloaded here; what matters for BM25 speed is
its shape, which is fitted here to the real Wikipedia text that is.

Two corpora, both with a 2-4 word title and 100 words per passage:

* ``iid``: every word drawn independently from Wikispeedia's rank-frequency
  distribution, extended past its last rank by a power-law tail fitted on ranks
  1,000-50,000 up to ``vocab_size`` distinct words (wiki-18 has millions). No topic,
  no locality: every posting block of a term looks alike, so block-max bounds cannot
  prune; the conservative setting.
* ``articles`` (the default): what real Wikipedia has and i.i.d. draws lack. Passages
  come in runs of one article (wiki-18 cuts each article into consecutive 100-word
  passages, so neighbouring rows share a topic and a title); the run length is
  geometric with mean ``PASSAGES_PER_ARTICLE`` (21M passages over the ~5.8M articles of
  the English Wikipedia at the end of 2018; an assumption, DPR does not publish the
  per-article count). Each generated article starts at a random point of a real
  Wikispeedia article and follows it: a passage's word comes, with probability ``mix``,
  from a ``WINDOW``-word stretch of the source at the passage's own position (so topic
  words cluster within a passage and carry into the next), else from the global
  distribution (tail included).
  ``mix`` is fitted, not chosen: it is the value whose passages repeat a word as often
  as Wikispeedia's own 100-word passages do (:func:`burstiness`), and
  :func:`locality` (how often a word of a passage recurs in the next passage of the
  same article) is printed beside the real figure as a check.
"""

from __future__ import annotations

import re
import sys
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

WORD = re.compile(r"(?u)\b\w\w+\b")
BLOCK = 50_000  # passages generated at once
PASSAGE_WORDS = 100
PASSAGES_PER_ARTICLE = 3.6
# a passage's own words come from this stretch of its source article (its text and the next passage's)
WINDOW = 2 * 100
# words whose repetition measures burstiness: past the function words, common enough to count
CONTENT_RANKS = (100, 20_000)


def fail(message: str) -> None:
    """Stop the benchmark with a one-line reason (exit status 2)."""
    print(f"FAIL: {message}", file=sys.stderr)
    raise SystemExit(2)


def read_articles(tar_path: Path) -> list[list[str]]:
    """Each Wikispeedia article's words, lower-cased, in order."""
    if not tar_path.is_file():
        fail(f"{tar_path} is missing: the corpus is fitted to real Wikipedia text "
              "(set AETHER_SHARED_DATA to the shared data folder)")
    articles = []
    with tarfile.open(tar_path) as tar:
        for member in tar:
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                articles.append(WORD.findall(handle.read().decode("utf-8", "replace").lower()))
    return articles


def _tail_words(count: int) -> list[str]:
    letters = "bcdfghjklmnpqrstvwxz"
    words = []
    for i in range(count):  # letters only, so the tokenizer keeps each as one token
        code, n = [], i
        while True:
            code.append(letters[n % 20])
            n //= 20
            if not n:
                break
        words.append("zq" + "".join(code))
    return words


class WordModel:
    """Global word distribution (Wikispeedia + fitted tail) and every article's own, as word ids."""

    def __init__(self, tar_path: Path, vocab_size: int) -> None:
        article_words = read_articles(tar_path)
        counts = Counter(w for a in article_words for w in a)
        words = sorted(counts, key=lambda w: (-counts[w], w))
        freq = np.array([counts[w] for w in words], dtype=np.float64)
        ranks = np.arange(1, len(freq) + 1, dtype=np.float64)
        fit = slice(1_000, min(50_000, len(freq)))
        slope, intercept = np.polyfit(np.log(ranks[fit]), np.log(freq[fit]), 1)
        extra = max(vocab_size - len(words), 0)
        tail = np.exp(intercept + slope * np.log(np.arange(len(words) + 1, len(words) + extra + 1, dtype=np.float64)))
        self.words = np.array(words + _tail_words(extra), dtype=object)
        probs = np.concatenate([freq, tail])
        self.cdf = np.cumsum(probs / probs.sum())
        rank = {w: i for i, w in enumerate(words)}
        self.articles = [np.array([rank[w] for w in a], dtype=np.int64) for a in article_words if len(a)]
        self.flat = np.concatenate(self.articles)  # every article's words back to back
        self.art_len = np.array([len(a) for a in self.articles], dtype=np.int64)
        self.art_start = np.cumsum(self.art_len) - self.art_len
        print(f"vocabulary: {len(words):,} Wikispeedia words + {extra:,} tail words (Zipf slope {slope:.3f}); "
              f"{len(self.articles):,} articles", flush=True)

    def draw_global(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, rng.random(size) * self.cdf[-1]), len(self.words) - 1)

    def draw_near(self, rng: np.random.Generator, article: np.ndarray, at: np.ndarray) -> np.ndarray:
        """For each (article, word position): a word of that article within ``WINDOW`` words from the position."""
        length = self.art_len[article]
        return self.flat[self.art_start[article] + (at + rng.integers(0, WINDOW, size=len(article))) % length]

    def real_passages(self) -> tuple[list[np.ndarray], np.ndarray]:
        """Wikispeedia's own text cut into 100-word passages, and each passage's article."""
        out, owner = [], []
        for a, seq in enumerate(self.articles):
            for start in range(0, len(seq) - PASSAGE_WORDS + 1, PASSAGE_WORDS):
                out.append(seq[start:start + PASSAGE_WORDS])
                owner.append(a)
        return out, np.array(owner)


def burstiness(passages: list[np.ndarray]) -> float:
    """Mean occurrences of a content word in a passage that holds it (1.0 = never repeated)."""
    lo, hi = CONTENT_RANKS
    total = present = 0
    for p in passages:
        content = p[(p >= lo) & (p < hi)]
        total += len(content)
        present += len(np.unique(content))
    return total / max(present, 1)


def locality(passages: list[np.ndarray], owner: np.ndarray) -> float:
    """Share of a passage's distinct content words found again in the next passage of the same article."""
    lo, hi = CONTENT_RANKS
    again = seen = 0
    for i in range(len(passages) - 1):
        if owner[i] != owner[i + 1]:
            continue
        a = np.unique(passages[i][(passages[i] >= lo) & (passages[i] < hi)])
        b = np.unique(passages[i + 1])
        again += len(np.intersect1d(a, b, assume_unique=True))
        seen += len(a)
    return again / max(seen, 1)


class GeneratedPassages:
    """A read-once document source with the store's ``raw_at``/``id_at``, generated block by block."""

    def __init__(self, n: int, model: WordModel | None, kind: str = "articles", mix: float = 0.0,
                 seed: int = 0) -> None:
        self.n, self.model, self.kind, self.mix, self.seed = n, model, kind, mix, seed
        self._block = -1
        self._rows: list[dict[str, str]] = []

    def __len__(self) -> int:
        return self.n

    def word_ids(self, block: int) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
        """One block's passages as word ids: (titles, texts, article of each passage)."""
        model = self.model
        if model is None:
            raise RuntimeError("an index opened for searching only has no corpus to generate")
        rng = np.random.default_rng((self.seed, block))
        size = min(BLOCK, self.n - block * BLOCK)
        if self.kind == "iid":
            title_len = rng.integers(2, 5, size=size)
            draws = model.draw_global(rng, int(title_len.sum()) + PASSAGE_WORDS * size)
            titles, texts, cursor = [], [], 0
            for t in title_len.tolist():
                titles.append(draws[cursor:cursor + t])
                texts.append(draws[cursor + t:cursor + t + PASSAGE_WORDS])
                cursor += t + PASSAGE_WORDS
            return titles, texts, np.arange(size)
        # runs of passages of one article (a run may cross a block boundary: it then restarts there)
        runs = rng.geometric(1.0 / PASSAGES_PER_ARTICLE, size=size)
        owner = np.repeat(np.arange(size), runs)[:size]
        first = np.concatenate([[True], owner[1:] != owner[:-1]])
        start_row = np.maximum.accumulate(np.where(first, np.arange(size), 0))
        source = rng.integers(0, len(model.articles), size=size)[owner]
        offset = rng.integers(0, 1 << 30, size=size)[owner]  # where in its source the article starts
        at = offset + (np.arange(size) - start_row) * PASSAGE_WORDS  # the passage's stretch of the source
        n_words = PASSAGE_WORDS * size
        words = model.draw_global(rng, n_words)
        local = rng.random(n_words) < self.mix
        slot = np.repeat(np.arange(size), PASSAGE_WORDS)[local]
        words[local] = model.draw_near(rng, source[slot], at[slot])
        title_len = rng.integers(2, 5, size=size)
        title_words = model.draw_near(rng, np.repeat(source, title_len), np.repeat(offset, title_len))
        title_at = np.concatenate([[0], np.cumsum(title_len)])
        titles, texts = [], []
        for i in range(size):
            if first[i]:
                title = title_words[title_at[i]:title_at[i + 1]]
            titles.append(title)
            texts.append(words[i * PASSAGE_WORDS:(i + 1) * PASSAGE_WORDS])
        return titles, texts, owner

    def _make(self, block: int) -> None:
        assert self.model is not None
        titles, texts, _ = self.word_ids(block)
        w = self.model.words
        self._rows = [{"title": " ".join(w[t]).title(), "text": " ".join(w[x])} for t, x in zip(titles, texts, strict=True)]
        self._block = block

    def raw_at(self, row: int) -> dict[str, str]:
        block = row // BLOCK
        if block != self._block:
            self._make(block)
        return self._rows[row - block * BLOCK]

    def id_at(self, row: int) -> str:
        return str(row)


def fit_mix(model: WordModel, sample: int = 20_000) -> dict[str, Any]:
    """The article share whose passages repeat words as often as the real ones (grid 0..0.95 by 0.05)."""
    real, owner = model.real_passages()
    target = burstiness(real)
    best: tuple[float, float] | None = None
    for mix in np.round(np.arange(0.0, 0.96, 0.05), 2).tolist():
        gen = GeneratedPassages(sample, model, "articles", mix, seed=99)
        _, texts, _ = gen.word_ids(0)
        gap = abs(burstiness(texts) - target)
        if best is None or gap < best[1]:
            best = (mix, gap)
    assert best is not None
    mix = best[0]
    _, texts, gen_owner = GeneratedPassages(sample, model, "articles", mix, seed=99).word_ids(0)
    _, iid_texts, iid_owner = GeneratedPassages(sample, model, "iid", seed=99).word_ids(0)
    return {"mix": mix, "real_passages": len(real), "burstiness_real": round(target, 4),
            "burstiness_articles": round(burstiness(texts), 4), "burstiness_iid": round(burstiness(iid_texts), 4),
            "locality_real": round(locality(real, owner), 4), "locality_articles": round(locality(texts, gen_owner), 4)}
