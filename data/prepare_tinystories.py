#!/usr/bin/env python3
r"""
TinyStories -> token shards for train_llama (llm.c's shard format, docs/design.md 5.1).

Shard format: a header of 256 int32 (little-endian): magic 20240520, version 1,
number of tokens; then the tokens as uint16. For vocabularies over 65535 the
magic is 20240801, version 7, and the tokens are uint32.

Tokenizer, two modes:

  --vocab-size 0 (default): the Llama 2 SentencePiece model (32000 pieces, --tokenizer).
      Outputs in data/tinystories/ (train 1,117,144 tokens, val 210,880 on the local sample).

  --vocab-size N (N > 0): trains an N-piece SentencePiece BPE model on the training
      split only, with llama2.c's train_vocab settings (tinystories.py: model_type bpe,
      character_coverage 1.0, byte_fallback, split_digits, allow_whitespace_only_pieces,
      normalization_rule_name identity, add_dummy_prefix, unk_surface " \u2047 ")
      and num_threads 1 on the whole training text (input_sentence_size 0: no sampling,
      so no shuffle): two runs give a byte-identical .model. SentencePiece's input is
      one line per paragraph of every training story (llama2.c writes one story per
      line, and its stories' newlines make those lines paragraphs too). Outputs in
      data/tinystories_spN/: tokN.model, tokN.bin (llama2.c's tokenizer.bin layout, as
      its tokenizer.py export writes it: int32 max_token_length, then per token float32
      score, int32 length, bytes; U+2581 as a space, BOS "\n<s>\n", EOS "\n</s>\n",
      byte pieces as their "<0xXX>" text), the shards encoded with tokN.model and the
      manifest. N=512 is llama2.c's stories260K tokenizer (tok512).
      Measured on the local sample (--vocab-size 512, 2 busy cores): 9-14 s in all, 4-7 s
      of them training (reading and recasing the text included); 253 pieces besides the 256
      bytes and 3 specials; train 2,000,647 tokens (5,511 stories), val 374,006 tokens
      (1,000 stories): 0.46 tokens per byte, 1.8x the Llama 2 tokenizer's counts (train
      1,117,144, val 210,880). (Before the text repair below: train 2,039,045, val 380,608;
      Llama 2 1,122,556 and 211,352.)

Every story is encoded as [BOS=1] + encode(story.strip()), no EOS, as llama2.c does.

The text repair (data/text_repair.py, both sources, before anything else reads the text):
the TinyStories text has UTF-8 punctuation read as cp1252 ("\u00e2\u20ac\u2122" for U+2019,
"\u00e2\u20ac\u0153" / "\u00e2\u20ac" for the curly double quotes). Every story goes through
text_repair.prepare_text: the mojibake mapped back to the characters it came from (a map
built from the cp1252 reading of each candidate character's UTF-8; "\u00e2\u20ac", whose
third byte was lost, as U+201D), then the quotes, dashes, ellipsis and typographic spaces
written in ASCII, as the rest of the text writes them. Its version is part of the
settings in the manifest, so outputs made from the damaged text are rebuilt; the
manifest's "text_repair" has the counts per file. Counts and reasons: data/README.md.

Two sources:

  (default) the local sample in ../shared/data/tinystories (relative to the repo
      root; --shared-dir to override), see its README.md:
        validation = valid_first1000.txt, stories separated by lines "<|endoftext|>"
        train      = train_head.txt (stories joined by a single "\n", paragraphs
                     inside a story by "\n\n") plus the part of
                     train_head_lowercase.txt after character 942,640 (its first
                     942,640 characters are train_head.txt lowercased).

  --download  the full dataset from the Hugging Face hub, as llama2.c does:
      https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main/TinyStories_all_data.tar.gz
      extracted to data00.json ... data49.json (lists of objects; the text is in
      the "story" field). data00.json is the validation set, the rest train
      (llama2.c's convention). With --vocab-size N the tokenizer trains on the first
      10 train files (llama2.c trains on 10 files too, though its first is data00).

The lowercase part (--lowercase-part, local sample only). The part of
train_head_lowercase.txt after character 942,640 is 3/4 of the training text
(3,239,100 of 4,181,740 characters, 4,414 of 5,511 stories), all lowercase.
  keep    as it is: the default with --vocab-size 0 (today's shards). A model trained
          on it writes lowercase more often than not (docs/results/cpu_tinystories_tiny.log:
          "once there was a friend ... lily. is, he made"), and a 512-piece vocabulary spends pieces on both casings.
  recase  (the default with --vocab-size N > 0) restores the casing with deterministic
          rules: capital letter at the start of a story, of a paragraph, of a sentence
          (after . ! ? unless a dialogue tag follows a closing quote: '"Hi!" she said')
          and of quoted speech; the casing a word has inside sentences of the cased
          train_head.txt when it is the same there at least 80% of the time (names,
          "I", "TV"); and names introduced by "named X" (in that story, and in every
          story when X never occurs in lowercase in train_head.txt nor after a
          determiner, "a X", in the lowercase part). Checked where the
          truth is known (train_head.txt's second half, lowercased, with rules learnt
          from its first half): 0.5% of words get a wrong case (mostly Mom/mom, which
          the original writes both ways), against 16.5% left lowercase. The manifest
          records this check. Recased text keeps every character; only the case of
          ASCII letters changes.
  drop    train on train_head.txt alone (1,097 stories, 1/4 of the text).
The decision for the 512-piece model: recase. The model must write readable,
properly-cased stories, which the lowercase text teaches against, and it needs every
story it can get (1/4 of the text is too little for word-level fluency), so the text
is kept and its casing restored. Validation is always the original text. With 512
pieces (train / val tokens): recase 2,000,647 / 374,006; keep 1,963,554 / 382,739
(the pieces learnt on mostly lowercase text fit the cased validation text worse);
drop 445,058 / 370,639 (1,097 stories).

Output (default data/tinystories/, or data/tinystories_spN/, next to this script):
  tinystories_val_000000.bin
  tinystories_train_000000.bin, tinystories_train_000001.bin, ...  (a new train
      shard every --shard-tokens tokens, default 100M; stories may straddle two shards)
  tinystories_manifest.json   what was written, from what, with which settings
  tokN.model, tokN.bin        (--vocab-size N only) the trained tokenizer

Idempotent: does nothing when the manifest and all outputs exist, were made
with the same settings, and are newer than the inputs (unless --force).

--decode-fixture FILE (after preparing, as above) writes what dev/test/test_tokenizer.c
--fixture checks the C decoder against: the expected text of every token id, and
validation stories plus a few edge cases (emoji through byte fallback, newlines,
digits) as ids with sentencepiece's decode of them.

Usage:
  python3 data/prepare_tinystories.py                 # local sample, Llama 2 tokenizer
  python3 data/prepare_tinystories.py --vocab-size 512   # local sample, trained tok512
  python3 data/prepare_tinystories.py --download      # full dataset (needs internet)
Use the interpreter printed by `bash scripts/ensure_python_deps.sh`.
"""

import argparse
import collections
import glob
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import time

import numpy as np

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, SCRIPT_DIR)
import text_repair  # noqa: E402  (data/text_repair.py: the mojibake repair, see the docstring)
REPO_ROOT = os.path.dirname(SCRIPT_DIR)
DEFAULT_SHARED = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data", "tinystories"))
DEFAULT_OUT = os.path.join(SCRIPT_DIR, "tinystories")
DEFAULT_TOKENIZER = os.path.join(DEFAULT_SHARED, "tokenizer", "tokenizer.model")
LLAMA2C_TOKENIZER_URL = "https://raw.githubusercontent.com/karpathy/llama2.c/master/"
DOWNLOAD_URL = ("https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main/"
                "TinyStories_all_data.tar.gz")

# the README's numbers: train_head_lowercase.txt's first 942,640 characters are
# train_head.txt lowercased, so only what follows is new text
LOWERCASE_NEW_FROM = 942640

HEADER_INTS = 256
BOS = 1
MANIFEST = "tinystories_manifest.json"
ENCODE_BATCH = 4096  # stories per sentencepiece call
LOWERCASE_MODES = ("keep", "recase", "drop")
VOCAB_TRAIN_FILES = 10  # --download --vocab-size N: train files the tokenizer learns from

# llama2.c's train_vocab (tinystories.py), with the settings that make it reproducible:
# one thread, every sentence (input_sentence_size 0: no sampling, hence no shuffling).
# Stored in the manifest; the defaults it relies on are spelled out.
SP_TRAINER_OPTIONS = {
    "model_type": "bpe",
    "character_coverage": 1.0,
    "byte_fallback": True,
    "split_digits": True,
    "allow_whitespace_only_pieces": True,
    "normalization_rule_name": "identity",
    "remove_extra_whitespaces": True,   # sentencepiece's default, which llama2.c keeps
    "add_dummy_prefix": True,
    # llama2.c passes r" \342\201\207 ", which reaches the model as those 14 characters
    # (sentencepiece's Python API does not unescape); the character they mean, U+2047:
    "unk_surface": " \u2047 ",
    "input_format": "text",
    "self_test_sample_size": 0,
    "input_sentence_size": 0,
    "shuffle_input_sentence": False,
    "max_sentence_length": 16384,       # bytes; the longest paragraph here is ~1 KB
    "num_threads": 1,
    "unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1,
}


def die(msg):
    print(f"prepare_tinystories: error: {msg}", file=sys.stderr)
    sys.exit(1)


def log(msg):
    print(f"prepare_tinystories: {msg}", flush=True)


# ----------------------------------------------------------------------------
# shard writing

def shard_format(vocab_size):
    """(magic, version, numpy dtype) for a vocabulary size."""
    if vocab_size <= 65535:  # docs/design.md 5.1: uint32 "for vocabularies over 65535"
        return 20240520, 1, np.uint16
    return 20240801, 7, np.uint32


def write_shard(path, tokens, vocab_size):
    magic, version, dtype = shard_format(vocab_size)
    tokens = np.asarray(tokens)
    if tokens.size >= 2**31:
        die(f"{path}: {tokens.size} tokens do not fit the int32 header; lower --shard-tokens")
    if tokens.size and int(tokens.max()) >= vocab_size:
        die(f"{path}: token id {int(tokens.max())} >= vocab size {vocab_size}")
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = magic, version, tokens.size
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.dtype(dtype).newbyteorder("<"), copy=False).tobytes())
    os.replace(tmp, path)  # atomic: a half-written shard is never seen under its name


class ShardWriter:
    """Collects token arrays and writes a shard every shard_tokens tokens."""

    def __init__(self, out_dir, split, vocab_size, shard_tokens):
        self.out_dir, self.split = out_dir, split
        self.vocab_size, self.shard_tokens = vocab_size, shard_tokens
        self.parts, self.buffered = [], 0
        self.files, self.total_tokens, self.stories = [], 0, 0
        _, _, self.dtype = shard_format(vocab_size)

    def add(self, ids_list):
        for ids in ids_list:
            a = np.empty(len(ids) + 1, dtype=self.dtype)
            a[0] = BOS
            a[1:] = ids
            self.parts.append(a)
            self.buffered += a.size
            self.total_tokens += a.size
            self.stories += 1
        while self.buffered >= self.shard_tokens:
            allt = np.concatenate(self.parts)
            self._write(allt[:self.shard_tokens])
            rest = allt[self.shard_tokens:]
            self.parts, self.buffered = ([rest] if rest.size else []), rest.size

    def close(self):
        if self.buffered or not self.files:
            self._write(np.concatenate(self.parts) if self.parts else np.zeros(0, self.dtype))
        self.parts, self.buffered = [], 0
        return self.files

    def _write(self, tokens):
        name = f"tinystories_{self.split}_{len(self.files):06d}.bin"
        write_shard(os.path.join(self.out_dir, name), tokens, self.vocab_size)
        self.files.append({"file": name, "tokens": int(tokens.size)})
        log(f"  wrote {name}: {tokens.size:,} tokens")


def encode_stories(sp, stories, writer, label, num_threads):
    """Encodes stories (an iterable of str) in batches, feeding the writer."""
    t0, batch, last = time.time(), [], 0.0

    def flush():
        nonlocal last
        if not batch:
            return
        writer.add(sp.encode(batch, num_threads=num_threads))
        batch.clear()
        now = time.time()
        if now - last > 2.0:
            last = now
            log(f"  {label}: {writer.stories:,} stories, {writer.total_tokens:,} tokens "
                f"({now - t0:.1f}s)")

    for s in stories:
        s = s.strip()
        if not s:
            continue
        batch.append(s)
        if len(batch) >= ENCODE_BATCH:
            flush()
    flush()
    files = writer.close()
    log(f"{label}: {writer.stories:,} stories, {writer.total_tokens:,} tokens, "
        f"{len(files)} shard(s) ({time.time() - t0:.1f}s)")
    return files


# ----------------------------------------------------------------------------
# recasing the lowercase part (--lowercase-part recase; see the docstring)

RECASE_WORD = re.compile(r"[A-Za-z]+")
# verbs of dialogue tags: '"Hi!" she said' keeps "she" lowercase after the closing quote
RECASE_SPEECH = frozenset(
    "said says asked asks replied cried shouted yelled exclaimed whispered called answered added "
    "laughed screamed giggled told agreed explained sang squeaked barked chirped thought wondered "
    "begged sighed smiled nodded suggested shouts".split())
RECASE_PRONOUNS = frozenset("she he they i we you it".split())
RECASE_NOT_NAMES = frozenset("a an the after by for".split())


def recase_initials(text):
    """Start offsets of the words of text that begin a sentence: the first word, the first
    after a newline, after an opening quote that follows a space, after . ! ? (unless a
    closing quote and a dialogue tag follow: '"Hi!" she said')."""
    res, prev_end = set(), 0
    for m in RECASE_WORD.finditer(text):
        gap = text[prev_end:m.start()]
        if prev_end == 0 or "\n" in gap or re.search(r'(^|\s)("|\u201c)$', gap):
            res.add(m.start())
        elif re.search(r"[.!?]", gap):
            tag = False
            if re.search(r'[.!?]("|\u201d)\s+$', gap):
                nxt = [re.sub(r"[^a-z']", "", x) for x in text[m.start():m.start() + 40].lower().split()[:2]]
                nxt += ["", ""]
                tag = nxt[0] in RECASE_SPEECH or (nxt[0] in RECASE_PRONOUNS and nxt[1] in RECASE_SPEECH)
            if not tag:
                res.add(m.start())
        prev_end = m.end()
    return res


def recase_after_apostrophe(text, start):
    """True when the word at start follows an apostrophe (the "s" of "Lily's"). The text
    arrives with its mojibake repaired and its quotes in ASCII (text_repair.prepare_text)."""
    return start > 0 and text[start - 1] in "'\u2019"


def recase_learn(cased, lowercase_text):
    """The casing dictionary: {lowercase word: the form it has inside sentences of the cased
    text, when that form is not lowercase, occurs twice or more and is >= 80% of the
    word's non-initial occurrences}, plus the names "named X" introduces in lowercase_text
    whose X never occurs in lowercase in the cased text nor after a determiner in
    lowercase_text."""
    forms = collections.defaultdict(collections.Counter)
    initial = recase_initials(cased)
    for m in RECASE_WORD.finditer(cased):
        if m.start() in initial or recase_after_apostrophe(cased, m.start()):
            continue
        forms[m.group().lower()][m.group()] += 1
    d = {}
    for lw, c in forms.items():
        form, n = c.most_common(1)[0]
        if form != lw and n >= 2 and n >= 0.8 * sum(c.values()):
            d[lw] = form
    lower_in_cased = {lw for lw, c in forms.items() if c[lw] > 0}
    # a word that also follows a determiner ("a pancake") is a common noun, a name only in
    # the stories that name something so
    common = set(re.findall(r"\b(?:a|an|the|some|his|her|my|their|your|our|this|that) ([a-z]+)",
                            lowercase_text))
    for m in re.finditer(r"\bnamed ([a-z]+)", lowercase_text):
        w = m.group(1)
        if w not in RECASE_NOT_NAMES and w not in lower_in_cased and w not in common and w not in d:
            d[w] = w.capitalize()
    return d


def recase_story(story, d):
    """story (lowercase) with the casing of the rules above; the same length."""
    initial = recase_initials(story)
    names = {m.group(1): m.group(1).capitalize() for m in re.finditer(r"\bnamed ([a-z]+)", story)
             if m.group(1) not in RECASE_NOT_NAMES}
    out, last = [], 0
    for m in RECASE_WORD.finditer(story):
        w, st = m.group(), m.start()
        out.append(story[last:st])
        last = m.end()
        if recase_after_apostrophe(story, st):
            out.append(w)
            continue
        nw = names.get(w) or d.get(w) or w
        if st in initial and nw == w:
            nw = w[0].upper() + w[1:]
        out.append(nw)
    out.append(story[last:])
    return "".join(out)


def recase_check(head):
    """Where the truth is known: rules learnt from the first half of the cased text,
    applied to its second half lowercased; counts the words whose case differs."""
    cut = head.index("\n", len(head) // 2) + 1
    truth = head[cut:]
    d = recase_learn(head[:cut], truth.lower())
    pred = "\n".join(recase_story(s, d) for s in re.split(r"(?<!\n)\n(?!\n)", truth.lower()))
    tw, pw = RECASE_WORD.findall(truth), RECASE_WORD.findall(pred)
    if len(pred) != len(truth) or len(tw) != len(pw):
        die("internal error: recasing changed the text beyond its case")
    wrong = sum(1 for a, b in zip(tw, pw) if a != b)
    lower = sum(1 for a in tw if a != a.lower())
    return {"words": len(tw), "wrong_case": wrong, "wrong_if_left_lowercase": lower,
            "wrong_pct": round(100.0 * wrong / len(tw), 3)}


# ----------------------------------------------------------------------------
# sources

def split_endoftext(text):
    """valid_first1000.txt: each story is followed by a line <|endoftext|>."""
    return [s.strip() for s in re.split(r"^<\|endoftext\|>[ \t]*$", text, flags=re.M)]


def split_single_newline(text):
    """train_head*.txt: stories joined by one "\\n", paragraphs by "\\n\\n".
    A "\\n" that is not part of a blank-line separator ends a story. A few
    stories contain lone newlines (see the README); those come out as several
    pieces, each with its own BOS, which is harmless for training."""
    return [s.strip() for s in re.split(r"(?<!\n)\n(?!\n)", text)]


def read_text(path):
    with open(path, "r", encoding="utf-8") as f:
        return f.read()


def repair(text, repairs, label, lowercased=False):
    """text_repair.prepare_text(text): the mojibake repaired, the punctuation in ASCII (the
    docstring of data/text_repair.py). repairs[label] gets the counts per kind (exact,
    lowercased, lost_byte_quote, lost_byte_apostrophe, unmappable), which the manifest
    records; leftovers are reported."""
    counts = collections.Counter()
    out = text_repair.prepare_text(text, lowercased, counts)
    kinds, _ = text_repair.summarize(counts)
    tot = repairs.setdefault(label, {})
    for k, n in kinds.items():
        tot[k] = tot.get(k, 0) + n
    if kinds.get("unmappable"):
        left = sorted({s for (k, s, _) in counts if k == "unmappable"})
        print(f"prepare_tinystories: warning: {label}: {kinds['unmappable']} mojibake-like sequences "
              f"left as they are: {', '.join(map(ascii, left[:10]))}", file=sys.stderr)
    return out


def local_sources(shared_dir, lowercase_part="keep"):
    """The local sample. lowercase_part: what to do with the new text of
    train_head_lowercase.txt (keep, recase, drop; see the docstring). The returned
    stats dict gets the story counts of each part (and the recasing check) once
    train() has run."""
    need = ["valid_first1000.txt", "train_head.txt", "train_head_lowercase.txt"]
    paths = [os.path.join(shared_dir, n) for n in need]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        die("TinyStories sample not found: missing " + ", ".join(missing) +
            f"\n  (looked in --shared-dir {shared_dir}; pass --shared-dir DIR, or --download "
            "to fetch the full dataset from the Hugging Face hub)")
    val_path, head_path, lower_path = paths
    repairs = {}  # text_repair's counts per file, for the manifest

    def val():
        repairs.pop("valid_first1000.txt", None)
        return split_endoftext(repair(read_text(val_path), repairs, "valid_first1000.txt"))

    stats, recase_dict = {"lowercase_part": lowercase_part}, {}

    def train():
        head = read_text(head_path)
        lower = read_text(lower_path)
        if len(head) != LOWERCASE_NEW_FROM or lower[:LOWERCASE_NEW_FROM] != head.lower():
            print("prepare_tinystories: warning: train_head_lowercase.txt does not start with "
                  "train_head.txt lowercased as the README says; using its text after "
                  f"character {LOWERCASE_NEW_FROM:,} anyway", file=sys.stderr)
        new = lower[LOWERCASE_NEW_FROM:]
        # repaired after the split at LOWERCASE_NEW_FROM (a story boundary of the raw text)
        repairs.pop("train_head.txt", None)
        repairs.pop("train_head_lowercase.txt[942640:]", None)
        head = repair(head, repairs, "train_head.txt")
        if lowercase_part != "drop":
            new = repair(new, repairs, "train_head_lowercase.txt[942640:]", lowercased=True)
        n = 0
        for s in split_single_newline(head):
            n += 1 if s else 0
            yield s
        stats["train_head_stories"], stats["train_head_chars"] = n, len(head)
        if lowercase_part == "drop":
            stats["lowercase_part_stories"], stats["lowercase_part_chars"] = 0, 0
            return
        if lowercase_part == "recase" and not recase_dict:
            recase_dict.update(recase_learn(head, new))
            stats["recase_dictionary_words"] = len(recase_dict)
            stats["recase_check"] = recase_check(head)
            c = stats["recase_check"]
            log(f"  recasing the lowercase part: {len(recase_dict):,} words in the casing dictionary; "
                f"check on train_head.txt's second half: {c['wrong_case']:,} of {c['words']:,} words "
                f"({c['wrong_pct']}%) in the wrong case, {c['wrong_if_left_lowercase']:,} if left lowercase")
        n = 0
        for s in split_single_newline(new):
            n += 1 if s else 0
            yield recase_story(s, recase_dict) if lowercase_part == "recase" else s
        stats["lowercase_part_stories"], stats["lowercase_part_chars"] = n, len(new)

    settings = {"source": "local-sample", "shared_dir": os.path.abspath(shared_dir)}
    return ({"val": val, "train": train, "vocab_train": train, "stats": stats, "repairs": repairs},
            paths, settings)


def download(url, dest):
    """Downloads url to dest (with a .part file and progress), unless dest exists."""
    import urllib.request
    if os.path.isfile(dest):
        log(f"{dest} already downloaded")
        return
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    part = dest + ".part"
    log(f"downloading {url}")
    try:
        req = urllib.request.Request(url, headers={"User-Agent": "llmc-prepare-tinystories"})
        with urllib.request.urlopen(req, timeout=60) as r, open(part, "wb") as f:
            total = int(r.headers.get("Content-Length") or 0)
            done, last = 0, 0.0
            while True:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                f.write(chunk)
                done += len(chunk)
                if time.time() - last > 2.0:
                    last = time.time()
                    pct = f" ({100.0 * done / total:.1f}%)" if total else ""
                    log(f"  {done / 2**20:,.0f} MiB{pct}")
        if total and done != total:
            die(f"download of {url} incomplete: {done} of {total} bytes")
    except Exception as e:  # network errors, HTTP errors
        if os.path.exists(part):
            os.remove(part)
        die(f"could not download {url}: {e}")
    os.replace(part, dest)
    log(f"downloaded {dest} ({os.path.getsize(dest) / 2**20:,.0f} MiB)")


def download_sources(download_dir):
    tar_path = os.path.join(download_dir, "TinyStories_all_data.tar.gz")
    data_dir = os.path.join(download_dir, "TinyStories_all_data")
    download(DOWNLOAD_URL, tar_path)
    if not glob.glob(os.path.join(data_dir, "*.json")):
        log(f"extracting {tar_path} -> {data_dir}")
        os.makedirs(data_dir, exist_ok=True)
        try:
            with tarfile.open(tar_path, "r:gz") as tf:
                members = [m for m in tf.getmembers()
                           if m.isfile() and m.name.endswith(".json")
                           and not os.path.isabs(m.name) and ".." not in m.name.split("/")]
                for m in members:
                    m.name = os.path.basename(m.name)
                    if hasattr(tarfile, "data_filter"):  # Python >= 3.12 (and backports)
                        tf.extract(m, data_dir, filter="data")
                    else:
                        tf.extract(m, data_dir)
        except (tarfile.TarError, OSError, EOFError) as e:
            die(f"could not extract {tar_path} ({e}); delete it and run again to re-download")
    files = sorted(glob.glob(os.path.join(data_dir, "*.json")))
    if len(files) < 2:
        die(f"expected the TinyStories json files (data00.json ... data49.json) in {data_dir}, "
            f"found {len(files)}")

    repairs = {}  # text_repair's counts per split, for the manifest

    def stories_of(paths, label):
        repairs.pop(label, None)
        for p in paths:
            with open(p, "r", encoding="utf-8") as f:
                data = json.load(f)
            for ex in data:
                yield repair(ex["story"], repairs, label)

    return ({"val": lambda: stories_of(files[:1], "val"), "train": lambda: stories_of(files[1:], "train"),
             "vocab_train": lambda: stories_of(files[1:1 + VOCAB_TRAIN_FILES], "tokenizer training"),
             "stats": {}, "repairs": repairs},
            files, {"source": "download", "url": DOWNLOAD_URL})


# ----------------------------------------------------------------------------
# the trained tokenizer (--vocab-size N)

def md5_of(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


def write_atomic(path, data):
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


def train_tokenizer(spm, stories, vocab_size, model_path):
    """Trains the SentencePiece model on the paragraphs of stories (one input line each)
    and writes it to model_path. Returns what the manifest records about it."""
    t0 = time.time()
    stats = {"stories": 0, "lines": 0, "chars": 0}

    def lines():
        for story in stories:
            story = story.strip()
            if not story:
                continue
            stats["stories"] += 1
            for line in story.split("\n"):
                line = line.strip()
                if line:
                    stats["lines"] += 1
                    stats["chars"] += len(line)
                    yield line

    log(f"training a {vocab_size}-piece SentencePiece BPE tokenizer on the training split "
        "(num_threads 1, every line: deterministic)")
    buf = io.BytesIO()
    # model_writer instead of model_prefix: no path lands in the model's trainer spec, so the
    # .model bytes do not depend on where it is written
    spm.SentencePieceTrainer.train(sentence_iterator=lines(), model_writer=buf, vocab_size=vocab_size,
                                   minloglevel=1, **SP_TRAINER_OPTIONS)
    write_atomic(model_path, buf.getvalue())
    stats["seconds"] = round(time.time() - t0, 2)
    log(f"  trained on {stats['lines']:,} lines ({stats['stories']:,} stories, {stats['chars']:,} "
        f"characters) in {stats['seconds']:.1f}s -> {model_path}")
    return stats


def llama2c_pieces(sp):
    """[(bytes, score)] per token id, as llama2.c's tokenizer.py export writes them."""
    out = []
    for i in range(sp.get_piece_size()):
        t = sp.id_to_piece(i)
        if i == sp.bos_id():
            t = "\n<s>\n"
        elif i == sp.eos_id():
            t = "\n</s>\n"
        out.append((t.replace("\u2581", " ").encode("utf-8"), sp.get_score(i)))
    return out


def export_llama2c_bin(sp, bin_path):
    """llama2.c's tokenizer.bin: int32 max_token_length, then per token float32 score,
    int32 length, the bytes (little-endian; llama2.c writes native order)."""
    pieces = llama2c_pieces(sp)
    parts = [np.array([max(len(b) for b, _ in pieces)], dtype="<i4").tobytes()]
    for b, score in pieces:
        parts += [np.array([score], dtype="<f4").tobytes(), np.array([len(b)], dtype="<i4").tobytes(), b]
    write_atomic(bin_path, b"".join(parts))


# edge cases of the decode fixture, besides validation stories
FIXTURE_TEXTS = [
    ("emoji_byte_fallback", "Hi \U0001F600! A caf\u00e9 \u2014 ok."),
    ("newlines_digits", "Tom had 3 apples.\n\nThen 12 more \"came\" at 10:45.\n"),
    ("spaces_tabs", "Two  spaces,\ta tab and  \u00e2\u20ac\u2122 mojibake."),
    ("lowercase_start", "once upon a time. lily's dog"),
]


def write_decode_fixture(sp, val_stories, path, n_stories=5):
    """The expected output of llmc/io/tokenizer.h's decoder, computed with sentencepiece, for
    dev/test/test_tokenizer.c --fixture. Lines (bytes as lowercase hex, "-" when empty):
      tokenizer_fixture 1
      vocab V
      piece ID HEX      what the id decodes to after a token other than BOS: sentencepiece's
                        decode of [".", ID] minus that of ["."], for every ordinary piece and
                        ASCII byte piece; "\n<s>\n", "\n</s>\n", "<unk>" for the special
                        ids; the byte itself for the byte pieces 0x80-0xFF (no text alone)
      text NAME HEX N ID...   a story (or edge case): sentencepiece's decode of the ids, which
                        the C decoder, starting after BOS, must reproduce piece by piece."""
    V = sp.get_piece_size()
    dot = sp.piece_to_id(".")
    if dot == sp.unk_id():
        die("no \".\" piece in the tokenizer: cannot write the decode fixture")
    base = sp.decode([dot]).encode("utf-8")
    lines = ["tokenizer_fixture 1", f"vocab {V}"]
    for i in range(V):
        piece = sp.id_to_piece(i)
        m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
        if i == sp.bos_id():
            want = b"\n<s>\n"
        elif i == sp.eos_id():
            want = b"\n</s>\n"
        elif i == sp.unk_id():
            want = piece.encode("utf-8")
        elif m and int(m.group(1), 16) >= 0x80:
            want = bytes([int(m.group(1), 16)])
        else:
            both = sp.decode([dot, i]).encode("utf-8")
            if not both.startswith(base):
                die(f"decode of [., {i}] does not start with that of [.]")
            want = both[len(base):]
        lines.append(f"piece {i} {want.hex() or '-'}")
    cases = [(f"val_story_{k}", s) for k, s in enumerate(val_stories[:n_stories])] + FIXTURE_TEXTS
    for name, text in cases:
        ids = sp.encode(text.strip())
        want = sp.decode(ids).encode("utf-8")
        lines.append(f"text {name} {want.hex() or '-'} {len(ids)} " + " ".join(map(str, ids)))
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)
    log(f"decode fixture: {V} pieces, {len(cases)} texts -> {path}")


# ----------------------------------------------------------------------------

def up_to_date(out_dir, inputs, settings):
    """True when the manifest matches the settings and every listed shard exists
    and is newer than every input."""
    mpath = os.path.join(out_dir, MANIFEST)
    try:
        with open(mpath) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return False
    if m.get("settings") != settings:
        return False
    newest_input = max(os.path.getmtime(p) for p in inputs)
    outs = [mpath] + [os.path.join(out_dir, e["file"]) for s in ("val", "train")
                      for e in m.get(s, {}).get("files", [])]
    tok = m.get("tokenizer")  # --vocab-size N: the trained tokenizer's files
    if isinstance(tok, dict):
        outs += [os.path.join(out_dir, tok[k]) for k in ("model", "bin")]
    for p in outs:
        if not os.path.isfile(p) or os.path.getmtime(p) < newest_input:
            return False
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--download", action="store_true",
                    help="download the full TinyStories from the Hugging Face hub instead "
                         "of using the local sample")
    ap.add_argument("--shared-dir", default=DEFAULT_SHARED,
                    help="directory of the local TinyStories sample (default: %(default)s)")
    ap.add_argument("--download-dir", default=None,
                    help="where --download keeps the archive and json files "
                         "(default: OUT_DIR/download; with --vocab-size N the Llama 2 mode's, "
                         + os.path.join(DEFAULT_OUT, "download") + ", so both share one download)")
    ap.add_argument("--vocab-size", type=int, default=0,
                    help="0: encode with the Llama 2 tokenizer (--tokenizer); N > 0: train an N-piece "
                         "SentencePiece tokenizer on the training split and encode with it "
                         "(default: %(default)s)")
    ap.add_argument("--lowercase-part", choices=LOWERCASE_MODES, default=None,
                    help="local sample: keep, recase or drop the all-lowercase part of the training "
                         "text (default: keep with --vocab-size 0, recase otherwise; see the docstring of this script)")
    ap.add_argument("--tokenizer", default=None,
                    help="SentencePiece model for --vocab-size 0 (default: " + DEFAULT_TOKENIZER + ")")
    ap.add_argument("--out-dir", default=None,
                    help="output directory (default: " + DEFAULT_OUT + ", or " +
                         os.path.join(SCRIPT_DIR, "tinystories_spN") + " with --vocab-size N)")
    ap.add_argument("--shard-tokens", type=int, default=100_000_000,
                    help="tokens per train shard (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=min(16, os.cpu_count() or 1),
                    help="sentencepiece encoding threads (default: %(default)s)")
    ap.add_argument("--force", action="store_true", help="rebuild even if the outputs are up to date")
    ap.add_argument("--decode-fixture", metavar="FILE", default=None,
                    help="after preparing, write the expected decodes for dev/test/test_tokenizer.c "
                         "--fixture to FILE")
    args = ap.parse_args()

    if args.shard_tokens < 1 or args.shard_tokens >= 2**31:
        die("--shard-tokens must be in [1, 2^31)")
    trained = args.vocab_size > 0
    if args.vocab_size < 0:
        die("--vocab-size must be 0 (the Llama 2 tokenizer) or a positive number of pieces")
    if trained and args.tokenizer is not None:
        die("--tokenizer is for --vocab-size 0; with --vocab-size N the tokenizer is trained here")
    lowercase_part = args.lowercase_part or ("recase" if trained else "keep")
    if args.download and args.lowercase_part not in (None, "keep"):
        die("--lowercase-part applies to the local sample only (the download is cased)")
    if args.out_dir is None:
        args.out_dir = os.path.join(SCRIPT_DIR, f"tinystories_sp{args.vocab_size}") if trained else DEFAULT_OUT
    out_dir = os.path.abspath(args.out_dir)
    if not trained:
        args.tokenizer = args.tokenizer or DEFAULT_TOKENIZER
        if not os.path.isfile(args.tokenizer) and args.download:
            # users without the shared copy: the Llama 2 tokenizer as llama2.c publishes it
            # (tokenizer.model for encoding here, tokenizer.bin for train_llama's samples)
            tok_dir = os.path.join(args.out_dir, "tokenizer")
            os.makedirs(tok_dir, exist_ok=True)
            for name in ("tokenizer.model", "tokenizer.bin"):
                dest = os.path.join(tok_dir, name)
                if not os.path.isfile(dest):
                    download(LLAMA2C_TOKENIZER_URL + name, dest)
            args.tokenizer = os.path.join(tok_dir, "tokenizer.model")
            log(f"tokenizer downloaded to {tok_dir}; pass --tokenizer {tok_dir}/tokenizer.bin to train_llama")
        if not os.path.isfile(args.tokenizer):
            die(f"tokenizer model not found: {args.tokenizer} (pass --tokenizer PATH, or --download to fetch it)")
    if args.download:
        sources, inputs, settings = download_sources(os.path.abspath(
            args.download_dir or os.path.join(DEFAULT_OUT if trained else out_dir, "download")))
    else:
        sources, inputs, settings = local_sources(args.shared_dir, lowercase_part)
    tok_model = os.path.join(out_dir, f"tok{args.vocab_size}.model")
    tok_bin = os.path.join(out_dir, f"tok{args.vocab_size}.bin")
    # the text repair's rules are part of the settings: shards and a tokenizer made from text
    # repaired otherwise, or not at all (before it existed), do not match and are rebuilt
    settings["text_repair"] = text_repair.VERSION
    inputs = inputs + [os.path.abspath(text_repair.__file__)]
    if trained:
        inputs = inputs + [os.path.abspath(__file__)]
        settings.update({"tokenizer": f"trained here: tok{args.vocab_size}.model",
                         "vocab_size": args.vocab_size, "sp_trainer": SP_TRAINER_OPTIONS})
    else:
        inputs = inputs + [args.tokenizer, os.path.abspath(__file__)]
        settings.update({"tokenizer": os.path.abspath(args.tokenizer)})
    settings.update({"shard_tokens": args.shard_tokens, "bos": BOS, "eos": None})
    if not args.download and (trained or lowercase_part != "keep"):
        settings["lowercase_part"] = lowercase_part  # absent in the default mode: its manifest as before

    m = None if args.force else up_to_date(out_dir, inputs, settings)
    if m:
        log(f"up to date in {out_dir} (train {m['train']['tokens']:,} tokens, "
            f"val {m['val']['tokens']:,} tokens); --force to rebuild")
    if m and not args.decode_fixture:
        return

    # imported only now: up-to-date shards need no sentencepiece (a GPU box may lack it)
    try:
        import sentencepiece as spm
    except ImportError:
        die("python module sentencepiece missing; run with the interpreter printed by "
            "`bash scripts/ensure_python_deps.sh`")
    if m:
        sp = spm.SentencePieceProcessor(model_file=tok_model if trained else args.tokenizer)
        write_decode_fixture(sp, sources["val"](), args.decode_fixture)
        return

    t_start = time.time()
    os.makedirs(out_dir, exist_ok=True)
    # stale outputs of an earlier run (e.g. more train shards) must not linger
    for p in glob.glob(os.path.join(out_dir, "tinystories_*.bin")) + \
            [os.path.join(out_dir, MANIFEST)]:
        if os.path.exists(p):
            os.remove(p)

    tok_info = None
    if trained:
        try:
            tstats = train_tokenizer(spm, sources["vocab_train"](), args.vocab_size, tok_model)
        except RuntimeError as e:  # e.g. a vocabulary smaller than the characters + 259
            die(f"sentencepiece could not train a {args.vocab_size}-piece tokenizer: {e}")
        sp = spm.SentencePieceProcessor(model_file=tok_model)
        export_llama2c_bin(sp, tok_bin)
        n_bytes = sum(1 for i in range(sp.get_piece_size()) if sp.is_byte(i))
        tok_info = {"model": os.path.basename(tok_model), "bin": os.path.basename(tok_bin),
                    "model_md5": md5_of(tok_model), "bin_md5": md5_of(tok_bin),
                    "sentencepiece_version": getattr(spm, "__version__", "?"),
                    "pieces": sp.get_piece_size(), "byte_pieces": n_bytes,
                    "special_pieces": 3, "other_pieces": sp.get_piece_size() - n_bytes - 3,
                    "training_text": tstats}
        log(f"  {tok_bin}: llama2.c layout; model md5 {tok_info['model_md5']}, "
            f"{tok_info['other_pieces']} pieces besides the {n_bytes} bytes and 3 specials")
    else:
        sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
    vocab = sp.get_piece_size()
    if sp.bos_id() != BOS:
        die(f"tokenizer {tok_model if trained else args.tokenizer} has BOS id {sp.bos_id()}, expected {BOS}")
    magic, version, dtype = shard_format(vocab)
    log(f"tokenizer {tok_model if trained else args.tokenizer}: vocab {vocab}, shards magic {magic} "
        f"version {version} ({np.dtype(dtype).name})")

    manifest = {"settings": settings, "vocab_size": vocab, "magic": magic, "version": version}
    if tok_info:
        manifest["tokenizer"] = tok_info
    for split in ("val", "train"):
        w = ShardWriter(out_dir, split, vocab, args.shard_tokens)
        files = encode_stories(sp, sources[split](), w, split, args.threads)
        manifest[split] = {"stories": w.stories, "tokens": w.total_tokens, "files": files}
    manifest["text_repair"] = {"version": text_repair.VERSION,
                               "counts": {k: v for k, v in sources["repairs"].items()
                                          if k != "tokenizer training"}}
    if "lowercase_part" in settings:
        manifest["train_text"] = sources["stats"]
    if trained:
        manifest["seconds"] = round(time.time() - t_start, 1)
    with open(os.path.join(out_dir, MANIFEST) + ".tmp", "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(os.path.join(out_dir, MANIFEST) + ".tmp", os.path.join(out_dir, MANIFEST))
    log(f"done: train {manifest['train']['tokens']:,} tokens "
        f"({manifest['train']['stories']:,} stories), val {manifest['val']['tokens']:,} tokens "
        f"({manifest['val']['stories']:,} stories) in {out_dir}" +
        (f" ({manifest['seconds']:.0f}s)" if trained else ""))
    if args.decode_fixture:
        write_decode_fixture(sp, sources["val"](), args.decode_fixture)


if __name__ == "__main__":
    main()
