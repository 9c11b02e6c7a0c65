/*
Unit test of llmc/io/tokenizer.h against the Llama 2 tokenizer in llama2.c's tokenizer.bin layout.

  g++ -O2 -x c++ -Wall -Wextra -I. dev/test/test_tokenizer.c -o test_tokenizer
  ./test_tokenizer [../shared/data/tinystories/tokenizer/tokenizer.bin]

The expected ids were looked up with sentencepiece on tokenizer.model (same vocabulary):
  "Once upon a time, there was a little girl named Lily.\nShe said \"hi\" — ok." ->
  9038 2501 263 931 29892 727 471 263 2217 7826 4257 365 2354 29889 13 13468 1497 376 2918 29908 813 3431 29889
  "Hi 😀!" -> 6324 29871 243 162 155 131 29991   (the emoji as byte-fallback tokens <0xF0><0x9F><0x98><0x80>)
Prints one line PASS name / FAIL name: why per check; exit status non-zero on any failure.

  ./test_tokenizer --synthetic
writes a llama2.c-layout file to /tmp holding those same pieces at those same ids (every
other id a placeholder) and runs every check on it: for machines without the shared data,
where the decoder's rules (BOS space stripping, byte fallback, bounds, file validation) are
still tested, though not the real vocabulary.

  ./test_tokenizer --fixture FIXTURE TOKENIZER.bin
checks any tokenizer.bin (the trained tok512.bin of data/tinystories_sp512/, or the Llama 2
one) against what sentencepiece says about its .model. The fixture comes from
  python3 data/prepare_tinystories.py --vocab-size 512 --decode-fixture FIXTURE
(see write_decode_fixture there): "vocab V", then "piece ID HEX" for every id, the bytes the
id decodes to after a token other than BOS, and "text NAME HEX N ID..." for validation
stories and edge cases (emoji through byte-fallback pieces, "\n" as <0x0A>, digits), the
bytes sentencepiece decodes the ids to; the decoder, starting after BOS as train_llama's
samples do, must give them piece by piece (so the leading space after BOS is dropped).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "llmc/io/tokenizer.h"

static int g_fail = 0, g_pass = 0;

static void check(const char* name, int ok, const char* why) {
    if (ok) { printf("PASS %s\n", name); g_pass++; }
    else { printf("FAIL %s: %s\n", name, why); g_fail++; }
    fflush(stdout);
}

static void check_piece(Tokenizer* t, const char* name, int prev, int id, const char* want) {
    char why[256];
    const char* got = tokenizer_decode(t, prev, id);
    snprintf(why, sizeof(why), "decode(prev=%d, %d) gave \"%s\", expected \"%s\"", prev, id, got, want);
    check(name, strcmp(got, want) == 0, why);
}

// runs f(arg) with the stream fd (1 or 2) sent to a temp file; returns what was written (malloc'd)
static char* capture(int fd, int (*f)(void*), void* arg, int* ret) {
    char path[] = "/tmp/test_tokenizer_capture_XXXXXX";
    int tmp = mkstemp(path);
    fflush(stdout);
    fflush(stderr);
    int saved = dup(fd);
    dup2(tmp, fd);
    *ret = f(arg);
    fflush(stdout);
    fflush(stderr);
    dup2(saved, fd);
    close(saved);
    size_t n = (size_t)lseek(tmp, 0, SEEK_END);
    char* buf = (char*)calloc(n + 1, 1);
    lseek(tmp, 0, SEEK_SET);
    if (n > 0 && read(tmp, buf, n) < 0) { buf[0] = '\0'; }
    close(tmp);
    unlink(path);
    return buf;
}

static int init_missing(void* arg) {
    Tokenizer t;
    int r = tokenizer_init(&t, (const char*)arg, 32000);
    tokenizer_free(&t);
    return r;
}

static int print_pieces(void* arg) {
    (void)arg;
    safe_print("\x01");   // control byte: skipped
    safe_print(" Once");
    safe_print("\n");     // whitespace: printed
    safe_print("");
    safe_print(NULL);
    safe_print("\xF0\x9F\x98\x80"); // multi-byte UTF-8: printed
    safe_print("\x7F");   // DEL: skipped
    // the same character as four byte-fallback pieces <0xF0><0x9F><0x98><0x80>: printed
    safe_print("\xF0"); safe_print("\x9F"); safe_print("\x98"); safe_print("\x80");
    return 0;
}

// pieces that would drive a terminal: escaped (llmc/core/term.h), valid UTF-8 untouched
static int print_control_pieces(void* arg) {
    (void)arg;
    safe_print("\x1b[31mred");          // ESC inside a piece: \x1b
    safe_print(" a\rb\x07");            // CR, BEL
    safe_print("\xC2\xA9");             // U+00A9, valid UTF-8 that starts with 0xc2: untouched
    safe_print("\xC2"); safe_print("\x9B"); // C1 CSI as two byte-fallback pieces: both bytes escaped
    safe_print("\xC2\x9B" "2J\t\n");     // C1 CSI in one piece; tab and newline stay
    return 0;
}

// the pieces the checks below use, at their Llama 2 ids (byte tokens <0xXX> are id 3 + XX)
static const struct { int id; const char* piece; } k_known_pieces[] = {
    {0, "<unk>"}, {1, "\n<s>\n"}, {2, "\n</s>\n"}, {263, " a"}, {365, " L"}, {376, " \""},
    {471, " was"}, {727, " there"}, {813, " \xE2\x80\x94"}, {931, " time"}, {1497, " said"},
    {2217, " little"}, {2354, "ily"}, {2501, " upon"}, {2918, "hi"}, {3431, " ok"}, {4257, " named"},
    {6324, " Hi"}, {7826, " girl"}, {9038, " Once"}, {13468, "She"}, {29871, " "}, {29889, "."},
    {29892, ","}, {29908, "\""}, {29991, "!"},
};

// writes a 32000-token file in llama2.c's layout with k_known_pieces and byte tokens at their ids
static void write_synthetic_tokenizer(const char* path) {
    FILE* f = fopen(path, "wb");
    if (!f) { fprintf(stderr, "cannot write %s\n", path); exit(1); }
    int max_len = 16;
    fwrite(&max_len, 4, 1, f);
    for (int id = 0; id < 32000; id++) {
        char buf[32];
        const char* piece = NULL;
        for (size_t i = 0; i < sizeof(k_known_pieces) / sizeof(k_known_pieces[0]); i++) {
            if (k_known_pieces[i].id == id) { piece = k_known_pieces[i].piece; }
        }
        if (!piece && id >= 3 && id < 3 + 256) { snprintf(buf, sizeof(buf), "<0x%02X>", id - 3); piece = buf; }
        if (!piece) { snprintf(buf, sizeof(buf), "<t%d>", id); piece = buf; }
        float score = -(float)id;
        int len = (int)strlen(piece);
        fwrite(&score, 4, 1, f);
        fwrite(&len, 4, 1, f);
        fwrite(piece, 1, (size_t)len, f);
    }
    fclose(f);
}

// ---------------------------------------------------------------------------------------------
// --fixture: a tokenizer.bin against sentencepiece's decodes (data/prepare_tinystories.py)

typedef struct { char* data; size_t len; } Bytes;

// "-" -> empty; otherwise lowercase or uppercase hex pairs; returns 0 on a malformed field
static int hex_decode(const char* hex, Bytes* out) {
    out->len = 0;
    out->data = (char*)malloc(strlen(hex) / 2 + 1);
    if (strcmp(hex, "-") == 0) { out->data[0] = '\0'; return 1; }
    size_t n = strlen(hex);
    if (n % 2) { return 0; }
    for (size_t i = 0; i < n; i += 2) {
        int hi = tokenizer_hex_(hex[i]), lo = tokenizer_hex_(hex[i + 1]);
        if (hi < 0 || lo < 0) { return 0; }
        out->data[out->len++] = (char)(hi * 16 + lo);
    }
    out->data[out->len] = '\0';
    return 1;
}

// shows bytes with C escapes, at most ~200 characters
static void show_bytes(char* dst, size_t cap, const char* p, size_t n) {
    size_t k = 0;
    dst[0] = '\0';
    for (size_t i = 0; i < n && k + 8 < cap && k < 200; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n') { k += (size_t)snprintf(dst + k, cap - k, "\\n"); }
        else if (c >= 0x20 && c < 0x7F && c != '\\') { dst[k++] = (char)c; dst[k] = '\0'; }
        else { k += (size_t)snprintf(dst + k, cap - k, "\\x%02x", c); }
    }
    if (k >= 200) { snprintf(dst + k, cap - k, "..."); }
}

static int run_fixture(const char* fixture_path, const char* bin_path) {
    char why[1024];
    FILE* f = fopen(fixture_path, "r");
    if (!f) {
        snprintf(why, sizeof(why), "cannot open %s", fixture_path);
        check("fixture_open", 0, why);
        return 1;
    }
    char* line = NULL;
    size_t cap = 0;
    ssize_t got;
    int vocab = -1, lineno = 0, n_pieces = 0, piece_fail = 0, piece_ids_seen = 0, n_texts = 0;
    Tokenizer t;
    int init_r = -2;
    char first_bad[700] = "";
    while ((got = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (line[got - 1] == '\n') { line[--got] = '\0'; }
        if (lineno == 1) {
            check("fixture_header", strcmp(line, "tokenizer_fixture 1") == 0, "first line is not \"tokenizer_fixture 1\"");
            continue;
        }
        if (strncmp(line, "vocab ", 6) == 0) {
            vocab = atoi(line + 6);
            init_r = tokenizer_init(&t, bin_path, vocab);
            snprintf(why, sizeof(why), "tokenizer_init(%s, %d) returned %d, %d tokens", bin_path, vocab, init_r,
                     init_r == 0 ? t.vocab_size : 0);
            check("fixture_init", init_r == 0 && t.vocab_size == vocab, why);
            if (init_r != 0) { break; }
            continue;
        }
        if (init_r != 0) {
            check("fixture_format", 0, "a piece or text line before the vocab line");
            break;
        }
        if (strncmp(line, "piece ", 6) == 0) {
            int id;
            char hex[256];
            Bytes want;
            if (sscanf(line + 6, "%d %255s", &id, hex) != 2 || !hex_decode(hex, &want)) {
                snprintf(why, sizeof(why), "line %d: malformed piece line", lineno);
                check("fixture_format", 0, why);
                continue;
            }
            // after a token other than BOS (id 0 is never BOS; any non-BOS id gives the same)
            int prev = id == 0 ? 3 : 0;
            const char* out = tokenizer_decode(&t, prev, id);
            // <0x00>: a C string cannot hold the NUL byte; the decoder gives "" (nothing printed)
            if (want.len == 1 && want.data[0] == '\0') { want.len = 0; }
            if (strlen(out) != want.len || memcmp(out, want.data, want.len) != 0) {
                if (!piece_fail) {
                    char a[300], b[300];
                    show_bytes(a, sizeof(a), out, strlen(out));
                    show_bytes(b, sizeof(b), want.data, want.len);
                    snprintf(first_bad, sizeof(first_bad), "id %d decodes to \"%s\", sentencepiece says \"%s\"", id, a, b);
                }
                piece_fail++;
            }
            if (id == piece_ids_seen) { piece_ids_seen++; }
            n_pieces++;
            free(want.data);
            continue;
        }
        if (strncmp(line, "text ", 5) == 0) {
            char name[128];
            int pos = 0;
            if (sscanf(line + 5, "%127s %n", name, &pos) != 1) {
                check("fixture_format", 0, "malformed text line");
                continue;
            }
            char* p = line + 5 + pos;
            char* sp = strchr(p, ' ');
            if (!sp) { check("fixture_format", 0, "text line without ids"); continue; }
            *sp = '\0';
            Bytes want;
            int ok_hex = hex_decode(p, &want);
            p = sp + 1;
            int n = (int)strtol(p, &p, 10), count = 0;
            size_t out_cap = 64, out_len = 0;
            char* out = (char*)malloc(out_cap);
            int prev = TOKENIZER_BOS;  // as train_llama's sample_story: the story starts after BOS
            for (;;) {
                char* end;
                long id = strtol(p, &end, 10);
                if (end == p) { break; }
                p = end;
                const char* piece = tokenizer_decode(&t, prev, (int)id);
                size_t pl = strlen(piece);
                while (out_len + pl + 1 > out_cap) { out_cap *= 2; out = (char*)realloc(out, out_cap); }
                memcpy(out + out_len, piece, pl);
                out_len += pl;
                prev = (int)id;
                count++;
            }
            out[out_len] = '\0';
            char a[300], b[300], tname[160];
            show_bytes(a, sizeof(a), out, out_len);
            show_bytes(b, sizeof(b), want.data, want.len);
            snprintf(tname, sizeof(tname), "fixture_text_%s", name);
            snprintf(why, sizeof(why), "%d ids (header says %d) decode to \"%s\" (%zu bytes), sentencepiece to \"%s\" (%zu bytes)",
                     count, n, a, out_len, b, want.len);
            check(tname, ok_hex && count == n && n > 0 && out_len == want.len && memcmp(out, want.data, want.len) == 0, why);
            free(out);
            free(want.data);
            n_texts++;
            continue;
        }
        snprintf(why, sizeof(why), "line %d: unknown line \"%.40s\"", lineno, line);
        check("fixture_format", 0, why);
    }
    free(line);
    fclose(f);
    if (init_r != 0) {
        if (init_r == -2) { check("fixture_init", 0, "no vocab line in the fixture"); }
        return 1;
    }
    snprintf(why, sizeof(why), "%d of %d pieces differ (first: %s); %d consecutive ids from 0, vocab %d", piece_fail,
             n_pieces, first_bad, piece_ids_seen, vocab);
    check("fixture_every_piece", piece_fail == 0 && n_pieces == vocab && piece_ids_seen == vocab, why);
    snprintf(why, sizeof(why), "%d texts in the fixture", n_texts);
    check("fixture_has_texts", n_texts > 0, why);
    // the rules that hold for every llama2.c tokenizer.bin
    check_piece(&t, "fixture_bos_piece", 5, 1, "\n<s>\n");
    check_piece(&t, "fixture_eos_piece", 5, 2, "\n</s>\n");
    check_piece(&t, "fixture_id_out_of_range", 5, vocab, "");
    check_piece(&t, "fixture_negative_id", 5, -1, "");
    // a byte-fallback newline, as the shards store "\n" (<0x0A> is id 3 + 0x0A in both vocabularies)
    check_piece(&t, "fixture_byte_newline_after_bos", 1, 3 + 0x0A, "\n");
    tokenizer_free(&t);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "--fixture") == 0) {
        if (argc != 4) {
            fprintf(stderr, "usage: %s --fixture FIXTURE TOKENIZER.bin\n", argv[0]);
            return 2;
        }
        return run_fixture(argv[2], argv[3]);
    }
    const char* path = argc > 1 ? argv[1] : "../shared/data/tinystories/tokenizer/tokenizer.bin";
    int synthetic = strcmp(path, "--synthetic") == 0;
    char synthetic_path[] = "/tmp/test_tokenizer_synthetic_XXXXXX";
    if (synthetic) {
        int fd = mkstemp(synthetic_path);
        if (fd < 0) { perror("mkstemp"); return 1; }
        close(fd);
        write_synthetic_tokenizer(synthetic_path);
        path = synthetic_path;
    }
    char why[512];
    Tokenizer t;
    int r = tokenizer_init(&t, path, 32000);
    snprintf(why, sizeof(why), "tokenizer_init(%s) returned %d", path, r);
    check(synthetic ? "init_synthetic_tokenizer" : "init_llama2_tokenizer", r == 0 && t.vocab_size == 32000, why);
    if (r != 0) {
        printf("%d passed, %d failed\n", g_pass, g_fail);
        return 1;
    }

    check_piece(&t, "once_after_bos", 1, 9038, "Once");
    check_piece(&t, "once_after_token", 263, 9038, " Once");
    check_piece(&t, "upon", 9038, 2501, " upon");
    check_piece(&t, "comma", 931, 29892, ",");
    check_piece(&t, "byte_newline", 29889, 13, "\n");
    check_piece(&t, "byte_newline_after_bos", 1, 13, "\n");
    check_piece(&t, "she_no_space", 13, 13468, "She");
    check_piece(&t, "byte_0xF0", 29871, 243, "\xF0");
    check_piece(&t, "lone_space", 6324, 29871, " ");
    check_piece(&t, "bos_piece", 5, 1, "\n<s>\n");
    check_piece(&t, "eos_piece", 5, 2, "\n</s>\n");
    check_piece(&t, "unk_piece", 5, 0, "<unk>");
    check_piece(&t, "id_out_of_range", 5, 32000, "");
    check_piece(&t, "negative_id", 5, -1, "");

    // whole sentences, as the trainer decodes samples: prev starts at BOS
    {
        static const int ids[] = {9038, 2501, 263, 931, 29892, 727, 471, 263, 2217, 7826, 4257, 365,
                                  2354, 29889, 13, 13468, 1497, 376, 2918, 29908, 813, 3431, 29889};
        const char* want = "Once upon a time, there was a little girl named Lily.\nShe said \"hi\" \xE2\x80\x94 ok.";
        char out[256] = "";
        int prev = 1;
        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
            strcat(out, tokenizer_decode(&t, prev, ids[i]));
            prev = ids[i];
        }
        snprintf(why, sizeof(why), "got \"%s\"", out);
        check("decode_sentence", strcmp(out, want) == 0, why);
    }
    {
        static const int ids[] = {6324, 29871, 243, 162, 155, 131, 29991};
        const char* want = "Hi \xF0\x9F\x98\x80!";
        char out[64] = "";
        int prev = 1;
        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
            strcat(out, tokenizer_decode(&t, prev, ids[i]));
            prev = ids[i];
        }
        snprintf(why, sizeof(why), "got \"%s\"", out);
        check("decode_byte_fallback_emoji", strcmp(out, want) == 0, why);
    }

    // safe_print
    {
        int ret;
        char* out = capture(1, print_pieces, NULL, &ret);
        snprintf(why, sizeof(why), "printed \"%s\"", out);
        check("safe_print", strcmp(out, " Once\n\xF0\x9F\x98\x80\xF0\x9F\x98\x80") == 0, why);
        free(out);
        out = capture(1, print_control_pieces, NULL, &ret);
        snprintf(why, sizeof(why), "printed \"%s\"", out);
        check("safe_print_escapes_controls",
              strcmp(out, "\\x1b[31mred a\\x0db\\x07\xC2\xA9\\xc2\\x9b\\xc2\\x9b2J\t\n") == 0, why);
        free(out);
    }
    tokenizer_free(&t);
    check_piece(&t, "decode_after_free", 5, 9038, "");

    // missing file: -1 and a message naming it
    {
        int ret;
        const char* missing = "/nonexistent/dir/tokenizer.bin";
        char* err = capture(2, init_missing, (void*)missing, &ret);
        snprintf(why, sizeof(why), "returned %d, stderr \"%s\"", ret, err);
        check("missing_file_returns_minus1", ret == -1 && strstr(err, missing) != NULL, why);
        free(err);
    }
    // truncated file: -1
    {
        char tpath[] = "/tmp/test_tokenizer_trunc_XXXXXX";
        int fd = mkstemp(tpath);
        FILE* src = fopen(path, "rb");
        char buf[1000];
        size_t n = src ? fread(buf, 1, sizeof(buf), src) : 0;
        if (src) { fclose(src); }
        if (write(fd, buf, n) != (ssize_t)n) { n = 0; }
        close(fd);
        int ret;
        char* err = capture(2, init_missing, (void*)tpath, &ret);
        snprintf(why, sizeof(why), "returned %d, stderr \"%s\"", ret, err);
        check("truncated_file_returns_minus1", n == sizeof(buf) && ret == -1 && strstr(err, "truncated") != NULL,
              why);
        free(err);
        unlink(tpath);
    }
    // vocab size: a smaller model vocab than the file is refused; a padded (larger) one is fine
    {
        Tokenizer t2;
        fflush(stderr);
        int saved = dup(2);
        FILE* devnull = fopen("/dev/null", "w");
        dup2(fileno(devnull), 2);
        int r1 = tokenizer_init(&t2, path, 1000);
        tokenizer_free(&t2);
        int r2 = tokenizer_init(&t2, path, 32064);
        const char* pad = tokenizer_decode(&t2, 5, 32050);
        const char* once = tokenizer_decode(&t2, 5, 9038);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        fclose(devnull);
        snprintf(why, sizeof(why), "init with vocab 1000 -> %d (want -1), vocab 32064 -> %d (want 0)", r1, r2);
        check("vocab_size_mismatch", r1 == -1 && r2 == 0 && strcmp(pad, "") == 0 && strcmp(once, " Once") == 0, why);
        tokenizer_free(&t2);
    }

    if (synthetic) { unlink(synthetic_path); }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
