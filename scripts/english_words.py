#!/usr/bin/env python3
"""
The fraction of a text's words that are English, "English" meaning: the word occurs in
the shared TinyStories text (valid_first1000.txt, train_head.txt and
train_head_lowercase.txt of ../shared/data/tinystories; --reference to choose others).
Meant for the stories train_llama samples: the target for the 512-token models
(make tinystories on the CPU: stories800K; before it stories260K) is >= 97% on the final sample.

A word (the same rule for the text and for the reference):
  1. mojibake of the TinyStories text is undone first: "\u00e2\u20ac\u2122" and "\u00e2\u20ac\u02dc" (UTF-8
     curly apostrophes read as cp1252) become "'", the other "\u00e2\u20ac" sequences (quotes,
     dashes) a space; the curly apostrophes U+2019 and U+2018 become "'";
  2. the text is lowercased;
  3. a word is a maximal run of letters (Unicode letters: not digits, not "_") with
     apostrophes only inside it, between letters: "don't", "lily's" are one word each,
     "dogs'" is "dogs", "well-known" is "well" and "known", "3pm" is "pm".
Digits, punctuation, whitespace and any other character only separate words. The
special pieces "<s>", "</s>", "<unk>" and valid_first1000.txt's "<|endoftext|>" lines
are removed before counting. A word counts as English when it occurs, so defined, in
the reference; there is no stemming ("spot's" counts only if "spot's" occurs there).
Words with a non-ASCII letter are left out of the reference: in the TinyStories text
they are all remnants of mojibake ("caf\u00e3" of "caf\u00c3\u00a9", a lone "\u00e2"), so in a
text they always count as non-words.

A sample that train_llama cut at --sample-len may end in the middle of a word: in the
sample modes, when the sample's text ends with a letter, its last word is left out of
the count (the report says so); --keep-last-word counts it.

Input: a file, or stdin ("-" or nothing); or train_llama's main.log with --last-sample
(the last "--- sample ---" ... "--------------" block, as story_sample in
llmc/train/story_sampler.h prints it) or --all-samples (one line per sample, then the last in full).

Output: the fraction, the counts, and the non-words with how often each occurs.
--min F: exit status 1 when the fraction is below F (e.g. --min 0.97); 2 on bad input.
--json: one JSON object instead of the text report.

  python3 scripts/english_words.py --last-sample runs/tinystories_260K/main.log --min 0.97
  python3 scripts/english_words.py story.txt
  head -c 20000 ../shared/data/tinystories/valid_first1000.txt | python3 scripts/english_words.py
"""

import argparse
import collections
import json
import os
import re
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SHARED = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data", "tinystories"))
REFERENCE_FILES = ("valid_first1000.txt", "train_head.txt", "train_head_lowercase.txt")

SAMPLE_START = "--- sample ---\n"
SAMPLE_END = "\n--------------\n"

WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")
MOJIBAKE_APOSTROPHE = re.compile("\u00e2\u20ac[\u2122\u02dc]")           # \u2019, \u2018 as cp1252
MOJIBAKE_OTHER = re.compile("\u00e2\u20ac[\u0153\u201c\u201d\u0160\u0161\u00a6\u009d]?")  # quotes, dashes, ...
SPECIALS = re.compile(r"</?s>|<unk>|<\|endoftext\|>")


def die(msg):
    print(f"english_words: error: {msg}", file=sys.stderr)
    sys.exit(2)


def words_of(text):
    """The words of text, in order (see the docstring)."""
    text = SPECIALS.sub(" ", text)
    text = MOJIBAKE_APOSTROPHE.sub("'", text)
    text = MOJIBAKE_OTHER.sub(" ", text)
    text = text.replace("\u2019", "'").replace("\u2018", "'").lower()
    return WORD.findall(text)


def reference_words(paths):
    vocab = set()
    for p in paths:
        try:
            with open(p, "r", encoding="utf-8", errors="replace") as f:
                vocab.update(w for w in words_of(f.read()) if w.isascii())
        except OSError as e:
            die(f"cannot read the reference {p}: {e}\n  (pass --shared-dir DIR or --reference FILE...)")
    return vocab


def samples_of(log_text, path):
    """The texts of every sample block of a train_llama main.log, in order. A block whose
    end marker is missing (a run still writing its sample) is left out."""
    out, pos = [], 0
    while True:
        i = log_text.find(SAMPLE_START, pos)
        if i < 0:
            break
        j = log_text.find(SAMPLE_END, i + len(SAMPLE_START))
        if j < 0:
            break
        out.append(log_text[i + len(SAMPLE_START):j])
        pos = j + len(SAMPLE_END)
    if not out:
        die(f"no sample in {path} (blocks between \"--- sample ---\" and \"--------------\" lines); "
            "was the run started with --sample-every and a --tokenizer?")
    return out


def measure(text, vocab, drop_cut_word):
    words = words_of(text)
    cut = None
    if drop_cut_word and words and text.rstrip("\n") and text.rstrip("\n")[-1].isalpha():
        cut = words.pop()
    bad = collections.Counter(w for w in words if w not in vocab)
    n_bad = sum(bad.values())
    return {"words": len(words), "english": len(words) - n_bad,
            "fraction": (len(words) - n_bad) / len(words) if words else 0.0,
            "non_words": dict(bad.most_common()), "left_out_last_word": cut}


def report(r, label):
    print(f"english_words: {label}: {r['english']:,} of {r['words']:,} words occur in the TinyStories "
          f"text: {100.0 * r['fraction']:.2f}%")
    if r["left_out_last_word"] is not None:
        print(f"  (the sample ends inside a word: its last word \"{r['left_out_last_word']}\" is not "
              "counted; --keep-last-word counts it)")
    if r["non_words"]:
        nw = ", ".join(w if n == 1 else f"{w} x{n}" for w, n in r["non_words"].items())
        print(f"  non-words ({r['words'] - r['english']} in all, {len(r['non_words'])} distinct): {nw}")
    else:
        print("  non-words: none")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?", default="-", help="text to measure (default: stdin)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--last-sample", metavar="MAIN_LOG", help="measure the last sample of train_llama's main.log")
    g.add_argument("--all-samples", metavar="MAIN_LOG", help="one line per sample of main.log, then the last in full")
    ap.add_argument("--min", type=float, default=None, help="exit 1 when the fraction is below this (e.g. 0.97)")
    ap.add_argument("--shared-dir", default=DEFAULT_SHARED, help="the TinyStories sample (default: %(default)s)")
    ap.add_argument("--reference", nargs="+", metavar="FILE",
                    help="reference texts instead of the three files of --shared-dir")
    ap.add_argument("--keep-last-word", action="store_true",
                    help="count a sample's last word even when the sample ends inside it")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.min is not None and not 0.0 <= args.min <= 1.0:
        die("--min is a fraction in [0, 1], e.g. 0.97")

    log_path = args.last_sample or args.all_samples
    if log_path and args.file != "-":
        die("give either a text file or --last-sample/--all-samples MAIN_LOG, not both")
    src = log_path or args.file
    try:
        if src == "-":
            text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
        else:
            with open(src, "rb") as f:
                text = f.read().decode("utf-8", errors="replace")
    except OSError as e:
        die(f"cannot read {src}: {e}")
    refs = args.reference or [os.path.join(args.shared_dir, n) for n in REFERENCE_FILES]
    vocab = reference_words(refs)

    per_sample = []
    if log_path:
        samples = samples_of(text, log_path)
        per_sample = [measure(s, vocab, not args.keep_last_word) for s in samples]
        r, label = per_sample[-1], f"last of {len(samples)} sample(s) in {log_path}"
    else:
        r, label = measure(text, vocab, False), ("stdin" if src == "-" else src)
    if r["words"] == 0:
        die(f"no words in {label}")
    ok = args.min is None or r["fraction"] >= args.min

    if args.json:
        out = dict(r, source=label, reference_files=refs, reference_words=len(vocab))
        if args.min is not None:
            out.update(min=args.min, ok=ok)
        if args.all_samples:
            out["samples"] = [{k: s[k] for k in ("words", "english", "fraction")} for s in per_sample]
        print(json.dumps(out, ensure_ascii=False))
    else:
        if args.all_samples:
            for k, s in enumerate(per_sample):
                print(f"english_words: sample {k + 1}: {s['english']:,} of {s['words']:,} words, "
                      f"{100.0 * s['fraction']:.2f}%")
        report(r, label)
        print(f"  reference: {len(vocab):,} distinct words in {len(refs)} file(s)")
        if args.min is not None:
            print(f"english_words: {'PASS' if ok else 'FAIL'}: {100.0 * r['fraction']:.2f}% "
                  f"{'>=' if ok else '<'} {100.0 * args.min:.2f}%")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
