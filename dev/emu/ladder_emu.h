// Appended by `transform.py --ladders` to every transformed dev/cuda ladder (after its
// kernel table emu_kernel_list and EMU_LADDER_NAME): sets the emulator up before the
// ladder's main runs and reports what happened when the program exits. See
// dev/emu/run_ladders.sh, which runs the ladders with LADDER_QUICK=1 (validation only).
//
// Environment:
//   EMU_SCHEDULE=fwd|rev   thread and block order (default fwd)
//   EMU_LT_MODE=0|1|2      cuBLASLt shim: 0 = no algorithm (llmc takes its fallback kernel),
//                          1 = the model of the documented contract (see include/cublasLt.h),
//                          2 = the model with the H200's in-place rounding (the same file)
// At exit (normal or through FAIL()) it prints to stdout
//   EMU_REPORT launches=N d2h_bytes=N d2h_hash=H covered=k1,k2,...
// and on an emulator error (a deadlock, a divergent barrier, a bad wmma argument...)
//   EMU_ERROR <message>
// followed by the EMU_REPORT line, before exiting with status 3.
#pragma once
#include <vector>
#include <string>

namespace emu_ladder {
inline std::vector<emu::KernelInfo>& table() { static std::vector<emu::KernelInfo> t; return t; }
inline unsigned char covered[4096];

inline void report() {
    fflush(stdout);
    std::string cov;
    for (size_t i = 0; i < table().size(); i++)
        if (covered[i]) cov += std::string(cov.empty() ? "" : ",") + table()[i].name;
    printf("EMU_REPORT launches=%llu d2h_bytes=%llu d2h_hash=%016llx covered=%s\n", emu::n_launches, emu::d2h_bytes,
           (unsigned long long)emu::d2h_hash, cov.c_str());
    fflush(stdout);
}
inline void on_error(const char* msg) {
    fflush(stdout);
    printf("EMU_ERROR %s\n", msg);
    report();  // emu::error() then _exits: atexit handlers do not run
}

inline int setup() {
    // the kernel table, with the __launch_bounds__ registered next to the ladder's kernels
    for (const emu::KernelInfo& k : emu_kernel_list) {
        emu::KernelInfo e = k;
        auto it = emu::registered_bounds().find(k.name);
        if (it != emu::registered_bounds().end()) e.max_threads = it->second;
        table().push_back(e);
    }
    if (table().size() > sizeof covered) { fprintf(stderr, "ladder_emu: kernel table too large\n"); exit(2); }
    emu::kernel_table = table().data();
    emu::kernel_table_n = (int)table().size();
    emu::covered = covered;
    emu::error_handler = on_error;
    const char* s = getenv("EMU_SCHEDULE");
    if (s && strcmp(s, "rev") == 0) emu::sched_reverse = true;
    else if (s && s[0] && strcmp(s, "fwd") != 0) { fprintf(stderr, "ladder_emu: EMU_SCHEDULE must be fwd or rev\n"); exit(2); }
#ifdef EMU_SHIM_CUBLASLT
    const char* lt = getenv("EMU_LT_MODE");
    if (lt && lt[0]) emu::lt_mode = atoi(lt);
#endif
    atexit(report);
    return 0;
}
static const int ladder_setup_done = setup();
}  // namespace emu_ladder
