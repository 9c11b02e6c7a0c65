#!/usr/bin/env python3
r"""
Repairs the mojibake of the TinyStories text (UTF-8 read as Windows-1252), then writes its
typographic punctuation as ASCII. data/prepare_tinystories.py applies prepare_text() to every
story it reads (the local sample and the --download files alike); data/README.md has the
counts and the reasons.

1. Exact repair (repair_mojibake). The map is built, not listed by hand: every candidate
   character (the Unicode blocks in CANDIDATE_BLOCKS: Latin-1 Supplement, Latin
   Extended-A, General Punctuation, Currency Symbols, Letterlike Symbols) is encoded as
   UTF-8 and those bytes decoded as cp1252; where that decoding exists (cp1252 leaves the
   bytes 0x81 0x8D 0x8F 0x90 0x9D undefined), the resulting string maps back to the
   character: "\u00e2\u20ac\u2122" -> U+2019, "\u00e2\u20ac\u0153" -> U+201C,
   "\u00c3\u00a9" -> U+00E9. With lowercased=True (train_head_lowercase.txt, whose text
   was lowercased after the damage) the lowercase form of each such string maps to the
   character's lowercase form too ("\u00c2\u00ab".lower() = "\u00e2\u00ab" -> U+00AB,
   "\u00c3\u00b1" -> "\u00e3\u00b1" -> U+00F1), unless that form is itself an exact
   string of another character, which then wins ("\u00e2\u20ac\u0152" (U+200C) lowercases
   to U+201C's string). Longest strings first.

2. Damaged sequences (the last byte lost). "\u00e2\u20ac" (the bytes E2 80) not followed by
   a character that completes it is what is left of a character whose third byte cp1252
   cannot decode and that was dropped: 81 8D 8F 90 9D, i.e. U+2001 (em quad), U+200D (zero
   width joiner), U+200F (right-to-left mark), U+2010 (hyphen) or U+201D (right double
   quotation mark). The rule:
     - between two letters ("dog\u00e2\u20acs") it is U+2019, the apostrophe whose third
       byte was cut off (kind "lost_byte_apostrophe");
     - everywhere else it is U+201D (kind "lost_byte_quote"): the only quotation mark of the
       five, and what the measured contexts show (closing quotes after . ! ? , or a word,
       before a space, a newline or punctuation).
   Any other leftover of a lead character followed by cp1252 continuation characters that
   maps to nothing (e.g. a lone "\u00c3" of the five letters C3 81/8D/8F/90/9D) is left as it
   is and counted as "unmappable" (find_mojibake reports it); the sample has none.

3. ASCII punctuation (normalize_punctuation), applied to every character of the kind,
   repaired or not: single quotes U+2018 U+2019 U+201A U+201B -> ', double quotes U+201C
   U+201D U+201E U+201F and the guillemets U+00AB U+00BB -> ", dashes U+2010-U+2015 -> -,
   the ellipsis U+2026 -> ..., the no-break and typographic spaces (U+00A0, U+2000-U+200A,
   U+202F, U+205F) -> a space, and the zero-width U+200B U+200C U+200D U+2060 U+FEFF
   removed. Letters (e, n with accents ...) are kept. Why: the sample's undamaged text is
   ASCII ("'" and '"' thousands of times; not one genuine curly quote: every non-ASCII
   character in it is mojibake), so the repaired text says the same thing with the same
   characters; and a 512-piece SentencePiece vocabulary with character_coverage 1.0 gives
   every character that occurs a piece of its own (the tokenizer built from the damaged
   text spent 14 of its 253 pieces on the mojibake characters).

Usage (counts per file, and a check that nothing is left):
  python3 data/text_repair.py FILE [--lowercased] [FILE [--lowercased] ...]
"""

import collections
import re
import sys
import unicodedata

# the characters whose mojibake is repaired: (first, last) code points
CANDIDATE_BLOCKS = (
    (0x00A0, 0x00FF),  # Latin-1 Supplement (letters with accents, guillemets, no-break space)
    (0x0100, 0x017F),  # Latin Extended-A
    (0x2000, 0x206F),  # General Punctuation (quotes, dashes, ellipsis, spaces)
    (0x20A0, 0x20CF),  # Currency Symbols (euro sign)
    (0x2100, 0x214F),  # Letterlike Symbols (trade mark sign)
)

# the bytes a strict cp1252 decoder cannot decode
CP1252_UNDEFINED = bytes([0x81, 0x8D, 0x8F, 0x90, 0x9D])

# the remnant of E2 80 + an undefined byte, and what it becomes (see the docstring)
LOST_BYTE_REMNANT = "\u00e2\u20ac"
LOST_BYTE_QUOTE = "\u201d"
LOST_BYTE_APOSTROPHE = "\u2019"

NORMALIZE = {}
NORMALIZE.update({c: "'" for c in "\u2018\u2019\u201a\u201b"})
NORMALIZE.update({c: '"' for c in "\u201c\u201d\u201e\u201f\u00ab\u00bb"})
NORMALIZE.update({c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015"})
NORMALIZE["\u2026"] = "..."
NORMALIZE.update({c: " " for c in "\u00a0\u202f\u205f" + "".join(map(chr, range(0x2000, 0x200B)))})
NORMALIZE.update({c: "" for c in "\u200b\u200c\u200d\u2060\ufeff"})
_RE_NORMALIZE = re.compile("[" + re.escape("".join(NORMALIZE)) + "]")

# a version of the rules above: data/prepare_tinystories.py stores it in its manifest, so
# shards and tokenizers made from text repaired otherwise (or not at all) are rebuilt
VERSION = "cp1252-mojibake-v1+ascii-punctuation-v1"


def _cp1252(b):
    try:
        return b.decode("cp1252")
    except UnicodeDecodeError:
        return None


def candidates():
    for lo, hi in CANDIDATE_BLOCKS:
        for cp in range(lo, hi + 1):
            yield chr(cp)


def build_maps():
    """(exact, lowercased): {mojibake string: character}. exact holds the cp1252 reading of
    every candidate's UTF-8 bytes; lowercased the lowercase forms of those strings that are
    not exact strings themselves, mapped to the character's lowercase form (ambiguous forms,
    two characters whose strings lowercase alike, are left out)."""
    exact = {}
    for ch in candidates():
        m = _cp1252(ch.encode("utf-8"))
        if m is not None:
            assert m not in exact, (m, ch, exact.get(m))
            exact[m] = ch
    lower, ambiguous = {}, set()
    for m, ch in exact.items():
        ml = m.lower()
        if ml == m or ml in exact:
            continue
        if ml in lower and lower[ml] != ch.lower():
            ambiguous.add(ml)
        lower[ml] = ch.lower()
    for ml in ambiguous:
        del lower[ml]
    return exact, lower


EXACT, LOWERCASED = build_maps()


def lost_byte_candidates(remnant):
    """The candidate characters whose UTF-8 ends in a byte cp1252 cannot decode and whose
    other bytes read as remnant: for "\u00e2\u20ac" U+2001 U+200D U+200F U+2010 U+201D."""
    out = []
    for ch in candidates():
        b = ch.encode("utf-8")
        if len(b) > 1 and b[-1] in CP1252_UNDEFINED and _cp1252(b[:-1]) == remnant:
            out.append(ch)
    return out


assert LOST_BYTE_QUOTE in lost_byte_candidates(LOST_BYTE_REMNANT)


# cp1252's reading of the continuation bytes 0x80-0xBF (the undefined ones left out), and of
# the lead bytes 0xC2-0xF4, with their lowercase forms: what a mojibake sequence is made of
CONT_CHARS = "".join(sorted({c for b in range(0x80, 0xC0) if (c := _cp1252(bytes([b])))}
                            | {c.lower() for b in range(0x80, 0xC0) if (c := _cp1252(bytes([b])))}))
LEAD_CHARS = "".join(sorted({c for b in range(0xC2, 0xF5) for c in (_cp1252(bytes([b])),
                                                                     _cp1252(bytes([b])).lower())}))
# a lead character and the continuation characters after it: every string of the maps is the
# start of such a run (2 or 3 characters: the candidates' UTF-8 is 2 or 3 bytes long)
_RE_SUSPECT = re.compile("[" + re.escape(LEAD_CHARS) + "][" + re.escape(CONT_CHARS) + "]+")
assert {len(k) for k in list(EXACT) + list(LOWERCASED)} == {2, 3}
assert all(re.fullmatch(_RE_SUSPECT, k) for k in list(EXACT) + list(LOWERCASED) + [LOST_BYTE_REMNANT])


def repair_mojibake(text, lowercased=False, counts=None):
    """text with its mojibake replaced by the characters it came from (rules 1 and 2 of the
    docstring). counts (a collections.Counter, optional) gets +1 per repair under
    (kind, sequence, character), kind one of "exact", "lowercased", "lost_byte_quote",
    "lost_byte_apostrophe"."""
    table = {**EXACT, **LOWERCASED} if lowercased else EXACT

    def sub(m):
        run = m.group()  # a lead character and continuation characters: the longest string
        for n in (3, 2):  # of the map it starts with, else the lost-byte remnant, else as is
            s = run[:n]
            if len(s) == n and s in table:
                ch, kind = table[s], ("exact" if s in EXACT else "lowercased")
                break
        else:
            if not run.startswith(LOST_BYTE_REMNANT):
                return run
            s, i, j = LOST_BYTE_REMNANT, m.start(), m.start() + 2
            between_letters = i > 0 and j < len(text) and text[i - 1].isalpha() and text[j].isalpha()
            ch, kind = ((LOST_BYTE_APOSTROPHE, "lost_byte_apostrophe") if between_letters
                        else (LOST_BYTE_QUOTE, "lost_byte_quote"))
        if counts is not None:
            counts[(kind, s, ch)] += 1
        return ch + run[len(s):]

    return _RE_SUSPECT.sub(sub, text)


def normalize_punctuation(text):
    """Rule 3 of the docstring: typographic quotes, dashes, ellipsis and spaces as ASCII."""
    return _RE_NORMALIZE.sub(lambda m: NORMALIZE[m.group()], text)


def find_mojibake(text):
    """The sequences of text that still look like mojibake: a cp1252 lead character (or its
    lowercase form) followed by cp1252 continuation characters (U+0080-U+00BF's readings and
    their lowercase forms). [(offset, sequence)]."""
    return [(m.start(), m.group()) for m in _RE_SUSPECT.finditer(text)]


def prepare_text(text, lowercased=False, counts=None):
    """What data/prepare_tinystories.py trains on: the repair, then ASCII punctuation.
    counts also gets ("unmappable", sequence, "") for what find_mojibake still finds."""
    if text.isascii():  # most stories: nothing to do
        return text
    out = normalize_punctuation(repair_mojibake(text, lowercased, counts))
    if counts is not None:
        for _, s in find_mojibake(out):
            counts[("unmappable", s, "")] += 1
    return out


def summarize(counts):
    """{kind: n} and a readable list of (kind, sequence, character, n), largest first."""
    kinds = collections.Counter()
    for (kind, _, _), n in counts.items():
        kinds[kind] += n
    rows = sorted(((k, s, c, n) for (k, s, c), n in counts.items()), key=lambda r: (-r[3], r[0], r[1]))
    return dict(kinds), rows


def _name(c):
    return "" if not c else ("U+%04X %s" % (ord(c), unicodedata.name(c, "?")))


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    files, i = [], 0
    while i < len(argv):
        low = i + 1 < len(argv) and argv[i + 1] == "--lowercased"
        files.append((argv[i], low))
        i += 2 if low else 1
    bad = 0
    for path, low in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        counts = collections.Counter()
        out = prepare_text(text, low, counts)
        kinds, rows = summarize(counts)
        print(f"{path}{' (lowercased)' if low else ''}: {len(text):,} characters -> {len(out):,}; "
              + ", ".join(f"{k} {n:,}" for k, n in sorted(kinds.items())))
        for k, s, c, n in rows:
            print(f"  {n:6,}  {k:21s} {s.encode('unicode_escape').decode():28s} {s!s:6s} -> {_name(c)}")
        if any(k.startswith("lost_byte") for k in kinds):
            print("  (the candidates of " + ascii(LOST_BYTE_REMNANT) + ": " + ", ".join(
                _name(c) for c in lost_byte_candidates(LOST_BYTE_REMNANT)) + ")")
        non_ascii = collections.Counter(c for c in out if ord(c) > 127)
        print("  non-ASCII characters left: " + (", ".join(f"{c} {_name(c)} x{n}" for c, n in
                                                          non_ascii.most_common()) or "none"))
        bad += kinds.get("unmappable", 0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
