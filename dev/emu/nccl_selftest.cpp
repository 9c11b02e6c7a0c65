/*
Self-test of the NCCL shim (include/nccl.h), run by run_trainer.sh under
mpirun -np 2, one case per run:
    nccl_selftest ok       the four collectives (fp32 and bf16, sum, max, in place and not, a
                           broadcast from rank 1) against values computed here, through the
                           non-blocking protocol, in the lazy stream model; the result of a
                           collective must include a memset issued on its stream just before
                           it (it runs in stream order, not when called). Then point-to-point
                           as llmc/parallel/comm.h drives it: an all-to-all (a group of a ncclSend and
                           a ncclRecv to and from every rank, itself included, fp32) and two
                           steps of a ring (a group of a send to the next rank and a receive
                           from the previous one, bf16; the second step sends on what the
                           first received, and a memset before the first must travel), exact.
                           Exits 0.
    nccl_selftest CASE     a planted misuse of NCCL's non-blocking contract; the run must end
                           in the emulator error whose text `nccl_selftest --expect CASE` prints
                           (a shim that stops checking a rule fails its case).
    nccl_selftest --list   the cases
If the shim stopped catching one of these, the trainer runs with --comm nccl would no
longer show that llmc/parallel/comm.h drives NCCL correctly.
*/
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <nccl.h>
#include <string>
#include <vector>

#ifndef EMU_SHIM_CUDA_RUNTIME
#error "the real CUDA headers were picked up: put dev/emu/include first on the include path"
#endif

#define CK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess && r_ != ncclInProgress) { \
    fprintf(stderr, "nccl_selftest: %s failed: %s\n", #call, ncclGetErrorString(r_)); exit(1); } } while (0)
#define CU(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "nccl_selftest: %s failed: %s\n", #call, cudaGetErrorString(e_)); exit(1); } } while (0)
#define MP(call) do { if ((call) != MPI_SUCCESS) { fprintf(stderr, "nccl_selftest: %s failed\n", #call); exit(1); } } while (0)

struct Case { const char* name; const char* expect; };
static const Case CASES[] = {
    {"ok", ""},
    {"call_in_progress", "ncclAllReduce on communicator 0 while its ncclAllReduce is still in progress"},
    {"stream_use", "cudaEventRecord on stream 1 while ncclAllReduce on it (communicator 0) is still in progress"},
    {"use_before_init", "ncclAllReduce on communicator 0 while its ncclCommInitRankConfig is still in progress"},
    {"destroy_without_finalize", "ncclCommDestroy of communicator 0 (rank"},
    {"destroy_during_finalize", "ncclCommDestroy of communicator 0 while its ncclCommFinalize is still in progress"},
    {"use_after_destroy", "ncclAllReduce on communicator 0 after ncclCommDestroy"},
    {"host_buffer", "ncclAllReduce: sendbuff"},
    {"bad_overlap", "ncclAllGather: sendbuff and recvbuff overlap but are not in place"},
    {"ranks_disagree", "the ranks of communicator 0 run different collectives"},
    {"peer_never_runs", "did not complete within 1 s (EMU_NCCL_TIMEOUT)"},
    {"p2p_ungrouped_ring", "never ran the matching ncclRecv at the same time"},
    {"p2p_count_mismatch", "a send and its receive must have the same count and type"},
    {"p2p_recv_overlap", "the receive buffer of ncclRecv from rank"},
    {"p2p_call_in_progress", "ncclSend on communicator 0 while its ncclGroupEnd is still in progress"},
    {"group_end_without_start", "ncclGroupEnd without ncclGroupStart"},
};

static int rank_ = 0;
static void settle(ncclComm_t c) {
    for (;;) {
        ncclResult_t s;
        CK(ncclCommGetAsyncError(c, &s));
        if (s == ncclSuccess) return;
        if (s != ncclInProgress) { fprintf(stderr, "nccl_selftest: async error %s\n", ncclGetErrorString(s)); exit(1); }
    }
}
static ncclComm_t make_comm(int nranks, bool wait) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank_ == 0) CK(ncclGetUniqueId(&id));
    MP(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t c;
    CK(ncclCommInitRankConfig(&c, nranks, id, rank_, &cfg));
    if (wait) settle(c);
    return c;
}
static void close_comm(ncclComm_t c) { CK(ncclCommFinalize(c)); settle(c); CK(ncclCommDestroy(c)); }

template <class T> static T* dev_upload(const std::vector<T>& h, cudaStream_t s) {
    T* d;
    CU(cudaMalloc(&d, h.size() * sizeof(T)));
    CU(cudaMemcpyAsync(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, s));
    return d;
}
template <class T> static std::vector<T> dev_download(const T* d, size_t n, cudaStream_t s) {
    std::vector<T> h(n);
    CU(cudaMemcpyAsync(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost, s));  // pageable: returns when done
    return h;
}
static int bad = 0;
static void expect_eq(const char* what, size_t i, float got, float want) {
    if (memcmp(&got, &want, sizeof got) != 0 && bad++ < 10)
        fprintf(stderr, "nccl_selftest (rank %d): %s[%zu] = %.9g, expected %.9g\n", rank_, what, i, got, want);
}

// rank r's contribution to element i (fp32 sums of these are exact; bf16 sums round)
static float val(int r, size_t i) { return (float)((int)(i % 97) - 40) * (r + 1) + 0.5f * (float)r; }

static int case_ok(int n) {
    ncclComm_t c = make_comm(n, true);
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const size_t N = 1000;
    // fp32 sum in place; elements [0, 100) are zeroed on the stream after the upload and
    // before the collective, so the sum there must be 0
    std::vector<float> h(N);
    for (size_t i = 0; i < N; i++) h[i] = val(rank_, i);
    float* d = dev_upload(h, s);
    CU(cudaMemsetAsync(d, 0, 100 * sizeof(float), s));
    CK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, c, s)); settle(c);
    std::vector<float> got = dev_download(d, N, s);
    for (size_t i = 0; i < N; i++) {
        float want = 0.0f;
        for (int r = 0; r < n; r++) want += i < 100 ? 0.0f : val(r, i);
        expect_eq("allreduce fp32 sum", i, got[i], want);
    }
    // fp32 max, out of place
    float* m; CU(cudaMalloc(&m, N * sizeof(float)));
    CU(cudaMemcpyAsync(d, h.data(), N * sizeof(float), cudaMemcpyHostToDevice, s));
    CK(ncclAllReduce(d, m, N, ncclFloat32, ncclMax, c, s)); settle(c);
    got = dev_download(m, N, s);
    for (size_t i = 0; i < N; i++) {
        float want = val(0, i);
        for (int r = 1; r < n; r++) want = fmaxf(want, val(r, i));
        expect_eq("allreduce fp32 max", i, got[i], want);
    }
    // bf16 sum, in place: rounded to bf16 after each addition, in rank order
    std::vector<__nv_bfloat16> hb(N);
    for (size_t i = 0; i < N; i++) hb[i] = __float2bfloat16(1.0f + (float)(i % 13) / 64.0f + (float)rank_ / 256.0f);
    __nv_bfloat16* db = dev_upload(hb, s);
    CK(ncclAllReduce(db, db, N, ncclBfloat16, ncclSum, c, s)); settle(c);
    std::vector<__nv_bfloat16> gb = dev_download(db, N, s);
    for (size_t i = 0; i < N; i++) {
        float acc = 0.0f;
        for (int r = 0; r < n; r++) {
            float v = __bfloat162float(__float2bfloat16(1.0f + (float)(i % 13) / 64.0f + (float)r / 256.0f));
            acc = r == 0 ? v : __bfloat162float(__float2bfloat16(acc + v));
        }
        expect_eq("allreduce bf16 sum", i, __bfloat162float(gb[i]), acc);
    }
    // reduce-scatter in place: n blocks of B; this rank's block lands at its place
    const size_t B = 37;
    std::vector<float> hr(n * B);
    for (size_t i = 0; i < hr.size(); i++) hr[i] = val(rank_, i);
    float* dr = dev_upload(hr, s);
    CK(ncclReduceScatter(dr, dr + rank_ * B, B, ncclFloat32, ncclSum, c, s)); settle(c);
    got = dev_download(dr + rank_ * B, B, s);
    for (size_t i = 0; i < B; i++) {
        float want = 0.0f;
        for (int r = 0; r < n; r++) want += val(r, rank_ * B + i);
        expect_eq("reducescatter fp32", i, got[i], want);
    }
    // all-gather in place: block r from rank r
    std::vector<float> hg(n * B, -1.0f);
    for (size_t i = 0; i < B; i++) hg[rank_ * B + i] = val(rank_, i);
    float* dg = dev_upload(hg, s);
    CK(ncclAllGather(dg + rank_ * B, dg, B, ncclFloat32, c, s)); settle(c);
    got = dev_download(dg, n * B, s);
    for (size_t i = 0; i < n * B; i++) expect_eq("allgather fp32", i, got[i], val((int)(i / B), i % B));
    // broadcast from the last rank, out of place
    float* dt; CU(cudaMalloc(&dt, B * sizeof(float)));
    CK(ncclBroadcast(dg + rank_ * B, dt, B, ncclFloat32, n - 1, c, s)); settle(c);
    got = dev_download(dt, B, s);
    for (size_t i = 0; i < B; i++) expect_eq("broadcast fp32", i, got[i], val(n - 1, i));
    // all-to-all as comm_all_to_all: block r of the send buffer to rank r, block r of the
    // receive buffer from rank r, one group (the block to itself included)
    const size_t A = 29;
    std::vector<float> ha(n * A);
    for (size_t i = 0; i < ha.size(); i++) ha[i] = val(rank_ * n + (int)(i / A), i % A);
    float* das = dev_upload(ha, s);
    float* dar; CU(cudaMalloc(&dar, n * A * sizeof(float)));
    CK(ncclGroupStart());
    for (int r = 0; r < n; r++) {
        CK(ncclSend(das + r * A, A, ncclFloat32, r, c, s));
        CK(ncclRecv(dar + r * A, A, ncclFloat32, r, c, s));
    }
    CK(ncclGroupEnd()); settle(c);
    got = dev_download(dar, n * A, s);
    for (size_t i = 0; i < n * A; i++) expect_eq("all-to-all fp32", i, got[i], val((int)(i / A) * n + rank_, i % A));
    // two steps of a ring as comm_send_recv: to the next rank, from the previous; the second
    // step sends what the first received. Elements [0, 5) are zeroed on the stream before the
    // first step: the zeros travel with the block.
    const size_t RB = 41;
    const int next = (rank_ + 1) % n, prev = (rank_ + n - 1) % n;
    auto ring_val = [](int r, size_t i) { return __float2bfloat16(1.0f + (float)(i % 17) / 32.0f + (float)r / 8.0f); };
    std::vector<__nv_bfloat16> hk(RB);
    for (size_t i = 0; i < RB; i++) hk[i] = ring_val(rank_, i);
    __nv_bfloat16* ring[3];
    ring[0] = dev_upload(hk, s);
    CU(cudaMalloc(&ring[1], RB * sizeof(__nv_bfloat16))); CU(cudaMalloc(&ring[2], RB * sizeof(__nv_bfloat16)));
    CU(cudaMemsetAsync(ring[0], 0, 5 * sizeof(__nv_bfloat16), s));
    for (int st = 0; st < 2; st++) {
        CK(ncclGroupStart());
        CK(ncclSend(ring[st], RB, ncclBfloat16, next, c, s));
        CK(ncclRecv(ring[st + 1], RB, ncclBfloat16, prev, c, s));
        CK(ncclGroupEnd()); settle(c);
    }
    for (int st = 1; st <= 2; st++) {
        std::vector<__nv_bfloat16> g = dev_download(ring[st], RB, s);
        int from = ((rank_ - st) % n + n) % n;  // whose block arrived after st steps
        for (size_t i = 0; i < RB; i++)
            expect_eq(st == 1 ? "ring step 1 bf16" : "ring step 2 bf16", i, __bfloat162float(g[i]),
                      i < 5 ? 0.0f : __bfloat162float(ring_val(from, i)));
    }
    close_comm(c);
    CU(cudaStreamDestroy(s));
    CU(cudaFree(d)); CU(cudaFree(m)); CU(cudaFree(db)); CU(cudaFree(dr)); CU(cudaFree(dg)); CU(cudaFree(dt));
    CU(cudaFree(das)); CU(cudaFree(dar)); for (auto* p : ring) CU(cudaFree(p));
    if (bad) { fprintf(stderr, "nccl_selftest (rank %d): %d wrong elements\n", rank_, bad); return 1; }
    printf("nccl_selftest (rank %d): ok (6 collectives, an all-to-all and 2 ring steps in 3 groups of ncclSend/ncclRecv, %llu "
           "calls returned ncclInProgress)\n", rank_, emu_nccl::st().in_progress);
    return 0;
}

// the misuse cases: each ends in an emulator error before it returns
static int case_bad(const std::string& k, int n) {
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const size_t N = 64;
    float* d; CU(cudaMalloc(&d, 2 * N * sizeof(float)));
    CU(cudaMemsetAsync(d, 0, 2 * N * sizeof(float), s));
    ncclComm_t c = make_comm(n, k != "use_before_init");
    if (k == "use_before_init") CK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, c, s));
    if (k == "call_in_progress") {  // every call takes 2 polls (EMU_NCCL_POLLS=2-2): the first returns in progress
        CK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, c, s));
        CK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, c, s));
    }
    if (k == "stream_use") {
        cudaEvent_t e; CU(cudaEventCreate(&e));
        CK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, c, s));
        CU(cudaEventRecord(e, s));
    }
    if (k == "destroy_without_finalize") CK(ncclCommDestroy(c));
    if (k == "destroy_during_finalize") { CK(ncclCommFinalize(c)); CK(ncclCommDestroy(c)); }
    if (k == "use_after_destroy") { close_comm(c); CK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, c, s)); }
    if (k == "host_buffer") {
        std::vector<float> h(N);
        CK(ncclAllReduce(h.data(), h.data(), N, ncclFloat32, ncclSum, c, s));
    }
    if (k == "bad_overlap") CK(ncclAllGather(d + 1, d, N / 2, ncclFloat32, c, s));
    if (k == "ranks_disagree") {  // rank 1 reduces one element fewer
        CK(ncclAllReduce(d, d, N - (rank_ == 1), ncclFloat32, ncclSum, c, s)); settle(c);
        dev_download(d, N, s);
    }
    if (k == "peer_never_runs") {  // rank 1 never calls it (EMU_NCCL_TIMEOUT=1)
        if (rank_ == 0) { CK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, c, s)); settle(c); dev_download(d, N, s); }
        else sleep(30);
    }
    const int next = (rank_ + 1) % n, prev = (rank_ + n - 1) % n;
    if (k == "p2p_ungrouped_ring") {  // each rank sends before it receives, ungrouped: NCCL deadlocks (EMU_NCCL_TIMEOUT=1)
        CK(ncclSend(d, N, ncclFloat32, next, c, s)); settle(c);
        CK(ncclRecv(d + N, N, ncclFloat32, prev, c, s)); settle(c);
        dev_download(d, 2 * N, s);
    }
    if (k == "p2p_count_mismatch") {  // rank 1 receives one element fewer than rank 0 sends
        CK(ncclGroupStart());
        CK(ncclSend(d, N, ncclFloat32, next, c, s));
        CK(ncclRecv(d + N, N - (rank_ == 1), ncclFloat32, prev, c, s));
        CK(ncclGroupEnd()); settle(c);
        dev_download(d, 2 * N, s);
    }
    if (k == "p2p_recv_overlap") {  // the receive lands on half of what the group sends
        CK(ncclGroupStart());
        CK(ncclSend(d, N, ncclFloat32, next, c, s));
        CK(ncclRecv(d + N / 2, N, ncclFloat32, prev, c, s));
        CK(ncclGroupEnd());
    }
    if (k == "p2p_call_in_progress") {  // every call takes 2 polls: the group is still in progress at the next send
        CK(ncclGroupStart());
        CK(ncclSend(d, N, ncclFloat32, next, c, s));
        CK(ncclRecv(d + N, N, ncclFloat32, prev, c, s));
        CK(ncclGroupEnd());
        CK(ncclSend(d, N, ncclFloat32, next, c, s));
    }
    if (k == "group_end_without_start") CK(ncclGroupEnd());
    fprintf(stderr, "nccl_selftest (rank %d): case %s: the misuse was not caught\n", rank_, k.c_str());
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 2 && !(argc == 3 && strcmp(argv[1], "--expect") == 0)) {
        fprintf(stderr, "usage: nccl_selftest CASE | --expect CASE | --list (under mpirun -np 2)\n");
        return 2;
    }
    std::string k = argv[argc - 1];
    if (k == "--list") { for (const Case& c : CASES) printf("%s\n", c.name); return 0; }
    const Case* cs = nullptr;
    for (const Case& c : CASES) if (k == c.name) cs = &c;
    if (!cs) { fprintf(stderr, "nccl_selftest: unknown case '%s' (--list)\n", k.c_str()); return 2; }
    if (argc == 3) { printf("%s\n", cs->expect); return 0; }
    emu::lazy_streams = true;  // collectives run when their stream is forced, as in the trainer stage
    if (k == "call_in_progress" || k == "stream_use" || k == "use_before_init" || k == "destroy_during_finalize" ||
        k == "p2p_call_in_progress")
        setenv("EMU_NCCL_POLLS", "2-2", 1);  // every call returns ncclInProgress (the shim reads it at its first call)
    if (k == "peer_never_runs" || k == "p2p_ungrouped_ring") setenv("EMU_NCCL_TIMEOUT", "1", 1);
    MP(MPI_Init(&argc, &argv));
    int n = 0;
    MP(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    MP(MPI_Comm_size(MPI_COMM_WORLD, &n));
    if (n < 2) { fprintf(stderr, "nccl_selftest: run it under mpirun -np 2 (or more)\n"); return 2; }
    int rc = k == "ok" ? case_ok(n) : case_bad(k, n);
    MP(MPI_Finalize());
    return rc;
}
