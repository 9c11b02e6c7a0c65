// Shared-memory bank conflicts, counted by the host emulator (dev/emu) for the accesses
// of the tensor-core kernels: ldmatrix rows (include/tensorcore_emu.h), cp.async
// destinations (the same file), and the plain stores and casted 16-byte loads of the
// files that use the tc_* wrappers (dev/emu/transform.py rewrites them into
// EMU_SMEM_STORE / EMU_SMEM_LOAD, below). The harness turns the counts into a verdict
// (run_check in harness.cpp); README.md, "Shared-memory bank conflicts", has the policy.
//
// The hardware rule modelled (sm_80 / sm_90): 32 banks of 4 bytes; a warp's request is
// served in as many wavefronts as the largest number of DISTINCT 4-byte words that fall
// in one bank (lanes on the same word share it: a broadcast, or one store wins). Accesses
// of 16 bytes a lane (ldmatrix rows, cp.async 16, v4 loads and stores) are split into
// phases of 8 lanes (128 bytes), those of 8 bytes into phases of 16 lanes; conflicts count
// within a phase, and the conflict-free cost is one wavefront per phase. ldmatrix: each
// 8x8 matrix is the phase of its 8 row addresses (lanes 8i .. 8i+7), so a conflict-free x4
// costs 4 wavefronts.
//
// The emulator runs a warp's lanes one after another, so per-lane accesses (cp.async, the
// stores) are recorded as (lane, site, k) with k the number of times that lane has
// executed that site in this block, and a warp request is the group of lanes of one warp
// with the same site and k (the k-th time each of them executed it). A branch that some
// lanes of a warp skip shifts their k against the others' (the emulator does not model
// reconvergence): the grouping is then approximate, which does not happen in llmc's
// kernels (their loops are uniform per 8-lane phase). ldmatrix is a warp collective and is
// evaluated exactly, when the 32nd lane arrives.
#pragma once
#include "cuda_runtime.h"  // emu.h: cur_kernel, cur_fiber, n_threads, n_launches
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <string>
#include <vector>
#include <algorithm>

namespace emu {
namespace banks {

enum Kind { LDMATRIX = 0, CP_ASYNC = 1, STORE = 2, LOAD = 3 };
inline const char* kind_name(int k) {
    return k == LDMATRIX ? "ldmatrix" : k == CP_ASYNC ? "cp.async" : k == STORE ? "st.shared" : "ld.shared";
}

// per (kernel, site): warp requests, the wavefronts they took, and what they would take
// without conflicts
struct Stat {
    const char* kernel;
    const char* file;
    int line, kind;
    const char* what;                 // the wrapper (ldmatrix), or the access width
    unsigned width;                   // bytes a lane
    unsigned long long launches, requests, wavefronts, ideal, conflicted;
    unsigned worst;                   // the most wavefronts one phase took
    unsigned long long last_launch;
    char example[320];                // the first conflicting request, for the message
};
inline std::vector<Stat>& table() { static std::vector<Stat> t; return t; }
inline Stat& stat_of(const char* kernel, const char* file, int line, int kind, const char* what, unsigned width) {
    static size_t last = (size_t)-1;
    std::vector<Stat>& t = table();
    auto same = [&](const Stat& s) {
        return s.line == line && s.kind == kind && s.width == width && (s.file == file || strcmp(s.file, file) == 0) &&
               (s.kernel == kernel || strcmp(s.kernel, kernel) == 0);
    };
    if (last < t.size() && same(t[last])) return t[last];
    for (size_t i = 0; i < t.size(); i++)
        if (same(t[i])) { last = i; return t[i]; }
    Stat s;
    memset(&s, 0, sizeof s);
    s.kernel = kernel; s.file = file; s.line = line; s.kind = kind; s.what = what; s.width = width;
    s.last_launch = ~0ull;
    t.push_back(s);
    last = t.size() - 1;
    return t.back();
}

// phase_wavefronts below, by sorting every word (the rare case of more than 8 words in one bank)
inline unsigned phase_wavefronts_slow(const uintptr_t* addr, const unsigned* width, int n) {
    std::vector<uintptr_t> words;
    for (int i = 0; i < n; i++)
        for (uintptr_t w = addr[i] / 4; w <= (addr[i] + width[i] - 1) / 4; w++) words.push_back(w);
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    unsigned per_bank[32] = {0}, worst = 0;
    for (uintptr_t w : words) worst = std::max(worst, ++per_bank[w % 32]);
    return worst;
}
// wavefronts of one phase: the most distinct 4-byte words in one bank. addr[i], width[i]:
// the lanes' accesses (host addresses: only their offsets modulo 128 bytes matter, and a
// shift of every address by a multiple of 4 bytes permutes the banks without changing
// the count, so the emulator's buffer placement gives the GPU's answer)
inline unsigned phase_wavefronts(const uintptr_t* addr, const unsigned* width, int n) {
    if (n <= 8 && width[0] == 16) {  // the common case, 16 aligned bytes a lane: 8 groups of 4 banks
        bool aligned = true;
        for (int i = 0; i < n; i++) aligned &= width[i] == 16 && addr[i] % 16 == 0;
        if (aligned) {
            unsigned per_group[8] = {0}, worst = 0;
            for (int i = 0; i < n; i++) {
                bool dup = false;
                for (int j = 0; j < i; j++) dup |= addr[j] == addr[i];
                if (!dup) worst = std::max(worst, ++per_group[(addr[i] / 16) % 8]);
            }
            return worst;
        }
    }
    // per bank, the distinct words seen so far (a bank rarely holds more than a few)
    uintptr_t seen[32][8];
    unsigned cnt[32] = {0}, worst = 0;
    for (int i = 0; i < n; i++)
        for (uintptr_t w = addr[i] / 4; w <= (addr[i] + width[i] - 1) / 4; w++) {
            const unsigned k = (unsigned)(w % 32);
            bool dup = false;
            for (unsigned j = 0; j < cnt[k] && j < 8; j++) dup |= seen[k][j] == w;
            if (dup) continue;
            if (cnt[k] >= 8) return phase_wavefronts_slow(addr, width, n);
            seen[k][cnt[k]++] = w;
            if (cnt[k] > worst) worst = cnt[k];
        }
    return worst;
}

inline void note(Stat& s, unsigned wavefronts, unsigned phases, unsigned worst, const char* example) {
    if (s.last_launch != ::emu::n_launches) { s.last_launch = ::emu::n_launches; s.launches++; }
    s.requests++;
    s.wavefronts += wavefronts;
    s.ideal += phases;
    s.worst = std::max(s.worst, worst);
    if (wavefronts > phases) {
        if (!s.conflicted) snprintf(s.example, sizeof s.example, "%s", example);
        s.conflicted++;
    }
}

// ---- ldmatrix: a warp collective, evaluated when the 32nd lane arrives
inline void ldmatrix(int nm, const uintptr_t* row_addr, const char* what, const char* file, int line) {
    unsigned total = 0, worst = 0, w16[8];
    for (int i = 0; i < 8; i++) w16[i] = 16;
    int bad = -1;
    for (int i = 0; i < nm; i++) {
        unsigned w = phase_wavefronts(row_addr + 8 * i, w16, 8);
        total += w;
        if (w > worst) worst = w;
        if (w > 1 && bad < 0) bad = i;
    }
    char ex[320] = "";
    if (bad >= 0)
        snprintf(ex, sizeof ex, "matrix %d's 8 rows at byte offsets (mod 128) %u %u %u %u %u %u %u %u take %u wavefronts", bad,
                 (unsigned)(row_addr[8 * bad] % 128), (unsigned)(row_addr[8 * bad + 1] % 128), (unsigned)(row_addr[8 * bad + 2] % 128),
                 (unsigned)(row_addr[8 * bad + 3] % 128), (unsigned)(row_addr[8 * bad + 4] % 128), (unsigned)(row_addr[8 * bad + 5] % 128),
                 (unsigned)(row_addr[8 * bad + 6] % 128), (unsigned)(row_addr[8 * bad + 7] % 128),
                 phase_wavefronts(row_addr + 8 * bad, w16, 8));
    note(stat_of(::emu::cur_kernel, file, line, LDMATRIX, what, 16), total, (unsigned)nm, worst, ex);
}

// ---- per-lane accesses (cp.async, stores, loads) of the current block, evaluated at its end
struct Site { const char* file; int line, kind; unsigned width; };
struct Rec { uintptr_t addr; uint32_t site, fiber; };
struct Group { uint32_t mask; uintptr_t addr[32]; };  // one warp request: the lanes that took part
struct BlockLog {
    std::vector<Site> sites;
    std::vector<Rec> recs;                 // in execution order (each lane's in its program order)
    std::vector<uint32_t> k;               // [fiber][site]: times the lane executed the site so far
    std::vector<std::vector<Group>> groups;  // [site][warp][k]; kept between blocks (their capacity)
    size_t last_site = 0;
};
// one log per block that can be running: the blocks of a cluster interleave, and a warp
// request is grouped from its own block's records only. A remote (DSMEM) access through
// map_shared_rank is not recorded: its address is in another block's shared memory, which
// the callers' in-shared-memory test does not accept (the hardware serves it through the
// cluster's network, not as a bank access of this block)
inline BlockLog& blog() {
    static BlockLog b[::emu::MAX_CLUSTER];
    return b[::emu::cluster_cur < 0 ? 0 : ::emu::cluster_cur];
}

inline void record(int kind, const char* file, int line, const void* p, unsigned width) {
    BlockLog& b = blog();
    size_t si = b.last_site;
    if (!(si < b.sites.size() && b.sites[si].line == line && b.sites[si].kind == kind && b.sites[si].width == width &&
          b.sites[si].file == file)) {
        for (si = 0; si < b.sites.size(); si++)
            if (b.sites[si].line == line && b.sites[si].kind == kind && b.sites[si].width == width && b.sites[si].file == file) break;
        if (si == b.sites.size()) b.sites.push_back({file, line, kind, width});
        b.last_site = si;
    }
    b.recs.push_back({(uintptr_t)p, (uint32_t)si, (uint32_t)::emu::cur_fiber});
}

// groups the block's records into warp requests and counts them (called at the end of
// every block, from the tensor-core model's block_end_hook)
inline void block_end() {
    BlockLog& b = blog();
    if (!b.recs.empty()) {
        const size_t ns = b.sites.size(), nw = ((size_t)::emu::n_threads + 31) / 32;
        b.k.assign((size_t)::emu::n_threads * ns, 0);
        if (b.groups.size() < ns * nw) b.groups.resize(ns * nw);
        for (size_t g = 0; g < ns * nw; g++) b.groups[g].clear();
        for (const Rec& r : b.recs) {
            const uint32_t k = b.k[(size_t)r.fiber * ns + r.site]++;
            std::vector<Group>& v = b.groups[r.site * nw + (r.fiber >> 5)];
            if (v.size() <= k) v.resize(k + 1, Group{0, {0}});
            v[k].mask |= 1u << (r.fiber & 31);
            v[k].addr[r.fiber & 31] = r.addr;
        }
        for (size_t si = 0; si < ns; si++) {
            const Site& st = b.sites[si];
            const unsigned per_phase = st.width >= 16 ? 8 : st.width == 8 ? 16 : 32;
            static const char* wname[17] = {"", "1 byte", "2 bytes", "", "4 bytes", "", "", "", "8 bytes", "", "", "", "", "", "", "", "16 bytes"};
            Stat& stat = stat_of(::emu::cur_kernel, st.file, st.line, st.kind, st.width <= 16 ? wname[st.width] : "", st.width);
            for (size_t w = 0; w < nw; w++)
                for (const Group& g : b.groups[si * nw + w]) {
                    unsigned total = 0, phases = 0, worst = 0;
                    char ex[320] = "";
                    for (unsigned ph = 0; ph < 32 / per_phase; ph++) {
                        uintptr_t addr[32];
                        unsigned wid[32];
                        int n = 0;
                        for (unsigned l = ph * per_phase; l < (ph + 1) * per_phase; l++)
                            if (g.mask >> l & 1) { addr[n] = g.addr[l]; wid[n] = st.width; n++; }
                        if (!n) continue;
                        const unsigned wf = phase_wavefronts(addr, wid, n);
                        total += wf;
                        phases++;
                        if (wf > worst) worst = wf;
                        if (wf > 1 && !ex[0]) {
                            std::string e = "warp " + std::to_string(w) + ", lanes " + std::to_string(ph * per_phase) + "-" +
                                            std::to_string(ph * per_phase + per_phase - 1) + " (" + std::to_string(n) +
                                            " of them), byte offsets (mod 128)";
                            for (int l = 0; l < n; l++) e += " " + std::to_string(addr[l] % 128);
                            e += ": " + std::to_string(wf) + " wavefronts";
                            snprintf(ex, sizeof ex, "%s", e.c_str());
                        }
                    }
                    note(stat, total, phases, worst, ex);
                }
        }
    }
    b.sites.clear();
    b.recs.clear();
    b.last_site = 0;
}

// the counts so far, one line per (kernel, site), to f
inline void print(FILE* f, const char* indent = "    ") {
    for (const Stat& s : table()) {
        const char* base = strrchr(s.file, '/');
        fprintf(f, "%ssmem banks: %-40s %s:%d %s (%s)  %llu launches, %llu requests, %llu wavefronts (conflict-free: %llu)%s",
                indent, s.kernel, base ? base + 1 : s.file, s.line, kind_name(s.kind), s.what, s.launches, s.requests,
                s.wavefronts, s.ideal, s.conflicted ? "" : ", conflict-free\n");
        if (s.conflicted)
            fprintf(f, ", %llu requests conflicted, worst %u-way; first: %s\n", s.conflicted, s.worst, s.example);
    }
}
// the first site that `required` says must be conflict-free and is not, as a message; ""
// if there is none
template <class Required>
inline std::string first_violation(Required required) {
    for (const Stat& s : table()) {
        if (!s.conflicted || !required(s)) continue;
        char m[800];
        snprintf(m, sizeof m, "shared-memory bank conflict: %s (%s) at %s:%d in %s: %llu of %llu requests conflicted "
                 "(%llu wavefronts, %llu conflict-free), worst %u-way; first: %s", kind_name(s.kind), s.what, s.file, s.line,
                 s.kernel, s.conflicted, s.requests, s.wavefronts, s.ideal, s.worst, s.example);
        return m;
    }
    return "";
}

}  // namespace banks
}  // namespace emu
