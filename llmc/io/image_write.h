/*
Pictures of clips for a person to look at, with no image library: an animated GIF and a
PNG strip of the frames. train_dit writes its samples with them. Header-only host code;
compiles as C++ with g++ and with nvcc.

Input: a clip [C, Fr, Hi, Wi] in [-1, 1] (train_dit's x0 layout, docs/design.md 9.1). A value v
becomes the 8-bit level q = floor((v + 1) * 127.5 + 0.5), clamped to [0, 255]; NaN
becomes 0, so a diverged sample still gives a picture. C == 3 is RGB; any other C shows
channel 0 in grey. Every pixel is repeated scale x scale times (nearest neighbour) so
that small clips are visible.

write_gif: GIF89a, one frame per clip frame, delay_cs hundredths of a second each,
looping forever (NETSCAPE2.0 extension), one global 256-colour table:
  - grey (C != 3): entry i = (i, i, i), a pixel's index is its level q: exact;
  - C == 3: entries 0..215 the 6x6x6 cube, r*36 + g*6 + b at levels 51k, then 216..255
    forty greys round(255 (j+1) / 41); each pixel takes the nearest entry (squared RGB
    distance; the cube on a tie), so a channel is off by at most 44 levels (25.5 sqrt 3)
    and greys are off by at most 3.
Image data is LZW-compressed as the GIF spec says: 8-bit minimum code size, codes from 9
to 12 bits, a clear code whenever the 4096-entry table is full (the rule of giflib's
encoder: the table is reset when the next code would be 4095).

write_png_strip: one PNG with the Fr frames side by side, `gap` pixels apart (the gap is
white), 8-bit grey (C != 3) or 8-bit RGB (C == 3). The zlib stream holds stored
(uncompressed) deflate blocks: simple, and the pictures are small; CRC-32 per chunk and
Adler-32 over the image as the formats require.

Both write to PATH.tmp and rename it to PATH, so a reader never sees half a file. A write
that fails (full disk, unwritable directory) leaves no file behind: try_write_gif and
try_write_png_strip return why (NULL when written), write_gif and write_png_strip stop
with it. Bad arguments stop either way: a trainer checks them at start (image_clip_fits).
*/
#pragma once
#include "../core/common.h"
#include "../core/logger.h"  // mkdir_p_try

// ----------------------------------------------------------------------------
// pixels

static inline int image_level(float v) {
    if (!(v > -1.0f)) return 0;  // also NaN
    if (v >= 1.0f) return 255;
    int q = (int)((v + 1.0f) * 127.5f + 0.5f);
    return q > 255 ? 255 : q;
}

static inline int image_grey_palette_level_(int j) { return (255 * (j + 1) + 20) / 41; }  // round(255 (j+1) / 41)

// index into the C == 3 palette nearest to (r, g, b)
static inline int image_nearest_colour(int r, int g, int b) {
    int kr = (r + 25) / 51, kg = (g + 25) / 51, kb = (b + 25) / 51;  // nearest cube level per channel
    int dr = r - 51 * kr, dg = g - 51 * kg, db = b - 51 * kb;
    int best = kr * 36 + kg * 6 + kb, best_d = dr * dr + dg * dg + db * db;
    for (int j = 0; j < 40; j++) {
        int l = image_grey_palette_level_(j);
        int d = (r - l) * (r - l) + (g - l) * (g - l) + (b - l) * (b - l);
        if (d < best_d) { best_d = d; best = 216 + j; }
    }
    return best;
}

static inline void image_palette_(int C, unsigned char palette[768]) {
    for (int i = 0; i < 256; i++) {
        int r = i, g = i, b = i;
        if (C == 3 && i < 216) { r = 51 * (i / 36); g = 51 * (i / 6 % 6); b = 51 * (i % 6); }
        else if (C == 3) { r = g = b = image_grey_palette_level_(i - 216); }
        palette[3 * i] = (unsigned char)r; palette[3 * i + 1] = (unsigned char)g; palette[3 * i + 2] = (unsigned char)b;
    }
}

static inline void image_check_args_(const char* what, const char* path, int C, int Fr, int Hi, int Wi, int scale) {
    if (C < 1 || Fr < 1 || Hi < 1 || Wi < 1 || scale < 1)
        FAIL("%s '%s': bad clip shape C=%d Fr=%d Hi=%d Wi=%d or scale %d (all must be >= 1)", what, path, C, Fr, Hi, Wi, scale);
}

// ----------------------------------------------------------------------------
// files: PATH.tmp, then rename

// The first failure of a write (open, write, flush, close, rename) is kept in err and the
// rest of the file skipped; closing removes the temporary file and returns err (NULL when
// the image is whole under its name). A trainer turns that into a warning: a sample that
// cannot be written never ends a run (the try_ forms); tools stop on it (write_gif, write_png_strip).
typedef struct { FILE* f; char* path; char* tmp; char err[600]; } ImageFile;

static inline ImageFile image_open_(const char* path) {
    ImageFile o;
    o.err[0] = 0;
    o.path = (char*)xmalloc(strlen(path) + 1);
    strcpy(o.path, path);
    o.tmp = (char*)xmalloc(strlen(path) + 5);
    sprintf(o.tmp, "%s.tmp", path);
    char why[sizeof(o.err)];
    o.f = output_fopen_try(o.tmp, why, sizeof(why));  // never a blocking open (a FIFO named like the .tmp)
    if (!o.f) snprintf(o.err, sizeof(o.err), "%s", why);
    return o;
}

static inline void image_put_(ImageFile* o, const void* p, size_t n) {
    if (o->err[0] || !n) return;
    if (fwrite(p, 1, n, o->f) != n) snprintf(o->err, sizeof(o->err), "writing '%s' failed: %s", o->tmp, strerror(errno));
}

static inline const char* image_close_(ImageFile* o) {
    static char why[600];
    if (o->f) {
        if (!o->err[0] && (fflush(o->f) != 0 || ferror(o->f)))
            snprintf(o->err, sizeof(o->err), "writing '%s' failed: %s", o->tmp, strerror(errno));
        if (fclose(o->f) != 0 && !o->err[0])
            snprintf(o->err, sizeof(o->err), "closing '%s' failed: %s", o->tmp, strerror(errno));
        if (!o->err[0] && rename(o->tmp, o->path) != 0)
            snprintf(o->err, sizeof(o->err), "cannot rename '%s' to '%s': %s", o->tmp, o->path, strerror(errno));
        if (o->err[0]) remove(o->tmp);  // nothing half-written is left behind
    }
    snprintf(why, sizeof(why), "%s", o->err);
    free(o->path); free(o->tmp);
    return why[0] ? why : NULL;
}

// ----------------------------------------------------------------------------
// GIF

#define GIF_MAX_CODES 4096

typedef struct {
    unsigned char* out;    // packed codes
    size_t n;              // bytes in out
    uint32_t bits;         // pending bits, LSB first
    int nbits;
} GifBits;

static inline void gif_emit_(GifBits* w, int code, int width) {
    w->bits |= (uint32_t)code << w->nbits;
    w->nbits += width;
    while (w->nbits >= 8) { w->out[w->n++] = (unsigned char)(w->bits & 0xFF); w->bits >>= 8; w->nbits -= 8; }
}

// LZW codes of n palette indices into w (8-bit minimum code size). child[code*256 + k]
// is the code of string(code)+k, 0 when absent (no string has code 0 as its extension)
static inline void gif_lzw_(const unsigned char* idx, size_t n, uint16_t* child, GifBits* w) {
    const int clear = 256, eoi = 257;
    int width = 9, next = 258;
    memset(child, 0, sizeof(uint16_t) * GIF_MAX_CODES * 256);
    gif_emit_(w, clear, width);
    int cur = idx[0];
    for (size_t i = 1; i < n; i++) {
        int k = idx[i];
        uint16_t c = child[cur * 256 + k];
        if (c) { cur = c; continue; }
        gif_emit_(w, cur, width);
        if (next >= GIF_MAX_CODES - 1) {
            // table full: start over, with a clear code at the current width
            gif_emit_(w, clear, width);
            memset(child, 0, sizeof(uint16_t) * GIF_MAX_CODES * 256);
            width = 9; next = 258;
        } else {
            child[cur * 256 + k] = (uint16_t)next;
            // the decoder, one entry behind, reads the next code with one more bit from here
            if (next >= (1 << width) && width < 12) width++;
            next++;
        }
        cur = k;
    }
    gif_emit_(w, cur, width);
    // the decoder adds an entry for this last code too, and may widen before the end code
    if (next >= (1 << width) && width < 12) width++;
    gif_emit_(w, eoi, width);
    if (w->nbits > 0) { w->out[w->n++] = (unsigned char)(w->bits & 0xFF); w->bits = 0; w->nbits = 0; }
}

static inline void gif_u16_(ImageFile* o, int v) { unsigned char b[2] = {(unsigned char)(v & 0xFF), (unsigned char)(v >> 8)}; image_put_(o, b, 2); }

static inline const char* try_write_gif(const char* path, const float* clip, int C, int Fr, int Hi, int Wi, int scale,
                                        int delay_cs) {
    image_check_args_("GIF", path, C, Fr, Hi, Wi, scale);
    if ((int64_t)Wi * scale > 65535 || (int64_t)Hi * scale > 65535)
        FAIL("GIF '%s': %dx%d pixels after scale %d; a GIF holds at most 65535 per side", path, Hi * scale, Wi * scale, scale);
    if (delay_cs < 0 || delay_cs > 65535) FAIL("GIF '%s': frame delay %d centiseconds, must be in [0, 65535]", path, delay_cs);
    const int W = Wi * scale, H = Hi * scale;
    const size_t npix = (size_t)W * H;
    unsigned char* idx = (unsigned char*)xmalloc(npix);
    uint16_t* child = (uint16_t*)xmalloc(sizeof(uint16_t) * GIF_MAX_CODES * 256);
    GifBits w;
    w.out = (unsigned char*)xmalloc(npix * 2 + 16);  // at most 12 bits per pixel, plus clear codes
    unsigned char palette[768];
    image_palette_(C, palette);

    ImageFile o = image_open_(path);
    image_put_(&o, "GIF89a", 6);
    gif_u16_(&o, W); gif_u16_(&o, H);
    const unsigned char screen[3] = {0xF7, 0, 0};  // global table of 2^(7+1) colours, 8-bit colour resolution
    image_put_(&o, screen, 3);
    image_put_(&o, palette, 768);
    const unsigned char loop[19] = {0x21, 0xFF, 11, 'N', 'E', 'T', 'S', 'C', 'A', 'P', 'E', '2', '.', '0', 3, 1, 0, 0, 0};
    image_put_(&o, loop, 19);  // repeat forever
    const size_t plane = (size_t)Fr * Hi * Wi;
    for (int f = 0; f < Fr; f++) {
        for (int y = 0; y < Hi; y++) {
            for (int x = 0; x < Wi; x++) {
                size_t at = ((size_t)f * Hi + y) * Wi + x;
                int q = image_level(clip[at]);
                if (C == 3) q = image_nearest_colour(q, image_level(clip[plane + at]), image_level(clip[2 * plane + at]));
                for (int dy = 0; dy < scale; dy++)
                    memset(idx + (size_t)(y * scale + dy) * W + (size_t)x * scale, q, scale);
            }
        }
        // graphic control: no disposal, delay, no transparency; then the image descriptor
        const unsigned char gce[4] = {0x21, 0xF9, 4, 0x04};
        image_put_(&o, gce, 4);
        gif_u16_(&o, delay_cs);
        const unsigned char gce_end[3] = {0, 0, 0x2C};
        image_put_(&o, gce_end, 3);
        gif_u16_(&o, 0); gif_u16_(&o, 0); gif_u16_(&o, W); gif_u16_(&o, H);
        const unsigned char desc_end[2] = {0, 8};  // no local table; LZW minimum code size 8
        image_put_(&o, desc_end, 2);
        w.n = 0; w.bits = 0; w.nbits = 0;
        gif_lzw_(idx, npix, child, &w);
        for (size_t at = 0; at < w.n; at += 255) {  // sub-blocks of at most 255 bytes
            unsigned char len = (unsigned char)(w.n - at < 255 ? w.n - at : 255);
            image_put_(&o, &len, 1);
            image_put_(&o, w.out + at, len);
        }
        const unsigned char block_end = 0;
        image_put_(&o, &block_end, 1);
    }
    const unsigned char trailer = 0x3B;
    image_put_(&o, &trailer, 1);
    free(idx); free(child); free(w.out);
    return image_close_(&o);
}

static inline void write_gif(const char* path, const float* clip, int C, int Fr, int Hi, int Wi, int scale, int delay_cs) {
    const char* why = try_write_gif(path, clip, C, Fr, Hi, Wi, scale, delay_cs);
    if (why) FAIL("%s", why);
}

// ----------------------------------------------------------------------------
// PNG

static inline uint32_t png_crc_(uint32_t crc, const unsigned char* p, size_t n) {
    static uint32_t table[256];
    static int have_table = 0;
    if (!have_table) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        have_table = 1;
    }
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return crc;
}

static inline void png_be32_(unsigned char* p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

// one chunk: length, type, data, CRC-32 of type and data
static inline void png_chunk_(ImageFile* o, const char* type, const unsigned char* data, size_t n) {
    unsigned char b[4];
    png_be32_(b, (uint32_t)n);
    image_put_(o, b, 4);
    image_put_(o, type, 4);
    image_put_(o, data, n);
    uint32_t crc = png_crc_(0xFFFFFFFFu, (const unsigned char*)type, 4);
    crc = png_crc_(crc, data, n) ^ 0xFFFFFFFFu;
    png_be32_(b, crc);
    image_put_(o, b, 4);
}

// zlib stream of raw: header, stored deflate blocks of at most 65535 bytes, Adler-32
static inline size_t png_zlib_stored_(const unsigned char* raw, size_t n, unsigned char* z) {
    size_t k = 0;
    z[k++] = 0x78; z[k++] = 0x01;  // deflate, 32K window, no dictionary, check bits
    size_t at = 0;
    do {
        size_t len = n - at < 65535 ? n - at : 65535;
        z[k++] = (at + len == n) ? 1 : 0;  // BFINAL on the last block, BTYPE 00 (stored)
        z[k++] = (unsigned char)(len & 0xFF); z[k++] = (unsigned char)(len >> 8);
        z[k++] = (unsigned char)(~len & 0xFF); z[k++] = (unsigned char)((~len >> 8) & 0xFF);
        memcpy(z + k, raw + at, len);
        k += len; at += len;
    } while (at < n);
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) { a = (a + raw[i]) % 65521u; b = (b + a) % 65521u; }
    png_be32_(z + k, (b << 16) | a);
    return k + 4;
}

// Whether a clip's GIF (each frame Hi*scale x Wi*scale, at most 65535 a side) and PNG strip
// (Fr frames side by side, gap pixels apart, one image under 2 GiB) can be written: NULL,
// or why not. A trainer asks at start, so that a bad --gif-scale never ends a run later.
static inline const char* image_clip_fits(int C, int Fr, int Hi, int Wi, int scale, int gap) {
    static char why[200];
    int64_t W = (int64_t)Fr * Wi * scale + (int64_t)(Fr - 1) * gap, H = (int64_t)Hi * scale, ch = C == 3 ? 3 : 1;
    if (scale < 1) snprintf(why, sizeof(why), "a scale of %d pixels per clip pixel (must be >= 1)", scale);
    else if ((int64_t)Wi * scale > 65535 || H > 65535)
        snprintf(why, sizeof(why), "%lldx%lld pixels per GIF frame; a GIF holds at most 65535 per side", (long long)H,
                 (long long)Wi * scale);
    else if (W > 0x7FFFFFFF || H * (1 + W * ch) > 0x7FFFFFFF - 65536)
        snprintf(why, sizeof(why), "a %lldx%lld PNG strip, too large for one image", (long long)H, (long long)W);
    else return NULL;
    return why;
}

static inline const char* try_write_png_strip(const char* path, const float* clip, int C, int Fr, int Hi, int Wi, int scale,
                                              int gap) {
    image_check_args_("PNG", path, C, Fr, Hi, Wi, scale);
    if (gap < 0) FAIL("PNG '%s': gap %d, must be >= 0", path, gap);
    const int ch = C == 3 ? 3 : 1;
    const int64_t W = (int64_t)Fr * Wi * scale + (int64_t)(Fr - 1) * gap, H = (int64_t)Hi * scale;
    const int64_t row_bytes = 1 + W * ch;  // filter byte (0: none), then the pixels
    if (W > 0x7FFFFFFF || H * row_bytes > 0x7FFFFFFF - 65536)
        FAIL("PNG '%s': a %lldx%lld strip is too large for one image", path, (long long)H, (long long)W);
    const size_t n = (size_t)(H * row_bytes);
    unsigned char* raw = (unsigned char*)xmalloc(n);
    memset(raw, 255, n);  // the gaps stay white
    const size_t plane = (size_t)Fr * Hi * Wi;
    for (int64_t y = 0; y < H; y++) {
        unsigned char* row = raw + y * row_bytes;
        row[0] = 0;
        for (int f = 0; f < Fr; f++) {
            unsigned char* frame = row + 1 + (int64_t)f * (Wi * scale + gap) * ch;
            for (int x = 0; x < Wi * scale; x++) {
                size_t at = ((size_t)f * Hi + y / scale) * Wi + x / scale;
                for (int c = 0; c < ch; c++) frame[x * ch + c] = (unsigned char)image_level(clip[c * plane + at]);
            }
        }
    }
    unsigned char* z = (unsigned char*)xmalloc(n + 5 * (n / 65535 + 1) + 6);
    size_t zn = png_zlib_stored_(raw, n, z);

    ImageFile o = image_open_(path);
    const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    image_put_(&o, signature, 8);
    unsigned char ihdr[13];
    png_be32_(ihdr, (uint32_t)W); png_be32_(ihdr + 4, (uint32_t)H);
    ihdr[8] = 8;                   // bits per channel
    ihdr[9] = ch == 3 ? 2 : 0;     // colour type: RGB or grey
    ihdr[10] = 0; ihdr[11] = 0; ihdr[12] = 0;  // deflate, adaptive filtering, no interlace
    png_chunk_(&o, "IHDR", ihdr, 13);
    png_chunk_(&o, "IDAT", z, zn);
    png_chunk_(&o, "IEND", NULL, 0);
    free(raw); free(z);
    return image_close_(&o);
}

static inline void write_png_strip(const char* path, const float* clip, int C, int Fr, int Hi, int Wi, int scale, int gap) {
    const char* why = try_write_png_strip(path, clip, C, Fr, Hi, Wi, scale, gap);
    if (why) FAIL("%s", why);
}

// One step's samples, a clip per class (clips: [n_classes, C*Fr*Hi*Wi], clamped to
// [-1, 1] here), as DIR/step_SSSSSS_class_K.gif and .png (frames side by side, gap 2).
// Returns NULL, or why they were not all written (a full disk, an unwritable directory):
// a training run warns and goes on.
static inline const char* write_class_samples(const char* dir, int step, float* clips, int n_classes, int C, int Fr,
                                              int Hi, int Wi, int scale) {
    static char why_dir[1300];
    char path[1300];
    int err = mkdir_p_try(dir);
    if (err) {
        snprintf(why_dir, sizeof(why_dir), "cannot create directory '%s': %s", dir, strerror(err));
        return why_dir;
    }
    const char* why = NULL;
    size_t clip = (size_t)C * Fr * Hi * Wi;
    for (int k = 0; k < n_classes && !why; k++) {
        float* xk = clips + (size_t)k * clip;
        for (size_t j = 0; j < clip; j++) xk[j] = xk[j] < -1.0f ? -1.0f : xk[j] > 1.0f ? 1.0f : xk[j];
        snprintf(path, sizeof(path), "%s/step_%06d_class_%d.gif", dir, step, k);
        why = try_write_gif(path, xk, C, Fr, Hi, Wi, scale, 12);
        snprintf(path, sizeof(path), "%s/step_%06d_class_%d.png", dir, step, k);
        if (!why) why = try_write_png_strip(path, xk, C, Fr, Hi, Wi, scale, 2);
    }
    return why;
}

// The sampled clips as a clip file (docs/formats.md, float32 encoding: every value kept; clamped
// to [-1, 1], as the format requires), labels[i] the class clip i was sampled for, so that tools
// can score them (scripts/dit_digits.py). NULL, or why the file was not written (nothing is
// left half-written).
static inline const char* try_write_clip_file(const char* path, float* clips, const int* labels, int n, int C, int Fr,
                                              int Hi, int Wi, int n_classes) {
    image_check_args_("clip file", path, C, Fr, Hi, Wi, 1);
    const size_t clip = (size_t)C * Fr * Hi * Wi;
    int32_t header[256];
    memset(header, 0, sizeof(header));
    header[0] = 20261125; header[1] = 1; header[2] = n;  // llmc/io/video_data.h's CLIPFILE_MAGIC, version 1
    header[3] = C; header[4] = Fr; header[5] = Hi; header[6] = Wi; header[7] = n_classes; header[8] = 1;  // float32
    ImageFile o = image_open_(path);
    image_put_(&o, header, sizeof(header));
    for (int i = 0; i < n; i++) {
        float* x = clips + (size_t)i * clip;
        for (size_t j = 0; j < clip; j++) x[j] = x[j] < -1.0f ? -1.0f : x[j] > 1.0f ? 1.0f : x[j];
        int32_t label = labels[i];
        image_put_(&o, &label, sizeof(label));
        image_put_(&o, x, clip * sizeof(float));
    }
    return image_close_(&o);
}
