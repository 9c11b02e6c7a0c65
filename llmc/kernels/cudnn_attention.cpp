/*
cuDNN's fused attention through the cudnn-frontend graph API: the one translation unit that
includes the frontend (llmc/kernels/cudnn_attention.h says why, and what the layouts are).
Built by `make USE_CUDNN=1` into build/cudnn_attention.o with the headers that
scripts/ensure_cudnn_frontend.sh unpacks; linked with -lcudnn (and nvrtc, which cuDNN's
runtime-compiled engines load).

Graphs: one per (B, T, H, KV, hd, causal, forward or backward, deterministic), built at its first
call and kept for the run (building one costs milliseconds to seconds: heuristics, and for some
engines a compile), in a map as llm.c's cudnn_att.cpp keeps them. A graph's tensors carry the
strides of our [B, T, heads, hd] rows, so q, k, v, out and their gradients are passed as they lie
(no transposes); cuDNN's logical order is [B, heads, T, hd].

Errors: every call is checked; a failure names the call, where it was made and a hint, and ends
the program (llmc/core/common.h's FAIL), as everywhere else. The deterministic backward and the
workspace bound are explained at cudnn_att_workspace_bound.
*/
#include <cudnn.h>
#include <cudnn_frontend.h>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include "../core/common.h"
#include "cudnn_attention.h"

namespace fe = cudnn_frontend;

#define cudnnCheck(call, hint) do { cudnnStatus_t st_ = (call); if (st_ != CUDNN_STATUS_SUCCESS) \
    FAIL("cuDNN: %s failed: %s (hint: %s)", #call, cudnnGetErrorString(st_), hint); } while (0)
#define feCheck(call, hint) do { fe::error_t e_ = (call); if (!e_.is_good()) \
    FAIL("cudnn-frontend: %s failed: %s (hint: %s)", #call, e_.get_message().c_str(), hint); } while (0)

static const char* HINT_LOAD = "is the libcudnn.so.9 that was loaded (cudnnGetVersion) the 9.x the build used? "
                               "scripts/gpu_check.sh points LD_LIBRARY_PATH at PyTorch's; without it, use the binaries "
                               "built without cuDNN and --attention tc or fp32";
static const char* HINT_SHAPE = "cuDNN's SDPA takes bf16 head dims that are multiples of 8 up to 256 on Hopper "
                                "(128 on Ampere/Ada for the backward) and KV dividing H; use --attention tc or fp32 "
                                "for this shape";

// the ids of the graphs' tensors in a variant pack
enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };

static cudnnHandle_t g_handle = NULL;
static int g_deterministic = 1;

typedef std::tuple<int, int, int, int, int, int, int, int> GraphKey;  // B T H KV hd causal backward deterministic
struct CachedGraph {
    std::shared_ptr<fe::graph::Graph> graph;
    int64_t workspace;
};
static std::map<GraphKey, CachedGraph> g_graphs;

size_t cudnn_att_loaded_version(void) { return cudnnGetVersion(); }
size_t cudnn_att_compiled_version(void) { return CUDNN_VERSION; }
void cudnn_att_set_deterministic(int deterministic) { g_deterministic = deterministic != 0; }

// What one call may use, bytes. The frontend's own share of the backward (what it lays into the
// workspace for the composite graph of cudnn-frontend 1.32's sdpa_backward on dense layouts) is the
// fp32 dQ accumulator [B, H, T, hd] and the fp32 row sums of dO*O [B, H, T]. The deterministic
// backward on Hopper (cuDNN 9.19; the linear-memory ordered-dQ engine comes with 9.25) instead keeps
// dP [B, H, T, T] in bf16 with both sequence axes padded to the engine's tiles (64 and 128 rows: 128
// taken for both here), and no dQ accumulator; the sum of both paths' terms bounds either. The
// engines' own scratch (counters, tile semaphores) is not published: ATT_WS_SLACK covers it, and the
// first GPU run prints each graph's real figure (cudnn_att_graph) so the slack can be checked. The
// forward keeps nothing in the workspace but that scratch.
static const size_t ATT_WS_SLACK = (size_t)16 << 20;
size_t cudnn_att_workspace_bound(int B, int T, int H, int KV, int hd, int deterministic) {
    (void)KV;  // the per-query-head dK, dV sums of GQA stay virtual on dense layouts
    size_t bh = (size_t)B * H, tp = ((size_t)T + 127) / 128 * 128;
    size_t n = bh * T * ((size_t)hd + 1) * sizeof(float) + ATT_WS_SLACK;
    if (deterministic) n += bh * tp * tp * 2;
    return n;
}

static void att_handle(cudaStream_t stream) {
    if (!g_handle) {
        // cuDNN keeps its API within a major version, and the frontend checks the features it
        // uses against the loaded library at run time; another major is refused here
        if (cudnnGetVersion() / 10000 != CUDNN_VERSION / 10000)
            FAIL("cuDNN: the library loaded is %zu, the build compiled against %d (hint: %s)", cudnnGetVersion(),
                 CUDNN_VERSION, HINT_LOAD);
        cudnnCheck(cudnnCreate(&g_handle), HINT_LOAD);
    }
    cudnnCheck(cudnnSetStream(g_handle, stream), "the stream was not created by this process's CUDA context?");
}

// [B, n, T, hd] over rows of [B, T, n, hd]
static std::shared_ptr<fe::graph::Tensor_attributes> att_tensor(fe::graph::Graph& g, const char* name, int uid, int B,
                                                                 int n, int T, int hd) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({B, n, T, hd})
                        .set_stride({(int64_t)T * n * hd, hd, (int64_t)n * hd, 1}));
}
static void att_rows(const std::shared_ptr<fe::graph::Tensor_attributes>& t, int uid, int B, int n, int T, int hd) {
    t->set_output(true).set_uid(uid).set_dim({B, n, T, hd}).set_stride({(int64_t)T * n * hd, hd, (int64_t)n * hd, 1});
}

static const CachedGraph& att_graph(int B, int T, int H, int KV, int hd, int causal, int backward) {
    GraphKey key(B, T, H, KV, hd, causal, backward, backward ? g_deterministic : 0);
    auto it = g_graphs.find(key);
    if (it != g_graphs.end()) return it->second;
    if (KV < 1 || H % KV != 0) FAIL("cudnn attention: KV=%d heads must divide H=%d", KV, H);
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    auto Q = att_tensor(*g, "Q", UID_Q, B, H, T, hd);
    auto K = att_tensor(*g, "K", UID_K, B, KV, T, hd);
    auto V = att_tensor(*g, "V", UID_V, B, KV, T, hd);
    float scale = 1.0f / sqrtf((float)hd);  // as the other kernels' scale
    if (!backward) {
        auto opt = fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(true).set_causal_mask(causal != 0)
                       .set_attn_scale(scale);
        auto [O, stats] = g->sdpa(Q, K, V, opt);
        att_rows(O, UID_O, B, H, T, hd);
        stats->set_output(true).set_uid(UID_STATS).set_data_type(fe::DataType_t::FLOAT)
            .set_dim({B, H, T, 1}).set_stride({(int64_t)H * T, T, 1, 1});
    } else {
        auto O = att_tensor(*g, "O", UID_O, B, H, T, hd);
        auto dO = att_tensor(*g, "dO", UID_DO, B, H, T, hd);
        auto stats = g->tensor(fe::graph::Tensor_attributes().set_name("stats").set_uid(UID_STATS)
                                   .set_data_type(fe::DataType_t::FLOAT).set_dim({B, H, T, 1})
                                   .set_stride({(int64_t)H * T, T, 1, 1}));
        auto opt = fe::graph::SDPA_backward_attributes().set_name("attention_backward").set_causal_mask(causal != 0)
                       .set_attn_scale(scale).set_deterministic_algorithm(g_deterministic != 0);
        auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, stats, opt);
        att_rows(dQ, UID_DQ, B, H, T, hd);
        att_rows(dK, UID_DK, B, KV, T, hd);
        att_rows(dV, UID_DV, B, KV, T, hd);
    }
    feCheck(g->validate(), HINT_SHAPE);
    feCheck(g->build_operation_graph(g_handle), HINT_SHAPE);
    feCheck(g->create_execution_plans({fe::HeurMode_t::A}), HINT_SHAPE);
    feCheck(g->check_support(), HINT_SHAPE);
    feCheck(g->build_plans(), "no engine of this cuDNN built a plan for the shape; use --attention tc or fp32");
    CachedGraph c = {g, 0};
    feCheck(g->get_workspace_size(c.workspace), HINT_LOAD);
    // the real workspace beside the planned bound, once per shape: what a GPU run reports to
    // check cudnn_att_workspace_bound against
    printf("cudnn attention graph: %s%s B=%d T=%d H=%d KV=%d hd=%d: workspace %lld bytes (planned bound %zu)\n",
           backward ? "backward" : "forward", backward ? (g_deterministic ? " deterministic" : " default") : "", B, T, H,
           KV, hd, (long long)c.workspace, cudnn_att_workspace_bound(B, T, H, KV, hd, g_deterministic));
    return g_graphs.emplace(key, c).first->second;
}

static void att_check_workspace(const CachedGraph& c, size_t bytes, const char* who, int B, int T, int H, int KV, int hd) {
    if ((size_t)c.workspace > bytes)
        FAIL("%s: cuDNN's graph for B=%d T=%d H=%d KV=%d hd=%d needs a %lld-byte workspace; the memory plan's "
             "'attention workspace (cudnn)' has %zu (hint: the bound of llmc/kernels/cudnn_attention.cpp's "
             "cudnn_att_workspace_bound is too small for this cuDNN: report both numbers and the cuDNN version; "
             "--cudnn-deterministic 0 needs less)", who, B, T, H, KV, hd, (long long)c.workspace, bytes);
}

void cudnn_att_forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q, const __nv_bfloat16* k,
                       const __nv_bfloat16* v, int B, int T, int H, int KV, int hd, int causal, void* workspace,
                       size_t workspace_bytes, cudaStream_t stream) {
    att_handle(stream);
    const CachedGraph& c = att_graph(B, T, H, KV, hd, causal, 0);
    att_check_workspace(c, workspace_bytes, "cudnn_att_forward", B, T, H, KV, hd);
    std::unordered_map<int64_t, void*> pack = {
        {UID_Q, (void*)q}, {UID_K, (void*)k}, {UID_V, (void*)v}, {UID_O, out}, {UID_STATS, lse}};
    feCheck(c.graph->execute(g_handle, pack, workspace), "misaligned or too small buffers? (16-byte aligned rows)");
}

void cudnn_att_backward(__nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, const __nv_bfloat16* dout,
                        const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                        const __nv_bfloat16* out, const float* lse, int B, int T, int H, int KV, int hd, int causal,
                        void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    att_handle(stream);
    const CachedGraph& c = att_graph(B, T, H, KV, hd, causal, 1);
    att_check_workspace(c, workspace_bytes, "cudnn_att_backward", B, T, H, KV, hd);
    std::unordered_map<int64_t, void*> pack = {
        {UID_Q, (void*)q},   {UID_K, (void*)k},       {UID_V, (void*)v},        {UID_O, (void*)out}, {UID_DO, (void*)dout},
        {UID_STATS, (void*)lse}, {UID_DQ, dq}, {UID_DK, dk}, {UID_DV, dv}};
    feCheck(c.graph->execute(g_handle, pack, workspace), "misaligned or too small buffers? (16-byte aligned rows)");
}
