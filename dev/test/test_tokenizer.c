/*
Unit test of llmc/tokenizer.h against the Llama 2 tokenizer in llama2.c's tokenizer.bin layout.

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
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "llmc/tokenizer.h"

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

int main(int argc, char** argv) {
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
        check("safe_print", strcmp(out, " Once\n\xF0\x9F\x98\x80") == 0, why);
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
