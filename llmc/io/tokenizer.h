/*
Token decoder for llama2.c's tokenizer.bin (header-only, plain C; compiles as C++ and with nvcc).

File layout (little-endian): int32 max_token_length, then for every token id in order:
float32 score, int32 length, length bytes (the piece, with SentencePiece's U+2581 already
turned into a space; BOS is stored as "\n<s>\n", EOS as "\n</s>\n").

Only decoding is needed here (printing text samples during training). A missing or
malformed file is not fatal: tokenizer_init prints a warning and returns -1, and
tokenizer_decode on an uninitialized tokenizer (or an id it does not know) returns "".
*/
#ifndef LLMC_TOKENIZER_H
#define LLMC_TOKENIZER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <stdint.h>
#include "../core/term.h"
#include "../core/files.h"  // plain C: the open that refuses a FIFO

#define TOKENIZER_BOS 1
#define TOKENIZER_MAX_PIECE 4096 // sanity limit on one piece's length

typedef struct {
    int init_ok;
    int vocab_size;           // tokens read from the file
    int max_token_length;
    char** vocab;             // [vocab_size] NUL-terminated pieces
    float* scores;            // [vocab_size]
    char byte_pieces[512];    // "<0xXX>" tokens decode to byte_pieces + 2*XX (one byte + NUL)
} Tokenizer;

static inline void tokenizer_free(Tokenizer* t) {
    if (t->vocab) {
        for (int i = 0; i < t->vocab_size; i++) { free(t->vocab[i]); }
    }
    free(t->vocab);
    free(t->scores);
    memset(t, 0, sizeof(*t));
}

static inline int tokenizer_fail_(Tokenizer* t, FILE* f, const char* path, const char* why) {
    char msg[2048];  // escaped: the path is the user's (llmc/core/term.h)
    snprintf(msg, sizeof(msg), "tokenizer: warning: cannot use tokenizer file %s: %s; going on without text decoding\n",
             path, why);
    term_fputs(stderr, msg);
    fflush(stderr);
    if (f) { fclose(f); }
    tokenizer_free(t);
    return -1;
}

// reads every token of the file. vocab_size: the model's vocabulary; the file may have fewer
// tokens (a padded model vocabulary: the extra ids decode to ""), but not more. vocab_size <= 0: no check.
static inline int tokenizer_init(Tokenizer* t, const char* path, int vocab_size) {
    char why[1400];
    memset(t, 0, sizeof(*t));
    for (int i = 0; i < 256; i++) {
        t->byte_pieces[2 * i] = (char)i;
        t->byte_pieces[2 * i + 1] = '\0';
    }
    if (path == NULL) { return tokenizer_fail_(t, NULL, "(null)", "no path given"); }
    // a regular file, opened without blocking (a FIFO is refused, not waited on: llmc/core/files.h)
    FILE* f = input_fopen_try(path, why, sizeof(why));
    if (f == NULL) { return tokenizer_fail_(t, NULL, path, why); }
    int32_t maxlen;
    if (fread(&maxlen, sizeof(maxlen), 1, f) != 1) {
        return tokenizer_fail_(t, f, path, "file too short for the header (empty or truncated)");
    }
    if (maxlen <= 0 || maxlen > TOKENIZER_MAX_PIECE) {
        snprintf(why, sizeof(why), "bad max_token_length %d in the header (not a llama2.c tokenizer.bin?)",
                 (int)maxlen);
        return tokenizer_fail_(t, f, path, why);
    }
    t->max_token_length = maxlen;
    int cap = 1024;
    t->vocab = (char**)malloc(sizeof(char*) * cap);
    t->scores = (float*)malloc(sizeof(float) * cap);
    if (!t->vocab || !t->scores) { return tokenizer_fail_(t, f, path, "out of memory"); }
    for (;;) {
        float score;
        int32_t len;
        size_t got = fread(&score, sizeof(score), 1, f);
        if (got == 0) {
            if (feof(f)) { break; } // clean end of file after the last token
            return tokenizer_fail_(t, f, path, "read error");
        }
        if (fread(&len, sizeof(len), 1, f) != 1) {
            snprintf(why, sizeof(why), "truncated in the record of token %d", t->vocab_size);
            return tokenizer_fail_(t, f, path, why);
        }
        if (len < 0 || len > maxlen) {
            snprintf(why, sizeof(why), "token %d has length %d, outside [0, max_token_length=%d]",
                     t->vocab_size, (int)len, (int)maxlen);
            return tokenizer_fail_(t, f, path, why);
        }
        if (t->vocab_size == cap) {
            cap *= 2;
            char** nv = (char**)realloc(t->vocab, sizeof(char*) * cap);
            if (nv) { t->vocab = nv; }
            float* ns = (float*)realloc(t->scores, sizeof(float) * cap);
            if (ns) { t->scores = ns; }
            if (!nv || !ns) { return tokenizer_fail_(t, f, path, "out of memory"); }
        }
        char* piece = (char*)malloc((size_t)len + 1);
        if (!piece) { return tokenizer_fail_(t, f, path, "out of memory"); }
        if (len > 0 && fread(piece, 1, (size_t)len, f) != (size_t)len) {
            free(piece);
            snprintf(why, sizeof(why), "truncated in the bytes of token %d", t->vocab_size);
            return tokenizer_fail_(t, f, path, why);
        }
        piece[len] = '\0';
        t->vocab[t->vocab_size] = piece;
        t->scores[t->vocab_size] = score;
        t->vocab_size++;
    }
    fclose(f);
    if (t->vocab_size == 0) { return tokenizer_fail_(t, NULL, path, "no tokens in the file"); }
    if (vocab_size > 0 && t->vocab_size > vocab_size) {
        snprintf(why, sizeof(why), "it has %d tokens, more than the model's vocab size %d (wrong tokenizer?)",
                 t->vocab_size, vocab_size);
        return tokenizer_fail_(t, NULL, path, why);
    }
    if (vocab_size > 0 && t->vocab_size < vocab_size) {
        char msg[1400];
        snprintf(msg, sizeof(msg), "tokenizer: note: %s has %d tokens, the model's vocab has %d (ids beyond decode to \"\")\n",
                 path, t->vocab_size, vocab_size);
        term_fputs(stderr, msg);
    }
    t->init_ok = 1;
    return 0;
}

static inline int tokenizer_hex_(char c) {
    if (c >= '0' && c <= '9') { return c - '0'; }
    if (c >= 'A' && c <= 'F') { return c - 'A' + 10; }
    if (c >= 'a' && c <= 'f') { return c - 'a' + 10; }
    return -1;
}

// llama2.c's decode: after BOS the leading space of a piece is dropped (SentencePiece does
// the same), and byte-fallback tokens "<0xXX>" become the raw byte.
static inline const char* tokenizer_decode(Tokenizer* t, int prev_token, int token) {
    if (t == NULL || !t->init_ok || token < 0 || token >= t->vocab_size) { return ""; }
    const char* piece = t->vocab[token];
    if (prev_token == TOKENIZER_BOS && piece[0] == ' ') { piece++; }
    if (piece[0] == '<' && strlen(piece) == 6 && piece[1] == '0' && piece[2] == 'x' && piece[5] == '>') {
        int hi = tokenizer_hex_(piece[3]), lo = tokenizer_hex_(piece[4]);
        if (hi >= 0 && lo >= 0) { piece = t->byte_pieces + 2 * (hi * 16 + lo); }
    }
    return piece;
}

// whether a piece is shown: not when it is a single ASCII byte that is neither printable nor
// whitespace (raw control bytes of byte-fallback tokens); multi-byte UTF-8 pieces are, and so
// are single bytes >= 0x80: byte-fallback pieces of one UTF-8 character (<0xF0><0x9F>...),
// which llama2.c's safe_printf drops (isprint is false for them in the C locale), leaving
// the sample on stdout without the characters that main.log has.
static inline int tokenizer_piece_shown(const char* piece) {
    if (piece == NULL || piece[0] == '\0') { return 0; }
    if (piece[1] == '\0') {
        unsigned char b = (unsigned char)piece[0];
        if (b < 0x80 && !(isprint(b) || isspace(b))) { return 0; }
    }
    return 1;
}

// prints a shown piece to stdout, its control bytes escaped (llmc/core/term.h): a tokenizer
// file is data, and its pieces must not drive the terminal (the trainers print through the
// logger, which escapes the same way)
static inline void safe_print(const char* piece) {
    static TermEsc st;
    if (!tokenizer_piece_shown(piece)) { return; }
    term_fwrite(stdout, &st, piece, strlen(piece));
}

#endif // LLMC_TOKENIZER_H
