/*
Unit test of llmc/io/video_data.h (moving-digits generator, clip files, the batch source)
and the helper modes that dev/test/run_tests.sh drives for llmc/io/image_write.h and
scripts/clips_to_bin.py.

  g++ -O2 -x c++ -DLLMC_CPU -Wall -Wextra -I. dev/test/test_video_data.c -o build/test_video_data
  ./test_video_data                         # every check: one line PASS name / FAIL name: why
  ./test_video_data --open FILE [SPLIT NVAL [C FR HI WI NC]]  # open a clip file as a source, print OK and
                                            # its shape (and check it against the one given)
  ./test_video_data --gen C FR HI WI NC     # init a generator, print OK (bad sizes must FAIL clearly)
  ./test_video_data --dump FILE OUT         # every clip of FILE in file order: int32 label, float32 values
  ./test_video_data --images DIR            # GIFs, PNG strips and their raw clips for dev/test/check_images.py
  ./test_video_data --write-gif PATH        # one small GIF to PATH (an unwritable PATH must FAIL clearly)
Exit status: non-zero on any failure.
*/
#include "llmc/io/video_data.h"
#include "llmc/io/image_write.h"
#include <unistd.h>

static int g_fail = 0;

static void check(const char* name, int ok, const char* why) {
    if (ok) printf("PASS %s\n", name);
    else { printf("FAIL %s: %s\n", name, why); g_fail++; }
    fflush(stdout);
}

static float* clip_alloc(int C, int Fr, int Hi, int Wi) { return (float*)xmalloc(sizeof(float) * C * Fr * Hi * Wi); }

// ----------------------------------------------------------------------------
// the generator

// the generator's picture of clip `index`, frame f, channel 0 at (y, x)
static float at(const ClipGenerator* g, const float* clip, int f, int y, int x) { return clip[((size_t)f * g->Hi + y) * g->Wi + x]; }

// Which digits appear in frame f? Font pixels are 2x2 pixels here (min(Hi, Wi) = 28), so
// each covers at least one pixel entirely; a digit d "appears at (x0, y0)" when the pixels
// (x0 + 2c, y0 + 2r) are lit exactly where d's bitmap is set. Returns a bit mask of digits.
static int digits_seen(const ClipGenerator* g, const float* clip, int f) {
    int seen = 0;
    for (int d = 0; d < 10; d++)
        for (int y0 = 0; y0 + 12 < g->Hi && !(seen >> d & 1); y0++)
            for (int x0 = 0; x0 + 8 < g->Wi && !(seen >> d & 1); x0++) {
                int match = 1;
                for (int r = 0; r < 7 && match; r++)
                    for (int c = 0; c < 5 && match; c++) {
                        float v = at(g, clip, f, y0 + 2 * r, x0 + 2 * c);
                        match = clipgen_font_bit(d, r, c) ? v >= 0.0f : v == -1.0f;
                    }
                if (match) seen |= 1 << d;
            }
    return seen;
}

static int font_bits(int d) {
    int n = 0;
    for (int r = 0; r < 7; r++) for (int c = 0; c < 5; c++) n += clipgen_font_bit(d, r, c);
    return n;
}

static void test_generator(void) {
    char why[256] = "";
    // determinism, and different clips for different indices and seeds
    {
        ClipGenerator g, g2, g3;
        clipgen_init(&g, 3, 5, 17, 23, 10, 42);
        clipgen_init(&g2, 3, 5, 17, 23, 10, 42);
        clipgen_init(&g3, 3, 5, 17, 23, 10, 43);
        size_t n = 3 * 5 * 17 * 23;
        float *a = clip_alloc(3, 5, 17, 23), *b = clip_alloc(3, 5, 17, 23), *c = clip_alloc(3, 5, 17, 23);
        int la, lb, lc, same = 1, differ_index = 1, differ_seed = 0;
        for (uint64_t i = 0; i < 50; i++) {
            clipgen_clip(&g, i, a, &la);
            memset(b, 0, n * 4);
            clipgen_clip(&g2, i, b, &lb);
            same &= memcmp(a, b, n * 4) == 0 && la == lb;
            clipgen_clip(&g, i + 1, c, &lc);
            differ_index &= memcmp(a, c, n * 4) != 0;
            clipgen_clip(&g3, i, c, &lc);
            differ_seed += memcmp(a, c, n * 4) != 0;
        }
        check("gen_deterministic", same, "the same seed and index gave different bytes");
        check("gen_index_changes_clip", differ_index, "two consecutive indices gave the same clip");
        check("gen_seed_changes_clip", differ_seed == 50, "another seed gave the same clip");
        free(a); free(b); free(c);
    }
    // values in [-1, 1], some lit and some background (exactly -1), every shape (odd sizes, the smallest frame, C != 1, 3)
    {
        const int shapes[5][5] = {{1, 4, 8, 6, 3}, {3, 5, 17, 23, 10}, {2, 3, 9, 31, 7}, {4, 2, 40, 12, 10}, {1, 7, 64, 64, 5}};
        int ok = 1, classes_ok = 1;
        for (int k = 0; k < 5; k++) {
            const int* s = shapes[k];
            ClipGenerator g;
            clipgen_init(&g, s[0], s[1], s[2], s[3], s[4], 7);
            size_t n = (size_t)s[0] * s[1] * s[2] * s[3];
            float* clip = clip_alloc(s[0], s[1], s[2], s[3]);
            for (uint64_t i = 0; i < 40; i++) {
                int label, lit = 0, dark = 0;
                clipgen_clip(&g, i * 977, clip, &label);
                classes_ok &= label >= 0 && label < s[4];
                for (size_t j = 0; j < n; j++) {
                    ok &= clip[j] >= -1.0f && clip[j] <= 1.0f;
                    lit += clip[j] > -1.0f;
                    dark += clip[j] == -1.0f;
                }
                if (!(lit > 0 && dark > 0)) { ok = 0; snprintf(why, sizeof why, "shape %d clip %llu: %d lit, %d dark values", k, (unsigned long long)i, lit, dark); }
            }
            free(clip);
        }
        check("gen_values_in_range", ok, why[0] ? why : "a value outside [-1, 1]");
        check("gen_labels_in_range", classes_ok, "a label outside [0, NC)");
    }
    // the label is the digit drawn; every class appears; the digit moves and stays whole inside the frame
    for (int C = 1; C <= 3; C += 2) {
        ClipGenerator g;
        const int Fr = 6, Hi = 28, Wi = 31;
        clipgen_init(&g, C, Fr, Hi, Wi, 10, 1234 + C);
        float* clip = clip_alloc(C, Fr, Hi, Wi);
        int classes = 0, label_ok = 1, moves = 1, inside = 1;
        why[0] = 0;
        const double cell = (double)clipgen_cell(&g) / CLIPGEN_SUBPIXELS;
        for (uint64_t i = 0; i < 120; i++) {
            int label;
            clipgen_clip(&g, i, clip, &label);
            classes |= 1 << label;
            for (int f = 0; f < Fr; f++) {
                int seen = digits_seen(&g, clip, f);
                if (seen != 1 << label) {
                    label_ok = 0;
                    snprintf(why, sizeof why, "clip %llu frame %d: label %d, digits seen mask 0x%x", (unsigned long long)i, f, label, seen);
                }
                // the lit area of a whole glyph inside the frame is (lit font pixels) * cell^2 (C == 1:
                // full intensity, (v + 1)/2 is the coverage)
                if (C == 1) {
                    double area = 0;
                    for (int y = 0; y < Hi; y++) for (int x = 0; x < Wi; x++) area += (at(&g, clip, f, y, x) + 1.0) / 2.0;
                    double want = font_bits(label) * cell * cell;
                    if (fabs(area - want) > 1e-3 * want) {
                        inside = 0;
                        snprintf(why, sizeof why, "clip %llu frame %d: lit area %.4f, a whole glyph has %.4f", (unsigned long long)i, f, area, want);
                    }
                }
            }
            // within any 3 consecutive frames the picture changes
            size_t frame = (size_t)Hi * Wi;
            for (int f = 0; f + 2 < Fr; f++) {
                int changed = 0;
                for (int c = 0; c < C; c++) {
                    const float* p = clip + ((size_t)c * Fr + f) * frame;
                    changed |= memcmp(p, p + frame, frame * 4) != 0 || memcmp(p + frame, p + 2 * frame, frame * 4) != 0;
                }
                if (!changed) { moves = 0; snprintf(why, sizeof why, "clip %llu: frames %d..%d are equal", (unsigned long long)i, f, f + 2); }
            }
        }
        char name[64];
        snprintf(name, sizeof name, "gen_label_is_digit_drawn_C%d", C);
        check(name, label_ok, why);
        snprintf(name, sizeof name, "gen_every_class_appears_C%d", C);
        check(name, classes == 0x3FF, "some digit never appeared in 120 clips");
        snprintf(name, sizeof name, "gen_digit_moves_C%d", C);
        check(name, moves, why);
        if (C == 1) check("gen_digit_stays_inside", inside, why);
        free(clip);
    }
    // per-clip colour for C == 3: every fully lit pixel has one channel at +1, the others >= 0
    {
        ClipGenerator g;
        clipgen_init(&g, 3, 2, 28, 28, 10, 5);
        float* clip = clip_alloc(3, 2, 28, 28);
        int ok = 1, colours = 0;
        float first[3] = {0, 0, 0};
        size_t plane = 2 * 28 * 28;
        for (uint64_t i = 0; i < 20; i++) {
            int label;
            clipgen_clip(&g, i, clip, &label);
            float best[3] = {-1, -1, -1};
            for (size_t j = 0; j < plane; j++)
                if (clip[j] + clip[plane + j] + clip[2 * plane + j] > best[0] + best[1] + best[2])
                    for (int c = 0; c < 3; c++) best[c] = clip[c * plane + j];
            float mx = fmaxf(best[0], fmaxf(best[1], best[2]));
            ok &= mx == 1.0f && best[0] >= 0 && best[1] >= 0 && best[2] >= 0;
            if (i == 0) memcpy(first, best, sizeof first);
            else colours += memcmp(first, best, sizeof first) != 0;
        }
        check("gen_rgb_colour", ok && colours > 15, "the brightest pixels are not a bright per-clip colour");
        free(clip);
    }
}

// ----------------------------------------------------------------------------
// the batch source: DP split, train/val, files

static int same_batches(ClipSource* s, int global_B, uint64_t step, char* why, size_t why_n) {
    size_t n = s->clip_values;
    float* whole = (float*)xmalloc(4 * n * global_B);
    int* whole_labels = (int*)xmalloc(sizeof(int) * global_B);
    clipsource_get_batch(s, step, global_B, 0, 1, whole, whole_labels);
    int ok = 1;
    for (int dp = 2; dp <= global_B; dp++) {
        if (global_B % dp) continue;
        int B = global_B / dp;
        float* part = (float*)xmalloc(4 * n * B);
        int* labels = (int*)xmalloc(sizeof(int) * B);
        for (int r = 0; r < dp; r++) {
            clipsource_get_batch(s, step, global_B, r, dp, part, labels);
            if (memcmp(part, whole + (size_t)r * B * n, 4 * n * B) != 0 || memcmp(labels, whole_labels + r * B, sizeof(int) * B) != 0) {
                ok = 0;
                snprintf(why, why_n, "dp=%d rank %d: its rows differ from the dp=1 batch's rows %d..%d", dp, r, r * B, (r + 1) * B - 1);
            }
        }
        free(part); free(labels);
    }
    // and the dp=1 batch is clips step*global_B ...
    float* one = (float*)xmalloc(4 * n);
    for (int b = 0; b < global_B; b++) {
        int label;
        clipsource_get(s, step * global_B + b, one, &label);
        if (memcmp(one, whole + (size_t)b * n, 4 * n) != 0 || label != whole_labels[b]) {
            ok = 0; snprintf(why, why_n, "row %d of step %llu is not clip %llu", b, (unsigned long long)step, (unsigned long long)(step * global_B + b));
        }
    }
    free(one); free(whole); free(whole_labels);
    return ok;
}

static char g_dir[256];

// a clip file with random values (float32: random in [-1, 1]; uint8: random bytes);
// values[k * n ...] keeps what each clip must decode to
static void write_clip_file(const char* path, int n_clips, int C, int Fr, int Hi, int Wi, int NC, int enc, float* values, int* labels) {
    int32_t h[CLIPFILE_HEADER_INTS] = {0};
    h[0] = CLIPFILE_MAGIC; h[1] = CLIPFILE_VERSION; h[2] = n_clips;
    h[3] = C; h[4] = Fr; h[5] = Hi; h[6] = Wi; h[7] = NC; h[8] = enc;
    FILE* f = xfopen(path, "wb");
    xfwrite(h, 4, CLIPFILE_HEADER_INTS, f, path);
    size_t n = (size_t)C * Fr * Hi * Wi;
    uint64_t s = 99;
    for (int k = 0; k < n_clips; k++) {
        int32_t label = (int32_t)clipgen_below_(&s, NC);
        labels[k] = label;
        xfwrite(&label, 4, 1, f, path);
        for (size_t j = 0; j < n; j++) {
            uint64_t r = clipgen_splitmix64_(&s);
            if (enc == CLIPFILE_ENC_UINT8) {
                unsigned char b = (unsigned char)(r & 0xFF);
                xfwrite(&b, 1, 1, f, path);
                values[k * n + j] = (float)(b / 127.5 - 1.0);
            } else {
                float v = (float)((r >> 40) / 8388608.0 - 1.0);  // [-1, 1)
                if (j == 0) v = (k & 1) ? 1.0f : -1.0f;           // the ends are allowed
                xfwrite(&v, 4, 1, f, path);
                values[k * n + j] = v;
            }
        }
    }
    fclose(f);
}

static void test_sources(void) {
    char why[256] = "";
    // synthetic: the DP split, train/val disjoint, val fixed
    {
        ClipSource train, val;
        clipsource_init_synthetic(&train, 3, 3, 9, 10, 10, 11, 0);
        clipsource_init_synthetic(&val, 3, 3, 9, 10, 10, 11, 1);
        check("synthetic_dp_split", same_batches(&train, 12, 5, why, sizeof why), why);
        int disjoint = 1;
        for (uint64_t i = 0; i < 1000; i++) {
            uint64_t t = clipsource_source_index(&train, i * 7919 + (i << 40)), v = clipsource_source_index(&val, i * 7919 + (i << 40));
            disjoint &= t < CLIPSOURCE_VAL_BIT && v >= CLIPSOURCE_VAL_BIT;
        }
        size_t n = train.clip_values;
        float *a = (float*)xmalloc(4 * n), *b = (float*)xmalloc(4 * n);
        int la, lb, differ = 1;
        for (uint64_t i = 0; i < 20; i++) {
            clipsource_get(&train, i, a, &la);
            clipsource_get(&val, i, b, &lb);
            differ &= memcmp(a, b, 4 * n) != 0;
        }
        check("synthetic_train_val_disjoint", disjoint && differ, "a train index reaches the val range, or a val clip equals a train clip");
        clipsource_get(&val, 3, a, &la);
        clipsource_get(&val, 3, b, &lb);
        check("synthetic_val_fixed", memcmp(a, b, 4 * n) == 0 && la == lb, "val clip 3 changed between reads");
        free(a); free(b);
        clipsource_free(&train); clipsource_free(&val);
    }
    // the Feistel shuffle is a permutation for every size
    {
        int ok = 1;
        unsigned char seen[300];
        for (uint64_t n = 1; n <= 300 && ok; n++) {
            memset(seen, 0, sizeof seen);
            for (uint64_t i = 0; i < n; i++) {
                uint64_t p = clipsource_permute_(i, n, n * 31);
                if (p >= n || seen[p]) { ok = 0; snprintf(why, sizeof why, "n = %llu: not a permutation", (unsigned long long)n); break; }
                seen[p] = 1;
            }
        }
        check("shuffle_is_permutation", ok, why);
    }
    // files: every clip reads back exactly, train is shuffled per epoch over the first
    // n_train clips, val reads the last n_val in order; the DP split
    for (int enc = 0; enc <= 1; enc++) {
        const int n_clips = 23, C = 2, Fr = 3, Hi = 5, Wi = 7, NC = 4, n_val = 5, n_train = n_clips - n_val;
        size_t n = (size_t)C * Fr * Hi * Wi;
        char path[400];
        snprintf(path, sizeof path, "%s/clips_%d.bin", g_dir, enc);
        float* values = (float*)xmalloc(4 * n * n_clips);
        int labels[n_clips];
        write_clip_file(path, n_clips, C, Fr, Hi, Wi, NC, enc, values, labels);
        ClipSource train, val;
        clipsource_init_file(&train, path, 0, n_val, 77);
        clipsource_init_file(&val, path, 1, n_val, 77);
        float* clip = (float*)xmalloc(4 * n);
        int label, exact = 1, perm_ok = 1, orders_differ = 0, val_ok = 1;
        uint64_t first_order[n_train];
        for (int e = 0; e < 3; e++) {
            int seen[n_train];
            memset(seen, 0, sizeof seen);
            for (int p = 0; p < n_train; p++) {
                uint64_t i = (uint64_t)e * n_train + p, src = clipsource_source_index(&train, i);
                if (src >= (uint64_t)n_train || seen[src]++) { perm_ok = 0; continue; }
                if (e == 0) first_order[p] = src;
                else orders_differ |= first_order[p] != src;
                clipsource_get(&train, i, clip, &label);
                exact &= memcmp(clip, values + src * n, 4 * n) == 0 && label == labels[src];
            }
        }
        for (int i = 0; i < 2 * n_val; i++) {
            uint64_t src = clipsource_source_index(&val, i);
            val_ok &= src == (uint64_t)(n_train + i % n_val);
            clipsource_get(&val, i, clip, &label);
            exact &= memcmp(clip, values + src * n, 4 * n) == 0 && label == labels[src];
        }
        const char* e_name = enc ? "float32" : "uint8";
        char name[64];
        snprintf(name, sizeof name, "file_%s_reads_back_exactly", e_name);
        check(name, exact, "a clip or label read differs from what was written");
        snprintf(name, sizeof name, "file_%s_train_epoch_permutation", e_name);
        check(name, perm_ok && orders_differ, "an epoch is not a permutation of the train clips, or every epoch has the same order");
        snprintf(name, sizeof name, "file_%s_val_last_clips_in_order", e_name);
        check(name, val_ok && train.num_clips == (uint64_t)n_train && val.num_clips == (uint64_t)n_val, "val does not read the last n_val clips in order");
        snprintf(name, sizeof name, "file_%s_dp_split", e_name);
        check(name, same_batches(&train, 6, 7, why, sizeof why), why);
        free(clip); free(values);
        clipsource_free(&train); clipsource_free(&val);
        unlink(path);
    }
}

// ----------------------------------------------------------------------------
// modes for run_tests.sh

static int mode_open(int argc, char** argv) {
    ClipSource s;
    int split = argc > 3 ? atoi(argv[3]) : 0, n_val = argc > 4 ? atoi(argv[4]) : 0;
    clipsource_init_file(&s, argv[2], split, n_val, 1);
    if (argc == 10) clipsource_check_shape(&s, atoi(argv[5]), atoi(argv[6]), atoi(argv[7]), atoi(argv[8]), atoi(argv[9]));
    float* clip = (float*)xmalloc(4 * s.clip_values);
    int label;
    clipsource_get(&s, 0, clip, &label);
    printf("OK %llu clips of C=%d Fr=%d Hi=%d Wi=%d, %d classes\n", (unsigned long long)s.num_clips, s.C, s.Fr, s.Hi, s.Wi, s.num_classes);
    free(clip);
    clipsource_free(&s);
    return 0;
}

static int mode_dump(char** argv) {
    // the val split holding every clip reads the file in order
    ClipSource probe;
    clipsource_init_file(&probe, argv[2], 0, 0, 1);
    int n = (int)probe.num_clips;
    clipsource_free(&probe);
    ClipSource s;
    clipsource_init_file(&s, argv[2], 1, n, 1);
    FILE* out = xfopen(argv[3], "wb");
    float* clip = (float*)xmalloc(4 * s.clip_values);
    for (int i = 0; i < n; i++) {
        int label;
        clipsource_get(&s, i, clip, &label);
        int32_t l = label;
        xfwrite(&l, 4, 1, out, argv[3]);
        xfwrite(clip, 4, s.clip_values, out, argv[3]);
    }
    fclose(out);
    printf("OK %d clips\n", n);
    free(clip);
    clipsource_free(&s);
    return 0;
}

// one picture case: the raw clip, its GIF and PNG strip, and a manifest line
static void image_case(FILE* manifest, const char* dir, const char* name, const float* clip, int C, int Fr, int Hi, int Wi, int scale, int gap, int delay) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s.f32", dir, name);
    FILE* f = xfopen(path, "wb");
    xfwrite(clip, 4, (size_t)C * Fr * Hi * Wi, f, path);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s.gif", dir, name);
    write_gif(path, clip, C, Fr, Hi, Wi, scale, delay);
    snprintf(path, sizeof path, "%s/%s.png", dir, name);
    write_png_strip(path, clip, C, Fr, Hi, Wi, scale, gap);
    fprintf(manifest, "%s %d %d %d %d %d %d %d\n", name, C, Fr, Hi, Wi, scale, gap, delay);
}

static float* noise_clip(int C, int Fr, int Hi, int Wi, uint64_t seed, int specials) {
    size_t n = (size_t)C * Fr * Hi * Wi;
    float* clip = clip_alloc(C, Fr, Hi, Wi);
    for (size_t i = 0; i < n; i++) clip[i] = (float)((clipgen_splitmix64_(&seed) >> 40) / 8388608.0 - 1.0);
    if (specials) {  // the ends, out of range, and a NaN (a diverged sample still gives a picture)
        const float sp[6] = {-1.0f, 1.0f, 1.5f, -3.0f, NAN, 0.0f};
        for (int k = 0; k < 6; k++) clip[(k * 7919) % n] = sp[k];
    }
    return clip;
}

static int mode_images(const char* dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE* m = xfopen(path, "w");
    float* clip;
    int label;
    ClipGenerator g;
    clipgen_init(&g, 1, 4, 9, 11, 10, 3);
    clip = clip_alloc(1, 4, 9, 11);
    clipgen_clip(&g, 0, clip, &label);
    image_case(m, dir, "digits_grey", clip, 1, 4, 9, 11, 3, 2, 8);
    free(clip);
    clipgen_init(&g, 3, 6, 28, 28, 10, 3);
    clip = clip_alloc(3, 6, 28, 28);
    clipgen_clip(&g, 1, clip, &label);
    image_case(m, dir, "digits_rgb", clip, 3, 6, 28, 28, 4, 3, 12);
    free(clip);
    clip = noise_clip(1, 3, 10, 7, 1, 1);
    image_case(m, dir, "noise_grey_specials", clip, 1, 3, 10, 7, 2, 1, 5);
    free(clip);
    clip = noise_clip(3, 3, 10, 7, 2, 1);
    image_case(m, dir, "noise_rgb_specials", clip, 3, 3, 10, 7, 2, 0, 5);
    free(clip);
    clip = noise_clip(2, 2, 8, 8, 3, 0);
    image_case(m, dir, "two_channels", clip, 2, 2, 8, 8, 1, 4, 3);
    free(clip);
    // noise needs thousands of codes per frame: the LZW table fills and restarts
    clip = noise_clip(1, 2, 70, 90, 4, 0);
    image_case(m, dir, "lzw_table_fills_grey", clip, 1, 2, 70, 90, 1, 0, 10);
    free(clip);
    clip = noise_clip(3, 2, 101, 99, 5, 0);
    image_case(m, dir, "lzw_table_fills_rgb", clip, 3, 2, 101, 99, 1, 1, 10);
    free(clip);
    clip = noise_clip(1, 1, 1, 1, 6, 0);
    image_case(m, dir, "one_pixel", clip, 1, 1, 1, 1, 1, 0, 0);
    free(clip);
    fclose(m);
    printf("OK\n");
    return 0;
}

int main(int argc, char** argv) {
    if (argc >= 3 && strcmp(argv[1], "--open") == 0) return mode_open(argc, argv);
    if (argc == 4 && strcmp(argv[1], "--dump") == 0) return mode_dump(argv);
    if (argc == 3 && strcmp(argv[1], "--images") == 0) return mode_images(argv[2]);
    if (argc == 7 && strcmp(argv[1], "--gen") == 0) {
        ClipGenerator g;
        clipgen_init(&g, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), 1);
        printf("OK\n");
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--write-gif") == 0) {
        float clip[2 * 8 * 6];
        for (int i = 0; i < 2 * 8 * 6; i++) clip[i] = (float)(i % 5) / 2.0f - 1.0f;
        write_gif(argv[2], clip, 1, 2, 8, 6, 1, 10);
        printf("OK\n");
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--open FILE [SPLIT NVAL [C FR HI WI NC]] | --gen C FR HI WI NC | --dump FILE OUT | --images DIR | --write-gif PATH]\n", argv[0]);
        return 2;
    }
    snprintf(g_dir, sizeof g_dir, "%s/test_video_data.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) { fprintf(stderr, "cannot create a temp dir %s\n", g_dir); return 2; }
    test_generator();
    test_sources();
    rmdir(g_dir);
    return g_fail ? 1 : 0;
}
