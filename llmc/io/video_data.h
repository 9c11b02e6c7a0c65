/*
Video clips for train_dit (docs/design.md 9.1): a synthetic generator that needs no download, a
reader for users' own clips (the clip file of docs/formats.md, written by
scripts/clips_to_bin.py), and one batch source over both with the data-parallel split
built in. Header-only host code; compiles as C++ with g++ and with nvcc.

A clip is x0 [C, Fr, Hi, Wi] (channel, frame, row, column; row-major), values in
[-1, 1], with an integer label in [0, num_classes).

Moving digits (ClipGenerator). Clip `index` of generator `seed` is a pure function of
(seed, index), bit-identical in every build (all geometry is integer arithmetic, and each
value is one correctly rounded division). Class k in [0, NC), NC <= 10, is the digit k of
the 5x7 bitmap font clipgen_font, drawn bright on a dark background (-1):
  - geometry in units of 1/64 pixel (CLIPGEN_SUBPIXELS): a font pixel is a square of side
    S = max(64, min(Hi, Wi) * 64 / 14) units (at least 1 pixel; the 7-row glyph is about
    half of min(Hi, Wi) tall), the glyph a 5S x 7S box;
  - the box's top-left corner starts at (x0, y0), uniform over the positions that keep it
    inside the frame, [0, LX] x [0, LY] with LX = 64 Wi - 5S, LY = 64 Hi - 7S, and moves by
    (vx, vy) units per frame, bouncing off the walls: x(f) = tri(x0 + f vx, LX), tri(p, L)
    = p mod 2L folded back into [0, L]. So it never leaves the frame. Each speed is drawn
    in [b/2, 3b/2], b = max(64, min(Hi, Wi) * 64 / 16) (about min(Hi, Wi)/16 pixels per
    frame), capped at L/2 (at least 1 unit), with a random sign. With a speed <= L/2 the
    position changes within any 3 consecutive frames (the glyph moves in every clip of 3
    or more frames);
  - anti-aliased: a pixel's coverage is the exact area of it that lit font pixels cover,
    cov in [0, 64*64]; its value in channel c is (2n - N)/N with n = cov * level[c],
    N = 64*64*255: -1 on the background, -1 + 2 level[c]/255 where fully covered;
  - colour: level = 255 in every channel when C != 3 (C == 1 or any other C: the same
    intensity in every channel); for C == 3 a per-clip colour: level[c] = 128 + u(128)
    for each c, then one channel u(3) set to 255 (bright, saturated enough to tell apart);
  - random draws, in this order, from a splitmix64 stream seeded by (seed, index) (see
    clipgen_stream_): label = u(NC); the C == 3 colour; x0 = u(LX+1); y0 = u(LY+1);
    speed_x = b/2 + u(b+1) (then capped), sign_x = u(2); speed_y, sign_y likewise.
    u(n) is uniform in [0, n), unbiased (rejection).
clipgen_init FAILs on NC outside 1..10, C, Fr < 1, or a frame smaller than 8 rows x 6
columns (the 7x5 glyph needs a pixel of room on each axis to move).

Batch source (ClipSource), index -> one clip:
  - synthetic, split 0 (train): clip i is generator index i mod 2^63; split 1 (val):
    generator index 2^63 + (i mod 2^63): the top bit set, so the two never meet;
  - clip file with n_clips clips, split 0: the first n_train = n_clips - n_val clips;
    split 1: the last n_val (a fixed held-out set). For train, index i is position
    p = i mod n_train of epoch e = i / n_train, and reads file clip
    perm(p; shuffle_seed, e): a different permutation every epoch, computed on the fly
    (a 4-round Feistel network over the next power of 4, cycle-walked into [0, n_train);
    no table, any index in O(1)). Val reads its clips in file order, n_train + (i mod n_val).
    Each read is one fseek and one fread of the clip; nothing is loaded whole.
  - batches (clipsource_get_batch): the global batch of step s is clips s*global_B ..
    s*global_B + global_B - 1; rank r of dp reads rows [r*B, (r+1)*B), B = global_B/dp.
    So dp ranks together read exactly the dp=1 batch, whatever dp is.
clipsource_source_index(s, i) says which generator index or file clip index i reads.

File validation (clipsource_init_file): magic, version, reserved words zero, sizes > 0,
encoding 0 or 1, the file size equal to what the header implies, then one sequential pass
over this split's clips: every label in [0, NC) and every float32 value finite and in
[-1, 1]. Errors name the file, the clip and the problem; every read checks the label again.
*/
#pragma once
#include "../core/common.h"
#include <sys/stat.h>
#include <sys/types.h>

#define CLIPGEN_SUBPIXELS 64        // geometry unit: 1/64 pixel
#define CLIPGEN_MAX_CLASSES 10
#define CLIPGEN_MIN_HEIGHT 8
#define CLIPGEN_MIN_WIDTH 6
#define CLIPFILE_MAGIC 20261125
#define CLIPFILE_VERSION 1
#define CLIPFILE_HEADER_INTS 256
#define CLIPFILE_HEADER_BYTES (CLIPFILE_HEADER_INTS * 4)
#define CLIPFILE_ENC_UINT8 0
#define CLIPFILE_ENC_FLOAT32 1
#define CLIPSOURCE_VAL_BIT (1ull << 63)

// The digits 0-9, 7 rows of 5 bits each, bit 4 = leftmost column.
static const unsigned char clipgen_font[10][7] = {
    {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E},  // 0
    {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E},  // 1
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F},  // 2
    {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E},  // 3
    {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02},  // 4
    {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E},  // 5
    {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E},  // 6
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},  // 7
    {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E},  // 8
    {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C},  // 9
};
static inline int clipgen_font_bit(int digit, int row, int col) { return (clipgen_font[digit][row] >> (4 - col)) & 1; }

typedef struct { int C, Fr, Hi, Wi, num_classes; uint64_t seed; } ClipGenerator;

// One clip's random choices, in geometry units (1/64 pixel).
typedef struct {
    int label;
    int level[3];          // foreground level per channel (C == 3), 0..255
    int64_t x0, y0, vx, vy;
} ClipMotion;

// ----------------------------------------------------------------------------
// random stream

static inline uint64_t clipgen_splitmix64_(uint64_t* s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// the stream of clip `index`: the index is mixed in after the seed, so nearby indices
// and nearby seeds both give unrelated streams
static inline uint64_t clipgen_stream_(uint64_t seed, uint64_t index) {
    uint64_t s = seed;
    uint64_t a = clipgen_splitmix64_(&s);
    uint64_t t = a ^ (index * 0xD1B54A32D192ED03ull);
    return clipgen_splitmix64_(&t);
}

// uniform in [0, n), n > 0, unbiased
static inline uint64_t clipgen_below_(uint64_t* s, uint64_t n) {
    uint64_t threshold = (0ull - n) % n;  // 2^64 mod n: reject the first values
    uint64_t r;
    do { r = clipgen_splitmix64_(s); } while (r < threshold);
    return r % n;
}

// ----------------------------------------------------------------------------
// generator

static inline int clipgen_min_side_(const ClipGenerator* g) { return g->Hi < g->Wi ? g->Hi : g->Wi; }

// side of one font pixel, in 1/64 pixel
static inline int64_t clipgen_cell(const ClipGenerator* g) {
    int64_t s = (int64_t)clipgen_min_side_(g) * CLIPGEN_SUBPIXELS / 14;
    return s > CLIPGEN_SUBPIXELS ? s : CLIPGEN_SUBPIXELS;
}

// the room the glyph's corner has on each axis, in 1/64 pixel
static inline int64_t clipgen_room_x_(const ClipGenerator* g) { return (int64_t)g->Wi * CLIPGEN_SUBPIXELS - 5 * clipgen_cell(g); }
static inline int64_t clipgen_room_y_(const ClipGenerator* g) { return (int64_t)g->Hi * CLIPGEN_SUBPIXELS - 7 * clipgen_cell(g); }

static inline void clipgen_init(ClipGenerator* g, int C, int Fr, int Hi, int Wi, int num_classes, uint64_t seed) {
    if (num_classes < 1 || num_classes > CLIPGEN_MAX_CLASSES)
        FAIL("clip generator: %d classes; the moving-digits generator has 1 to %d (one digit per class)",
             num_classes, CLIPGEN_MAX_CLASSES);
    if (C < 1 || Fr < 1) FAIL("clip generator: C = %d, Fr = %d; both must be >= 1", C, Fr);
    if (Hi < CLIPGEN_MIN_HEIGHT || Wi < CLIPGEN_MIN_WIDTH)
        FAIL("clip generator: a %dx%d frame (Hi x Wi) is too small for the 7x5-pixel digit glyph to move; "
             "need Hi >= %d and Wi >= %d", Hi, Wi, CLIPGEN_MIN_HEIGHT, CLIPGEN_MIN_WIDTH);
    if ((int64_t)C * Fr * Hi * Wi > INT32_MAX) FAIL("clip generator: a clip of %dx%dx%dx%d values is too large", C, Fr, Hi, Wi);
    g->C = C; g->Fr = Fr; g->Hi = Hi; g->Wi = Wi; g->num_classes = num_classes; g->seed = seed;
}

// speed on one axis: drawn around b, capped at half the room so that the glyph moves
static inline int64_t clipgen_speed_(uint64_t* s, int64_t b, int64_t room) {
    int64_t v = b / 2 + (int64_t)clipgen_below_(s, (uint64_t)b + 1);
    int64_t cap = room / 2 > 1 ? room / 2 : 1;
    if (v > cap) v = cap;
    return clipgen_below_(s, 2) ? -v : v;
}

static inline ClipMotion clipgen_motion(const ClipGenerator* g, uint64_t index) {
    ClipMotion m;
    uint64_t s = clipgen_stream_(g->seed, index);
    m.label = (int)clipgen_below_(&s, (uint64_t)g->num_classes);
    for (int c = 0; c < 3; c++) m.level[c] = 255;
    if (g->C == 3) {
        for (int c = 0; c < 3; c++) m.level[c] = 128 + (int)clipgen_below_(&s, 128);
        m.level[clipgen_below_(&s, 3)] = 255;
    }
    int64_t rx = clipgen_room_x_(g), ry = clipgen_room_y_(g);
    m.x0 = (int64_t)clipgen_below_(&s, (uint64_t)rx + 1);
    m.y0 = (int64_t)clipgen_below_(&s, (uint64_t)ry + 1);
    int64_t b = (int64_t)clipgen_min_side_(g) * CLIPGEN_SUBPIXELS / 16;
    if (b < CLIPGEN_SUBPIXELS) b = CLIPGEN_SUBPIXELS;
    m.vx = clipgen_speed_(&s, b, rx);
    m.vy = clipgen_speed_(&s, b, ry);
    return m;
}

// p folded into [0, L] like a ball bouncing between walls at 0 and L (L > 0)
static inline int64_t clipgen_bounce_(int64_t p, int64_t L) {
    int64_t m = p % (2 * L);
    if (m < 0) m += 2 * L;
    return m <= L ? m : 2 * L - m;
}

// the glyph's top-left corner in frame f, in 1/64 pixel
static inline void clipgen_position(const ClipGenerator* g, const ClipMotion* m, int f, int64_t* x, int64_t* y) {
    *x = clipgen_bounce_(m->x0 + (int64_t)f * m->vx, clipgen_room_x_(g));
    *y = clipgen_bounce_(m->y0 + (int64_t)f * m->vy, clipgen_room_y_(g));
}

// length of [a0, a1) n [b0, b1)
static inline int64_t clipgen_overlap_(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
    int64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

// the glyph at (gx, gy) into frame f of every channel; the frame is already background
static inline void clipgen_draw_frame_(const ClipGenerator* g, const ClipMotion* m, int f, int64_t gx, int64_t gy, float* clip) {
    const int64_t Q = CLIPGEN_SUBPIXELS, S = clipgen_cell(g);
    const int64_t N = Q * Q * 255;
    const int digit = m->label;
    // the pixels the glyph's box touches
    int px0 = (int)(gx / Q), px1 = (int)((gx + 5 * S + Q - 1) / Q);
    int py0 = (int)(gy / Q), py1 = (int)((gy + 7 * S + Q - 1) / Q);
    if (px1 > g->Wi) px1 = g->Wi;
    if (py1 > g->Hi) py1 = g->Hi;
    for (int py = py0; py < py1; py++) {
        int64_t oy[7];
        for (int r = 0; r < 7; r++) oy[r] = clipgen_overlap_(py * Q, (py + 1) * Q, gy + r * S, gy + (r + 1) * S);
        for (int px = px0; px < px1; px++) {
            int64_t cov = 0;
            for (int c = 0; c < 5; c++) {
                int64_t ox = clipgen_overlap_(px * Q, (px + 1) * Q, gx + c * S, gx + (c + 1) * S);
                if (ox == 0) continue;
                for (int r = 0; r < 7; r++) cov += clipgen_font_bit(digit, r, c) * ox * oy[r];
            }
            if (cov == 0) continue;
            for (int ch = 0; ch < g->C; ch++) {
                int64_t n = cov * (g->C == 3 ? m->level[ch] : 255);
                clip[(((size_t)ch * g->Fr + f) * g->Hi + py) * g->Wi + px] = (float)(2 * n - N) / (float)N;
            }
        }
    }
}

static inline void clipgen_clip(const ClipGenerator* g, uint64_t index, float* clip, int* label) {
    ClipMotion m = clipgen_motion(g, index);
    size_t n = (size_t)g->C * g->Fr * g->Hi * g->Wi;
    for (size_t i = 0; i < n; i++) clip[i] = -1.0f;
    for (int f = 0; f < g->Fr; f++) {
        int64_t x, y;
        clipgen_position(g, &m, f, &x, &y);
        clipgen_draw_frame_(g, &m, f, x, y, clip);
    }
    *label = m.label;
}

// ----------------------------------------------------------------------------
// batch source: the generator or a clip file

enum { CLIPSOURCE_SYNTHETIC = 0, CLIPSOURCE_FILE = 1 };

typedef struct {
    int kind;                   // CLIPSOURCE_SYNTHETIC or CLIPSOURCE_FILE
    int split;                  // 0 train, 1 val
    int C, Fr, Hi, Wi, num_classes;
    size_t clip_values;         // C*Fr*Hi*Wi
    uint64_t num_clips;         // clips of this split (2^63 for the generator)
    ClipGenerator gen;          // synthetic
    // clip file
    char* path;
    FILE* file;
    int encoding;               // CLIPFILE_ENC_UINT8 or CLIPFILE_ENC_FLOAT32
    uint64_t file_clips;        // clips in the whole file
    uint64_t first;             // file clip index of this split's first clip
    uint64_t shuffle_seed;
    size_t record_bytes;        // 4 (label) + clip_values * value bytes
    unsigned char* record;      // one record, read buffer
} ClipSource;

static inline void clipsource_init_synthetic(ClipSource* s, int C, int Fr, int Hi, int Wi, int num_classes, uint64_t seed, int split) {
    if (split != 0 && split != 1) FAIL("clip source: split %d; 0 (train) or 1 (val)", split);
    memset(s, 0, sizeof(*s));
    clipgen_init(&s->gen, C, Fr, Hi, Wi, num_classes, seed);
    s->kind = CLIPSOURCE_SYNTHETIC;
    s->split = split;
    s->C = C; s->Fr = Fr; s->Hi = Hi; s->Wi = Wi; s->num_classes = num_classes;
    s->clip_values = (size_t)C * Fr * Hi * Wi;
    s->num_clips = CLIPSOURCE_VAL_BIT;
}

// the Feistel round function: 64 well-mixed bits of (key, round, half)
static inline uint64_t clipsource_round_(uint64_t key, int round, uint64_t half) {
    uint64_t s = key ^ ((uint64_t)round * 0x9E3779B97F4A7C15ull) ^ (half * 0xD6E8FEB86659FD93ull);
    return clipgen_splitmix64_(&s);
}

// a bijection of [0, n) chosen by key: a balanced 4-round Feistel network on 2h bits
// (4^h >= n), cycle-walked until the value lands in [0, n)
static inline uint64_t clipsource_permute_(uint64_t i, uint64_t n, uint64_t key) {
    int h = 1;
    while (h < 31 && (1ull << (2 * h)) < n) h++;
    const uint64_t mask = (1ull << h) - 1;
    do {
        uint64_t L = i >> h, R = i & mask;
        for (int r = 0; r < 4; r++) {
            uint64_t t = L ^ (clipsource_round_(key, r, R) & mask);
            L = R; R = t;
        }
        i = (L << h) | R;
    } while (i >= n);
    return i;
}

// the generator index (synthetic) or file clip index (file) that source index i reads
static inline uint64_t clipsource_source_index(const ClipSource* s, uint64_t i) {
    if (s->kind == CLIPSOURCE_SYNTHETIC) {
        uint64_t j = i & (CLIPSOURCE_VAL_BIT - 1);
        return s->split ? (CLIPSOURCE_VAL_BIT | j) : j;
    }
    uint64_t pos = i % s->num_clips;
    if (s->split == 1) return s->first + pos;
    uint64_t epoch = i / s->num_clips;
    uint64_t e = epoch;
    uint64_t key = clipgen_stream_(s->shuffle_seed, clipgen_splitmix64_(&e));
    return s->first + clipsource_permute_(pos, s->num_clips, key);
}

static inline void clipsource_fail_value_(const ClipSource* s, uint64_t clip, size_t k, float v) {
    FAIL("clip file '%s': clip %llu, value %zu is %g; float32 clips must be finite and in [-1, 1] "
         "(hint: scripts/clips_to_bin.py scales the input)", s->path, (unsigned long long)clip, k, (double)v);
}

// reads file clip `clip` into s->record and checks it; the values are left encoded
static inline void clipsource_read_record_(ClipSource* s, uint64_t clip) {
    off_t at = (off_t)CLIPFILE_HEADER_BYTES + (off_t)(clip * s->record_bytes);
    if (fseeko(s->file, at, SEEK_SET) != 0)
        FAIL("clip file '%s': cannot seek to clip %llu: %s", s->path, (unsigned long long)clip, strerror(errno));
    if (fread(s->record, 1, s->record_bytes, s->file) != s->record_bytes)
        FAIL("clip file '%s': clip %llu: file ended early or read failed (was the file changed while training?)",
             s->path, (unsigned long long)clip);
    int32_t label;
    memcpy(&label, s->record, 4);
    if (label < 0 || label >= s->num_classes)
        FAIL("clip file '%s': clip %llu has label %d, outside [0, %d) (num_classes in the header)",
             s->path, (unsigned long long)clip, (int)label, s->num_classes);
}

// the values of s->record into clip
static inline void clipsource_decode_(const ClipSource* s, uint64_t clip_index, float* clip) {
    const unsigned char* v = s->record + 4;
    if (s->encoding == CLIPFILE_ENC_UINT8) {
        // byte/127.5 - 1, as one correctly rounded division of exact integers
        for (size_t k = 0; k < s->clip_values; k++) clip[k] = (float)(2 * (int)v[k] - 255) / 255.0f;
        return;
    }
    memcpy(clip, v, s->clip_values * 4);
    for (size_t k = 0; k < s->clip_values; k++)
        if (!(clip[k] >= -1.0f && clip[k] <= 1.0f)) clipsource_fail_value_(s, clip_index, k, clip[k]);
}

// reads and checks the header, sets the shape, encoding and record size, and checks the
// file's size against them
static inline void clipsource_read_header_(ClipSource* s) {
    const char* path = s->path;
    int32_t h[CLIPFILE_HEADER_INTS];
    if (fread(h, 4, CLIPFILE_HEADER_INTS, s->file) != CLIPFILE_HEADER_INTS)
        FAIL("clip file '%s': shorter than its %d-byte header (truncated, or not a clip file)", path, CLIPFILE_HEADER_BYTES);
    if (h[0] != CLIPFILE_MAGIC)
        FAIL("clip file '%s': bad magic %d, expected %d (not a clip file; scripts/clips_to_bin.py writes them)",
             path, (int)h[0], CLIPFILE_MAGIC);
    if (h[1] != CLIPFILE_VERSION) FAIL("clip file '%s': unsupported version %d (this reader knows %d)", path, (int)h[1], CLIPFILE_VERSION);
    for (int i = 9; i < CLIPFILE_HEADER_INTS; i++)
        if (h[i] != 0) FAIL("clip file '%s': reserved header word %d is %d, must be 0 (a newer or damaged file)", path, i, (int)h[i]);
    const char* names[6] = {"number of clips", "C", "Fr", "Hi", "Wi", "num_classes"};
    for (int i = 0; i < 6; i++)
        if (h[2 + i] <= 0) FAIL("clip file '%s': header %s = %d, must be > 0", path, names[i], (int)h[2 + i]);
    if (h[8] != CLIPFILE_ENC_UINT8 && h[8] != CLIPFILE_ENC_FLOAT32)
        FAIL("clip file '%s': value encoding %d; 0 (uint8) or 1 (float32)", path, (int)h[8]);
    s->file_clips = (uint64_t)h[2];
    s->C = h[3]; s->Fr = h[4]; s->Hi = h[5]; s->Wi = h[6]; s->num_classes = h[7]; s->encoding = h[8];
    // the product in double first: four 31-bit factors can wrap even 64 bits
    if ((double)s->C * s->Fr * s->Hi * s->Wi > (double)INT32_MAX)
        FAIL("clip file '%s': a clip of %dx%dx%dx%d values is too large", path, s->C, s->Fr, s->Hi, s->Wi);
    s->clip_values = (size_t)s->C * s->Fr * s->Hi * s->Wi;
    s->record_bytes = 4 + s->clip_values * (s->encoding == CLIPFILE_ENC_UINT8 ? 1 : 4);
    struct stat st;
    if (fstat(fileno(s->file), &st) != 0) FAIL("clip file '%s': cannot stat: %s", path, strerror(errno));
    if ((double)s->file_clips * (double)s->record_bytes > 1e18)
        FAIL("clip file '%s': its header's %llu clips of %dx%dx%dx%d values would be %.3g bytes: not a clip file", path,
             (unsigned long long)s->file_clips, s->C, s->Fr, s->Hi, s->Wi, (double)s->file_clips * (double)s->record_bytes);
    uint64_t expected = (uint64_t)CLIPFILE_HEADER_BYTES + s->file_clips * (uint64_t)s->record_bytes;
    if ((uint64_t)st.st_size != expected)
        FAIL("clip file '%s': %llu bytes, but its header (%llu clips of %dx%dx%dx%d %s values) implies %llu: %s",
             path, (unsigned long long)st.st_size, (unsigned long long)s->file_clips, s->C, s->Fr, s->Hi, s->Wi,
             s->encoding == CLIPFILE_ENC_UINT8 ? "uint8" : "float32", (unsigned long long)expected,
             (uint64_t)st.st_size < expected ? "truncated" : "trailing bytes");
}

static inline void clipsource_init_file(ClipSource* s, const char* path, int split, int n_val, uint64_t shuffle_seed) {
    if (split != 0 && split != 1) FAIL("clip source: split %d; 0 (train) or 1 (val)", split);
    memset(s, 0, sizeof(*s));
    s->kind = CLIPSOURCE_FILE;
    s->split = split;
    s->shuffle_seed = shuffle_seed;
    s->path = (char*)xmalloc(strlen(path) + 1);
    strcpy(s->path, path);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        FAIL("clip file '%s' is a directory (scripts/clips_to_bin.py turns a folder of clips into one clip file)", path);
    s->file = xinput_fopen(path, "clip file");  // a regular file; a FIFO is refused, not waited on
    clipsource_read_header_(s);
    // this split's clips: val is the file's last n_val, train the rest
    if (n_val < 0 || (uint64_t)n_val > s->file_clips)
        FAIL("clip file '%s': %d validation clips requested, the file has %llu", path, n_val, (unsigned long long)s->file_clips);
    if (split == 1 && n_val == 0) FAIL("clip file '%s': a validation source needs n_val >= 1 held-out clips", path);
    if (split == 0 && (uint64_t)n_val == s->file_clips)
        FAIL("clip file '%s': all %d clips are held out for validation; none is left to train on", path, n_val);
    uint64_t n_train = s->file_clips - (uint64_t)n_val;
    s->first = split ? n_train : 0;
    s->num_clips = split ? (uint64_t)n_val : n_train;
    s->record = (unsigned char*)xmalloc(s->record_bytes);
    // one sequential pass over every label and value of this split, so bad data fails now, not hours in
    float* values = s->encoding == CLIPFILE_ENC_FLOAT32 ? (float*)xmalloc(s->clip_values * 4) : NULL;
    for (uint64_t k = 0; k < s->num_clips; k++) {
        clipsource_read_record_(s, s->first + k);
        if (values) clipsource_decode_(s, s->first + k, values);
    }
    free(values);
}

static inline void clipsource_get(ClipSource* s, uint64_t index, float* clip, int* label) {
    uint64_t src = clipsource_source_index(s, index);
    if (s->kind == CLIPSOURCE_SYNTHETIC) { clipgen_clip(&s->gen, src, clip, label); return; }
    clipsource_read_record_(s, src);
    int32_t l;
    memcpy(&l, s->record, 4);
    *label = (int)l;
    clipsource_decode_(s, src, clip);
}

// rank's rows of the global batch of step `step`: clips [B*rank, B*(rank+1)) of
// step*global_B .. step*global_B + global_B - 1, B = global_B / dp
static inline void clipsource_get_batch(ClipSource* s, uint64_t step, int global_B, int rank, int dp, float* clips, int* labels) {
    if (dp < 1 || rank < 0 || rank >= dp || global_B < 1 || global_B % dp != 0)
        FAIL("clip source: global batch %d on rank %d of %d; needs dp >= 1, 0 <= rank < dp and a batch divisible by dp",
             global_B, rank, dp);
    int B = global_B / dp;
    uint64_t first = step * (uint64_t)global_B + (uint64_t)rank * B;
    for (int b = 0; b < B; b++) clipsource_get(s, first + b, clips + (size_t)b * s->clip_values, labels + b);
}

// a clear error when the clips do not have the model's shape
static inline void clipsource_check_shape(const ClipSource* s, int C, int Fr, int Hi, int Wi, int num_classes) {
    if (s->C == C && s->Fr == Fr && s->Hi == Hi && s->Wi == Wi && s->num_classes == num_classes) return;
    char what[600];
    if (s->kind == CLIPSOURCE_FILE) snprintf(what, sizeof what, "clip file '%s'", s->path);
    else snprintf(what, sizeof what, "the clip generator");
    FAIL("%s has clips of C=%d Fr=%d Hi=%d Wi=%d with %d classes, but the model expects C=%d Fr=%d Hi=%d Wi=%d "
         "with %d classes (set the model's shape to the data's, or convert the clips again with scripts/clips_to_bin.py)",
         what, s->C, s->Fr, s->Hi, s->Wi, s->num_classes, C, Fr, Hi, Wi, num_classes);
}

// A run's training and validation sources: the moving-digits generator (data "synthetic"),
// or the clip file `data` with its last n_val clips held out, checked against the model's shape.
static inline void clipsource_open(ClipSource* train, ClipSource* val, const char* data, int C, int Fr, int Hi, int Wi,
                                   int num_classes, int n_val, uint64_t seed) {
    if (strcmp(data, "synthetic") == 0) {
        clipsource_init_synthetic(train, C, Fr, Hi, Wi, num_classes, seed, 0);
        clipsource_init_synthetic(val, C, Fr, Hi, Wi, num_classes, seed, 1);
    } else {
        clipsource_init_file(train, data, 0, n_val, seed);
        clipsource_init_file(val, data, 1, n_val, seed);
        clipsource_check_shape(train, C, Fr, Hi, Wi, num_classes);
    }
}

static inline void clipsource_free(ClipSource* s) {
    if (s->file) fclose(s->file);
    free(s->path);
    free(s->record);
    memset(s, 0, sizeof(*s));
}
