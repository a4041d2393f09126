"""The conservative auto-decision policy for flagged near-duplicate pairs (``--auto-review``).

Why a policy and not "exclude everything": similarity flags template siblings
("Who directed Titanic?" vs "Who directed Avatar?") as readily as rewordings,
and excluding every flag empties small sources (Bamboogle has exactly the 125
questions the plan needs, and 5 of them are flagged falsely). The card's rule:
a pair is *retained as distinct* only when the two questions ask something
different, which the policy recognises in four ways, checked on the normalised
word tokens the two questions do not share:

1. **years / numbers** differ: both questions name one and they differ (``1994`` vs ``1995``;
   ``one`` and ``1`` are not compared); a year only one side names is a qualifier
   ("lost in space *2018*" vs "the new lost in space");
2. the **answer slot** differs (a different question word: who / when / where / what / how many ...;
   "which" is "what", and "which country" / "what year" ask where / when);
3. the **reasoning target** differs (first/last, oldest/youngest, before/after, more/less, not ...);
3b. the **answer type** differs ("what *rocket* ..." vs "what *mission* ...");
4. a **changed entity**: every word only the selected question has is a named entity
   (a capitalised word that does not open it), replaced by one to three words of the
   training question, and no word of one resembles a word of the other (character similarity < 70 and
   neither a prefix of the other), so "USA" vs "us" or "colour" vs "color" is *not* a
   changed entity, and a rephrasing with many changed words is not a substitution;
4b. a **substituted term**, for uncased questions (NQ is all lower case, so capitals cannot
   mark its entities): the two questions are aligned word by word (``difflib``); the words
   of the differing stretches, minus stopwords and generic paraphrase words (``GENERIC``:
   "come out" vs "released", "wrote" vs "written"), minus every pair that is a spelling
   variant, inflection or abbreviation of each other (``_variant``: "usa"/"us",
   "colour"/"color", "drafting"/"draft", "ww1"/"world war one"), leave content words on
   *both* sides of one replaced stretch (at most three a side), at most six in all ("who does the voice of
   marceline" vs "... of jake", "psg" vs "madrid"), or at most four in all when the swap
   moved ("season 3 of the riveras" vs "jane the virgin season 3"). Words only one side adds ("a *principal* ore", "in norse *mythology*")
   are not a substitution: that is an elaboration of the same question.

Everything else -- spelling, abbreviation, word order, an added or dropped word, a
generic paraphrase -- is **excluded** as a near-verbatim rewording. Each decision carries
its reason and ``decided_by: auto-review policy`` in the release, so a reviewer can audit
the policy's calls. ``tests/benchmark/test_audit_policy.py`` holds a table of real flagged
pairs (from the Eval-1400 build) with the decision a reviewer makes.

Known limits (it reads words, not meaning): a paraphrase by synonyms the lists do not
know ("used in the production of" vs "included in the ingredients of") reads as a
changed term and is retained; a question that adds a qualifier to a distinct entity
("adore you (jessie ware song)" vs "to you (song)") reads as an elaboration and is
excluded. Review the ``changed entity or term`` calls first: they are the least certain.
"""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple

from rapidfuzz import fuzz

from aethersearch.release.verify_release_template import POLICY

__all__ = ["POLICY_NAME", "PolicyDecision", "auto_decide"]

#: the ``decided_by`` of the policy's decisions; the release's standalone verifier reads the same name
POLICY_NAME = POLICY

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_NUMBER = re.compile(r"^\d+(st|nd|rd|th|s)?$")
ANSWER_SLOTS = frozenset({"who", "whom", "whose", "when", "where", "what", "which", "why", "how", "many", "much"})
_AUX = frozenset({"is", "was", "are", "were", "did", "does", "do", "has", "had", "have", "the", "a", "an", "of", "in"})
REASONING = frozenset({"first", "last", "second", "third", "oldest", "youngest", "older", "younger", "before",
                       "after", "more", "less", "most", "least", "largest", "smallest", "biggest", "highest",
                       "lowest", "longest", "shortest", "earliest", "latest", "earlier", "later", "not", "never",
                       "same", "different", "both", "either", "neither", "born", "died", "founded", "father",
                       "mother", "son", "daughter", "husband", "wife", "director", "author", "sibling",
                       "brother", "sister", "spouse", "child", "children", "grandfather", "grandmother", "uncle",
                       "aunt", "nephew", "niece", "stop", "stopped", "end", "ended", "ends"})
STOPWORDS = frozenset({"the", "a", "an", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or",
                       "is", "was", "are", "were", "did", "does", "do", "be", "been", "has", "had", "have", "that",
                       "this", "it", "its", "as", "s", "into", "than", "then", "name", "called", "they", "their",
                       "them", "he", "she", "his", "her", "we", "you", "me", "my", "our", "mine", "like", "being",
                       "will", "can", "there", "up", "about", "which", "what", "who", "whom", "when", "where",
                       "how", "why", "ever"})
#: Words that paraphrase without changing what is asked (release verbs, writing, playing, "new"/"next").
GENERIC = frozenset({"come", "comes", "coming", "came", "out", "release", "released", "releases", "releasing",
                     "debut", "debuts", "premiere", "premieres", "premiered", "start", "starts", "started",
                     "begin", "begins", "began", "air", "airs", "aired", "made", "make", "created", "create",
                     "write", "writes", "wrote", "written", "sing", "sings", "sang", "sung", "play", "plays",
                     "played", "voice", "voiced", "voices", "new", "next", "latest", "original", "mainly",
                     "main", "principal", "obtained", "derived", "derive", "get", "got", "gets", "take",
                     "takes", "took", "happen", "happened", "office",
                     "legend", "concept", "origin", "story", "ever", "actually", "exactly", "really"})
_MAX_SIDE = 3  # content words per side of one replaced stretch: a name, not a rephrased clause
_MAX_SUBSTITUTED = 6
_MAX_MOVED = 4
#: One word for two spellings of the same thing, applied before aligning ("theme tune" = "theme song").
_SYNONYM = {"tune": "song", "movie": "film", "movies": "films", "way": "direction"}


class PolicyDecision(NamedTuple):
    """The policy's verdict on one pair and why."""

    decision: str  # "exclude" | "retain"
    reason: str


_SAME_SLOT = {"whom": "who", "which": "what"}  # one answer slot, two spellings


def _tokens(text: str) -> set[str]:
    return {_SAME_SLOT.get(t, t) for t in _WORD.findall(text.casefold())}


_KIND_OF = frozenset({"type", "kind", "sort", "form"})


def _answer_type(text: str) -> str | None:
    """The noun a wh-question asks for ("what *rocket* was used ..."), if it names one right after the wh-word."""
    words = _WORD.findall(text.casefold())
    for i, word in enumerate(words[:-1]):
        if word in ("what", "which", "whose"):
            following = words[i + 1]
            if following in _KIND_OF and words[i + 2:i + 3] == ["of"] and len(words) > i + 3:
                following = words[i + 3]  # "what type of fish" asks for a fish
            return None if following in _AUX or following in ANSWER_SLOTS else following
    return None


def _proper_nouns(text: str) -> set[str]:
    """Capitalised words that do not open the question: the selected question's named entities."""
    words = _WORD.findall(text)
    return {w.casefold() for w in words[1:] if w[:1].isupper()}


def _similar(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a) or fuzz.ratio(a, b) >= 70


def _variant(a: str, b: str) -> bool:
    """Spelling variant, inflection or abbreviation: "colour"/"color", "draft"/"drafting", "usa"/"us", "ww1"."""
    if min(len(a), len(b)) >= 2 and (a.startswith(b) or b.startswith(a)):
        return True
    common = len(next((a[:i] for i in range(min(len(a), len(b)), 0, -1) if a[:i] == b[:i]), ""))
    return common >= 4 or fuzz.ratio(a, b) >= 85


def _acronym(word: str, words: list[str]) -> bool:
    """``word`` abbreviates a run of ``words`` by their initials ("ww1" for "world war one", "us" for "united states")."""
    letters = "".join(ch for ch in word if ch.isalpha())
    initials = "".join(w[0] for w in words)
    return len(letters) >= 2 and letters in initials


def _letters_joined(words: list[str]) -> list[str]:
    """Runs of single letters as one word: "c o p d" is the abbreviation "copd"."""
    out: list[str] = []
    run = ""
    for word in [*words, ""]:
        if len(word) == 1 and word.isalpha():
            run += word
            continue
        if run:
            out.append(run)
            run = ""
        if word:
            out.append(word)
    return out


def _substituted(selected: str, training: str) -> tuple[set[str], set[str]]:
    """Content words one aligned stretch swaps for others: ({selected's}, {training's}), or two empty sets.

    The questions are aligned word by word; a word of a differing stretch that is a
    variant of a word in the other question's differing stretches moved or was
    respelled ("film" ... "filmed"), so it is dropped. A substitution is a *replaced*
    stretch that still has content words on both sides; words only inserted or only
    deleted elsewhere are an elaboration, not a substitution.
    """
    a = [_SYNONYM.get(w, w) for w in _letters_joined(_WORD.findall(selected.casefold()))]
    b = [_SYNONYM.get(w, w) for w in _letters_joined(_WORD.findall(training.casefold()))]
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    mine = [w for tag, i1, i2, _, _ in opcodes if tag != "equal" for w in a[i1:i2]]
    theirs = [w for tag, _, _, j1, j2 in opcodes if tag != "equal" for w in b[j1:j2]]

    def kept(words: list[str], other: list[str]) -> set[str]:
        return {w for w in words if w not in STOPWORDS and w not in GENERIC
                and not any(_variant(w, o) for o in other) and not _acronym(w, other)}

    left, right = set(), set()
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "replace":
            here, there = kept(a[i1:i2], theirs), kept(b[j1:j2], mine)
            if here and there and len(here) <= _MAX_SIDE and len(there) <= _MAX_SIDE:
                left |= here
                right |= there
    if left and len(left) + len(right) <= _MAX_SUBSTITUTED:
        return left, right
    # a swap the alignment splits ("season 3 of the riveras" vs "jane the virgin season 3"): only a small one
    left, right = kept(mine, theirs), kept(theirs, mine)
    return (left, right) if left and right and len(left) + len(right) <= _MAX_MOVED else (set(), set())


def _versus(pair: tuple[set[str], set[str]]) -> str:
    """``(a, b vs c)``: what only the selected and only the training question have ('-' for nothing)."""
    return f"({', '.join(sorted(pair[0])) or '-'} vs {', '.join(sorted(pair[1])) or '-'})"


#: "which country" asks where, "what year" asks when: one answer slot in two forms.
_SLOT_OF_KIND = {**dict.fromkeys(("country", "city", "state", "place", "location", "town", "region", "continent",
                                  "nation"), "where"),
                 **dict.fromkeys(("year", "date", "day", "month", "century", "decade"), "when")}
_SAME_KIND = {"way": "direction"}


def _slot_tokens(tokens: set[str], kind: str | None) -> set[str]:
    """The question's answer-slot words, a typed "what/which <place|time>" counted as where/when."""
    slots = tokens & ANSWER_SLOTS
    if kind in _SLOT_OF_KIND:
        slots = (slots - {"what"}) | {_SLOT_OF_KIND[kind]}
    return slots


def _kind_covered(kind: str | None, other: set[str], other_slots: set[str]) -> bool:
    """The other question asks for the same kind of thing: names it (or a variant), or asks where/when for it."""
    if kind is None or _SLOT_OF_KIND.get(kind) in other_slots:
        return True
    kind = _SAME_KIND.get(kind, kind)
    return any(_variant(kind, _SAME_KIND.get(word, word)) for word in other)


def auto_decide(selected: str, training: str) -> PolicyDecision:
    """Decide one flagged pair by the conservative policy (see the module docstring)."""
    mine, theirs = _tokens(selected), _tokens(training)
    only_mine, only_theirs = mine - theirs, theirs - mine
    numbers = ({t for t in only_mine if _NUMBER.match(t)}, {t for t in only_theirs if _NUMBER.match(t)})
    if numbers[0] and numbers[1]:
        return PolicyDecision("retain", f"{POLICY_NAME}: different years/numbers " + _versus(numbers))
    kinds = (_answer_type(selected), _answer_type(training))
    slot_words = (_slot_tokens(mine, kinds[0]), _slot_tokens(theirs, kinds[1]))
    slots = (slot_words[0] - slot_words[1], slot_words[1] - slot_words[0])
    if slots[0] or slots[1]:
        return PolicyDecision("retain", f"{POLICY_NAME}: different answer slot " + _versus(slots))
    if not _kind_covered(kinds[0], theirs, slot_words[1]) or not _kind_covered(kinds[1], mine, slot_words[0]):
        return PolicyDecision("retain", f"{POLICY_NAME}: different answer slot (asks for "
                              f"{kinds[0] or '-'} vs {kinds[1] or '-'})")
    targets = (only_mine & REASONING, only_theirs & REASONING)
    if targets[0] or targets[1]:
        return PolicyDecision("retain", f"{POLICY_NAME}: different reasoning target " + _versus(targets))
    content = (only_mine - STOPWORDS, only_theirs - STOPWORDS)
    # every word only the selected question has is a named entity, replaced by one to three words
    substitution = bool(content[0]) and content[0] <= _proper_nouns(selected) and 0 < len(content[1]) <= 3
    if substitution and not any(_similar(a, b) for a in content[0] for b in content[1]):
        return PolicyDecision("retain", f"{POLICY_NAME}: changed entity "
                              f"({', '.join(sorted(content[0]))} vs {', '.join(sorted(content[1]))})")
    swapped = _substituted(selected, training)
    if swapped[0] and swapped[1]:
        return PolicyDecision("retain", f"{POLICY_NAME}: changed entity or term " + _versus(swapped))
    return PolicyDecision("exclude", f"{POLICY_NAME}: no changed entity, year, answer slot or reasoning target; "
                          "treated as a rewording of the training question")
