/*
Text a terminal can trust. What the programs print carries bytes they do not choose: the
pieces of a tokenizer file, file names, flag values. A control byte among them (ESC starts
the sequences that move the cursor, retitle the window, rewrite what is on the screen)
would act on the user's terminal instead of being shown, so the sinks that print (logf_
in logger.h, fail_at in common.h, the tokenizer's warnings) pass their text through here:

  bytes 0x00-0x1f except '\n' and '\t', 0x7f, and the UTF-8 encodings of the C1 controls
  (0xc2 0x80 .. 0xc2 0x9f)  ->  written as \xNN (a C1 control as \xc2\xNN)

Everything else, valid UTF-8 text included, passes untouched. main.log gets the same
escaped text as the terminal. A byte-fallback tokenizer prints one character in pieces
(<0xC2> then <0x9B>), so a trailing 0xc2 is held in the TermEsc state until the next
byte says whether it starts a C1 control. No allocation: a fixed buffer, filled and
flushed in pieces.
*/
#pragma once
#include <stdio.h>
#include <string.h>

typedef struct { int held_c2; } TermEsc;  // 1: a 0xc2 seen at the end of the last text, not yet written

static inline int term_byte_is_control(unsigned char b) { return (b < 0x20 && b != '\n' && b != '\t') || b == 0x7f; }

// Escapes s[0..n) into out (cap >= 16 bytes): returns the bytes written to out and sets
// *used to the input consumed (less than n when out is full; call again for the rest).
static inline size_t term_escape(TermEsc* st, const char* s, size_t n, size_t* used, char* out, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    size_t i = 0, k = 0;
    while (i < n && k + 8 <= cap) {
        unsigned char b = (unsigned char)s[i];
        if (st->held_c2) {
            st->held_c2 = 0;
            if (b >= 0x80 && b <= 0x9f) {  // a C1 control: both bytes escaped
                memcpy(out + k, "\\xc2\\x", 6); out[k + 6] = hex[b >> 4]; out[k + 7] = hex[b & 15];
                k += 8; i++;
                continue;
            }
            out[k++] = (char)0xc2;
            continue;  // b is looked at again below, with the held byte written
        }
        i++;
        if (b == 0xc2) { st->held_c2 = 1; continue; }
        if (term_byte_is_control(b)) {
            out[k++] = '\\'; out[k++] = 'x'; out[k++] = hex[b >> 4]; out[k++] = hex[b & 15];
        } else {
            out[k++] = (char)b;
        }
    }
    *used = i;
    return k;
}

// the 0xc2 still held (the text ended with it): written as it came
static inline size_t term_escape_end(TermEsc* st, char* out) {
    if (!st->held_c2) return 0;
    st->held_c2 = 0;
    out[0] = (char)0xc2;
    return 1;
}

// fwrite of s[0..n), escaped; returns 0, or -1 when a write failed
static inline int term_fwrite(FILE* f, TermEsc* st, const char* s, size_t n) {
    char buf[1024];
    int rc = 0;
    while (n) {
        size_t used, k = term_escape(st, s, n, &used, buf, sizeof(buf));
        if (k && fwrite(buf, 1, k, f) != k) rc = -1;
        s += used; n -= used;
    }
    return rc;
}

// the same for a whole text: nothing is held at its end
static inline int term_fputs(FILE* f, const char* s) {
    TermEsc st = {0};
    char end[1];
    int rc = term_fwrite(f, &st, s, strlen(s));
    size_t k = term_escape_end(&st, end);
    if (k && fwrite(end, 1, k, f) != k) rc = -1;
    return rc;
}

// s escaped into out (n bytes, NUL-terminated; a text longer than out is cut), for a name
// printed through printf; returns out
static inline const char* term_escape_str(const char* s, char* out, size_t n) {
    TermEsc st = {0};
    size_t len = strlen(s), used = 0, k = n > 16 ? term_escape(&st, s, len, &used, out, n - 8) : 0;
    k += term_escape_end(&st, out + k);
    out[k] = 0;
    return out;
}
