#!/usr/bin/env python3
"""
TinyStories -> token shards for train_llama (llm.c's shard format, DESIGN.md 5.1).

Shard format: a header of 256 int32 (little-endian): magic 20240520, version 1,
number of tokens; then the tokens as uint16. For vocabularies over 65535 the
magic is 20240801, version 7, and the tokens are uint32.

Tokenizer: the Llama 2 SentencePiece model (32000 pieces). Every story is
encoded as [BOS=1] + encode(story.strip()), no EOS, as llama2.c does.

Two sources:

  (default) the local sample in ../shared/data/tinystories (relative to the repo
      root; --shared-dir to override), see its README.md:
        validation = valid_first1000.txt, stories separated by lines "<|endoftext|>"
        train      = train_head.txt (stories joined by a single "\\n", paragraphs
                     inside a story by "\\n\\n") plus the part of
                     train_head_lowercase.txt after character 942,640 (its first
                     942,640 characters are train_head.txt lowercased).

  --download  the full dataset from the Hugging Face hub, as llama2.c does:
      https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main/TinyStories_all_data.tar.gz
      extracted to data00.json ... data49.json (lists of objects; the text is in
      the "story" field). data00.json is the validation set, the rest train
      (llama2.c's convention).

Output (default data/tinystories/ next to this script):
  tinystories_val_000000.bin
  tinystories_train_000000.bin, tinystories_train_000001.bin, ...  (a new train
      shard every --shard-tokens tokens, default 100M; stories may straddle two shards)
  tinystories_manifest.json   what was written, from what, with which settings

Idempotent: does nothing when the manifest and all shards exist, were made
with the same settings, and are newer than the inputs (unless --force).

Usage:
  python3 data/prepare_tinystories.py                 # local sample
  python3 data/prepare_tinystories.py --download      # full dataset (needs internet)
Use the interpreter printed by `bash scripts/ensure_python_deps.sh`.
"""

import argparse
import glob
import json
import os
import re
import sys
import tarfile
import time

import numpy as np

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
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


def die(msg):
    print(f"prepare_tinystories: error: {msg}", file=sys.stderr)
    sys.exit(1)


def log(msg):
    print(f"prepare_tinystories: {msg}", flush=True)


# ----------------------------------------------------------------------------
# shard writing

def shard_format(vocab_size):
    """(magic, version, numpy dtype) for a vocabulary size."""
    if vocab_size <= 65535:  # DESIGN 5.1: uint32 "for vocabularies over 65535"
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


def local_sources(shared_dir):
    need = ["valid_first1000.txt", "train_head.txt", "train_head_lowercase.txt"]
    paths = [os.path.join(shared_dir, n) for n in need]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        die("TinyStories sample not found: missing " + ", ".join(missing) +
            f"\n  (looked in --shared-dir {shared_dir}; pass --shared-dir DIR, or --download "
            "to fetch the full dataset from the Hugging Face hub)")
    val_path, head_path, lower_path = paths

    def val():
        return split_endoftext(read_text(val_path))

    def train():
        head = read_text(head_path)
        lower = read_text(lower_path)
        if len(head) != LOWERCASE_NEW_FROM or lower[:LOWERCASE_NEW_FROM] != head.lower():
            print("prepare_tinystories: warning: train_head_lowercase.txt does not start with "
                  "train_head.txt lowercased as the README says; using its text after "
                  f"character {LOWERCASE_NEW_FROM:,} anyway", file=sys.stderr)
        for s in split_single_newline(head):
            yield s
        for s in split_single_newline(lower[LOWERCASE_NEW_FROM:]):
            yield s

    return {"val": val, "train": train}, paths, {"source": "local-sample",
                                                  "shared_dir": os.path.abspath(shared_dir)}


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

    def stories_of(paths):
        for p in paths:
            with open(p, "r", encoding="utf-8") as f:
                data = json.load(f)
            for ex in data:
                yield ex["story"]

    return ({"val": lambda: stories_of(files[:1]), "train": lambda: stories_of(files[1:])},
            files, {"source": "download", "url": DOWNLOAD_URL})


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
                         "(default: OUT_DIR/download)")
    ap.add_argument("--tokenizer", default=DEFAULT_TOKENIZER,
                    help="SentencePiece model (default: %(default)s)")
    ap.add_argument("--out-dir", default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    ap.add_argument("--shard-tokens", type=int, default=100_000_000,
                    help="tokens per train shard (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=min(16, os.cpu_count() or 1),
                    help="sentencepiece encoding threads (default: %(default)s)")
    ap.add_argument("--force", action="store_true", help="rebuild even if the outputs are up to date")
    args = ap.parse_args()

    if args.shard_tokens < 1 or args.shard_tokens >= 2**31:
        die("--shard-tokens must be in [1, 2^31)")
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
    out_dir = os.path.abspath(args.out_dir)
    if args.download:
        sources, inputs, settings = download_sources(
            os.path.abspath(args.download_dir or os.path.join(out_dir, "download")))
    else:
        sources, inputs, settings = local_sources(args.shared_dir)
    inputs = inputs + [args.tokenizer, os.path.abspath(__file__)]
    settings.update({"tokenizer": os.path.abspath(args.tokenizer),
                     "shard_tokens": args.shard_tokens, "bos": BOS, "eos": None})

    m = None if args.force else up_to_date(out_dir, inputs, settings)
    if m:
        log(f"up to date in {out_dir} (train {m['train']['tokens']:,} tokens, "
            f"val {m['val']['tokens']:,} tokens); --force to rebuild")
        return

    # imported only now: up-to-date shards need no sentencepiece (a GPU box may lack it)
    try:
        import sentencepiece as spm
    except ImportError:
        die("python module sentencepiece missing; run with the interpreter printed by "
            "`bash scripts/ensure_python_deps.sh`")
    sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
    vocab = sp.get_piece_size()
    if sp.bos_id() != BOS:
        die(f"tokenizer {args.tokenizer} has BOS id {sp.bos_id()}, expected {BOS}")
    magic, version, dtype = shard_format(vocab)
    log(f"tokenizer {args.tokenizer}: vocab {vocab}, shards magic {magic} version {version} "
        f"({np.dtype(dtype).name})")

    os.makedirs(out_dir, exist_ok=True)
    # stale outputs of an earlier run (e.g. more train shards) must not linger
    for p in glob.glob(os.path.join(out_dir, "tinystories_*.bin")) + \
            [os.path.join(out_dir, MANIFEST)]:
        if os.path.exists(p):
            os.remove(p)

    manifest = {"settings": settings, "vocab_size": vocab, "magic": magic, "version": version}
    for split in ("val", "train"):
        w = ShardWriter(out_dir, split, vocab, args.shard_tokens)
        files = encode_stories(sp, sources[split](), w, split, args.threads)
        manifest[split] = {"stories": w.stories, "tokens": w.total_tokens, "files": files}
    with open(os.path.join(out_dir, MANIFEST) + ".tmp", "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(os.path.join(out_dir, MANIFEST) + ".tmp", os.path.join(out_dir, MANIFEST))
    log(f"done: train {manifest['train']['tokens']:,} tokens "
        f"({manifest['train']['stories']:,} stories), val {manifest['val']['tokens']:,} tokens "
        f"({manifest['val']['stories']:,} stories) in {out_dir}")


if __name__ == "__main__":
    main()
