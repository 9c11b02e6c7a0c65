#!/usr/bin/env python3
"""Checks the TinyStories text repair (data/text_repair.py, applied by data/prepare_tinystories.py).

  python3 dev/test/test_text_repair.py [--shared-dir DIR] [--planted]

One line PASS name / FAIL name: why (SKIP name: why where the shared sample is absent) per check;
exit status non-zero on any failure.
  - examples: known mojibake from the sample repaired exactly (repair_mojibake: the original
    characters; prepare_text: with ASCII punctuation), the lowercased forms only in lowercased text;
  - roundtrip: every character of the map, written as UTF-8 read as cp1252, comes back;
  - passthrough: undamaged text is unchanged (ASCII stories of the sample, accented letters;
    repair_mojibake also leaves real curly quotes alone);
  - sample_*: the text data/prepare_tinystories.py tokenizes (its local_sources, all three files,
    the recased lowercase part included) has no mojibake left, while the raw files do (so the
    detector finds what it must);
  - stale_manifest: shards prepared without this repair (a manifest without its version) are
    not "up to date", so make data / make data512 rebuild them.
--planted: the same checks with the repair replaced by the identity (the unrepaired text):
they must FAIL, which shows that they can.
Interpreter: the one `bash scripts/ensure_python_deps.sh` prints (prepare_tinystories needs numpy).
"""
import argparse
import collections
import json
import os
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "data"))
import text_repair  # noqa: E402
import prepare_tinystories  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
from checks import report  # noqa: E402


def skip(name, why):
    print("SKIP %s: %s" % (name, why))


# (name, damaged text, lowercased, after repair_mojibake, after prepare_text); the damaged forms
# are quoted from the shared sample (valid_first1000.txt, train_head*.txt)
EXAMPLES = [
    ("apostrophe", "Lily\u00e2\u20ac\u2122s dog", False, "Lily\u2019s dog", "Lily's dog"),
    ("double_quotes_lost_byte", "\u00e2\u20ac\u0153Wow,\u00e2\u20ac John said.", False,
     "\u201cWow,\u201d John said.", '"Wow," John said.'),
    ("closing_quote_before_newline", "a brave sailor!\u00e2\u20ac\n", False, "a brave sailor!\u201d\n", 'a brave sailor!"\n'),
    ("em_dash", "a noise\u00e2\u20ac\u201dit was", False, "a noise\u2014it was", "a noise-it was"),
    ("en_dash", "strange \u00e2\u20ac\u201c there", False, "strange \u2013 there", "strange - there"),
    ("single_quotes", "\u00e2\u20ac\u02dcAhhh-Choo!\u00e2\u20ac\u2122, it said", False,
     "\u2018Ahhh-Choo!\u2019, it said", "'Ahhh-Choo!', it said"),
    ("hair_space", "an on\u00e2\u20ac\u0160/\u00e2\u20ac\u0160off switch", False,
     "an on\u200a/\u200aoff switch", "an on / off switch"),
    ("ellipsis", "and then\u00e2\u20ac\u00a6 he fell", True, "and then\u2026 he fell", "and then... he fell"),
    ("latin1_letter", "the nearby caf\u00c3\u00a9.", False, "the nearby caf\u00e9.", "the nearby caf\u00e9."),
    ("lowercased_letters", "mam\u00e3\u00a1, \u00e3\u00a9l me quit\u00e3\u00b3 mi mu\u00e3\u00b1eca", True,
     "mam\u00e1, \u00e9l me quit\u00f3 mi mu\u00f1eca", "mam\u00e1, \u00e9l me quit\u00f3 mi mu\u00f1eca"),
    ("lowercased_guillemets", "\u00e2\u00abyes!\u00e2\u00bb said jane. \"\u00e2\u00a1mira!\"", True,
     "\u00abyes!\u00bb said jane. \"\u00a1mira!\"", "\"yes!\" said jane. \"\u00a1mira!\""),
    ("lowercase_forms_not_in_cased_text", "\u00e2\u00abyes!\u00e2\u00bb", False,
     "\u00e2\u00abyes!\u00e2\u00bb", "\u00e2\"yes!\u00e2\""),
    ("lost_byte_between_letters", "the dog\u00e2\u20acs bone", False, "the dog\u2019s bone", "the dog's bone"),
    ("lost_byte_before_letter", "what a nice sound,\u00e2\u20acthought sue. said, \u00e2\u20acno problem", True,
     "what a nice sound,\u201dthought sue. said, \u201dno problem",
     'what a nice sound,"thought sue. said, "no problem'),
    ("mixed_with_ascii", "\"Let\u00e2\u20ac\u2122s go!\" it's \u00e2\u20ac\u0153fun\u00e2\u20ac", False,
     "\"Let\u2019s go!\" it's \u201cfun\u201d", "\"Let's go!\" it's \"fun\""),
]

CLEAN = [
    "Once upon a time, there was a little girl named Lily. She liked to play outside.\n\n"
    "One day, she said, \"Mom, can I go to the park?\" Her mom said, \"Yes, but be careful - it's cold.\"",
    "Tom had 3 apples... Then 12 more came at 10:45! (Really?) Yes; it's true: 100% & more.\n",
    "caf\u00e9, na\u00efve, Zo\u00eb, \u00a1hola!, ma\u00f1ana, \u00c9l, \u00fcber, stra\u00dfe, p\u00e2te",
    "",
]


def check_examples(repair, prepare):
    for name, damaged, low, repaired, prepared in EXAMPLES:
        got_r = repair(damaged, low)
        got_p = prepare(damaged, low)
        ok = got_r == repaired and got_p == prepared
        report("example_" + name, ok, f"{damaged!r} -> {got_r!r} / {got_p!r}, expected {repaired!r} / {prepared!r}")


def check_roundtrip(planted):
    bad = []
    for ch in text_repair.candidates():
        damaged = ch.encode("utf-8").decode("cp1252", errors="ignore")
        want = ch
        if len(damaged) < len(ch.encode("utf-8")):  # a byte cp1252 cannot decode: no exact form
            continue
        got = damaged if planted else text_repair.repair_mojibake(damaged)
        if got != want:
            bad.append((damaged, got, want))
        got = damaged.lower() if planted else text_repair.repair_mojibake(damaged.lower(), lowercased=True)
        if damaged.lower() in text_repair.LOWERCASED and got != ch.lower():
            bad.append((damaged.lower(), got, ch.lower()))
    n = len(text_repair.EXACT) + len(text_repair.LOWERCASED)
    report("roundtrip_exact_map", not bad and len(text_repair.EXACT) > 300,
           f"{len(bad)} of {n} strings of the map (exact and lowercased) not restored, e.g. {bad[:3]!r}")


def check_passthrough(repair, prepare, stories):
    """stories: the raw validation stories (those without a non-ASCII character are undamaged)."""
    for i, t in enumerate(CLEAN):
        got = repair(t, False)
        report(f"passthrough_clean_{i}", got == t and prepare(t, False) == t, f"{t!r} -> {got!r}")
    real = "He said \u201cHi\u201d \u2014 it\u2019s \u2018ok\u2019\u2026"
    report("passthrough_real_curly_quotes_repair", text_repair.repair_mojibake(real) == real,
           "repair_mojibake changed undamaged Unicode punctuation")
    report("normalize_real_curly_quotes", text_repair.prepare_text(real) == "He said \"Hi\" - it's 'ok'...",
           repr(text_repair.prepare_text(real)))
    if stories is None:
        return
    ascii_stories = [s for s in stories if all(ord(c) < 128 for c in s)]
    changed = [s for s in ascii_stories if prepare(s, False) != s or prepare(s.lower(), True) != s.lower()]
    report("passthrough_undamaged_sample_stories", len(ascii_stories) > 500 and not changed,
           f"{len(changed)} of {len(ascii_stories)} ASCII stories changed")


# what mojibake leaves behind and the repaired, normalised text never has: cp1252's readings of
# the bytes 0x80-0x9F (the euro sign, the trade mark sign, curly quotes ...) and U+0080-U+009F
MOJIBAKE_ONLY = set(c for b in range(0x80, 0xA0)
                    for c in [bytes([b]).decode("cp1252", errors="ignore")] if c) | set(map(chr, range(0x80, 0xA0)))


def leftovers(text):
    found = collections.Counter(s for _, s in text_repair.find_mojibake(text))
    found.update(c for c in text if c in MOJIBAKE_ONLY)
    return found


def check_sample(shared, planted):
    """The text that prepare_tinystories tokenizes, from all three files."""
    names = ["valid_first1000.txt", "train_head.txt", "train_head_lowercase.txt"]
    if not all(os.path.isfile(os.path.join(shared, n)) for n in names):
        skip("sample", f"the shared TinyStories sample is not in {shared}")
        return None
    raw_val = None
    for n in names:  # the detector finds the damage of the raw files
        raw = open(os.path.join(shared, n), encoding="utf-8").read()
        if n == "valid_first1000.txt":
            raw_val = prepare_tinystories.split_endoftext(raw)
        report("sample_raw_damage_detected " + n, sum(leftovers(raw).values()) > 100,
               f"only {sum(leftovers(raw).values())} mojibake sequences found in the raw file")
        # the whole file, through text_repair alone (prepare_tinystories reads only the part of
        # train_head_lowercase.txt after character 942,640: checked below)
        low = n == "train_head_lowercase.txt"
        found = leftovers(raw if planted else text_repair.prepare_text(raw, lowercased=low))
        report("whole_file_no_mojibake_left " + n, not found,
               f"{sum(found.values())} left: {found.most_common(5)!r}")
    original = text_repair.prepare_text
    if planted:
        text_repair.prepare_text = lambda text, lowercased=False, counts=None: text
    try:
        src, _, _ = prepare_tinystories.local_sources(shared, "recase")
        val = list(src["val"]())
        train = list(src["train"]())
        src_keep, _, _ = prepare_tinystories.local_sources(shared, "keep")
        keep = list(src_keep["train"]())
    finally:
        text_repair.prepare_text = original
    parts = {"valid_first1000.txt": val,
             "train_head.txt": train[:src["stats"]["train_head_stories"]],
             "train_head_lowercase.txt (recased)": train[src["stats"]["train_head_stories"]:],
             "train_head_lowercase.txt (kept)": keep[src_keep["stats"]["train_head_stories"]:]}
    for name, stories in parts.items():
        found = leftovers("\n".join(stories))
        report("sample_no_mojibake_left " + name, len(stories) > 500 and not found,
               f"{sum(found.values())} left in {len(stories)} stories: {found.most_common(5)!r}")
    counts = src["repairs"]
    if not planted:
        print("  repairs per file: " + json.dumps(counts))
    return raw_val


def check_stale_manifest(planted):
    """A manifest written before the repair (no text_repair in its settings) is not up to date."""
    with tempfile.TemporaryDirectory() as d:
        inp = os.path.join(d, "input.txt")
        open(inp, "w").write("x")
        old = time.time() - 100
        os.utime(inp, (old, old))
        settings = {"source": "local-sample", "shared_dir": d}
        if not planted:
            settings["text_repair"] = text_repair.VERSION
        with open(os.path.join(d, "tinystories_val_000000.bin"), "wb") as f:
            f.write(b"\0" * 16)
        man = {"settings": dict(settings), "val": {"files": [{"file": "tinystories_val_000000.bin"}]}}
        man["settings"].pop("text_repair", None)  # as every manifest before the repair
        with open(os.path.join(d, prepare_tinystories.MANIFEST), "w") as f:
            json.dump(man, f)
        stale = not prepare_tinystories.up_to_date(d, [inp], settings)
        man["settings"] = settings
        with open(os.path.join(d, prepare_tinystories.MANIFEST), "w") as f:
            json.dump(man, f)
        fresh = bool(prepare_tinystories.up_to_date(d, [inp], settings))
    report("stale_manifest_rebuilt", stale and fresh,
           f"a manifest without the repair's version is {'stale' if stale else 'up to date'}, "
           f"one with it {'up to date' if fresh else 'stale'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared-dir", default=prepare_tinystories.DEFAULT_SHARED)
    ap.add_argument("--planted", action="store_true",
                    help="run the checks on the unrepaired text: they must fail")
    args = ap.parse_args()
    def identity(text, lowercased=False):
        return text

    repair = identity if args.planted else text_repair.repair_mojibake
    prepare = identity if args.planted else text_repair.prepare_text
    check_examples(repair, prepare)
    check_roundtrip(args.planted)
    val = check_sample(args.shared_dir, args.planted)
    check_passthrough(repair, prepare, val)
    check_stale_manifest(args.planted)
    print(f"text_repair: {'ALL PASSED' if checks.failures == 0 else f'{checks.failures} FAILED'}")
    sys.exit(1 if checks.failures else 0)


if __name__ == "__main__":
    main()
