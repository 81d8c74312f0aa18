#pragma once
// CPU math kernels: the only place in rinfer that does SIMD. Each op has a
// plain scalar reference (reference.cpp) and faster AVX2 / AVX-512 versions
// chosen at run time from the CPU's features. Kernels know shapes and dtypes,
// never which model calls them.
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/paged_kv.h"
#include "core/quantized_weight.h"
#include "core/rope_style.h"
#include "core/thread_pool.h"

namespace rinfer::kernels::cpu {

enum class Isa { Scalar, Avx2, Avx512 };
const char* isa_name(Isa isa);
Isa best_isa();             // what this CPU supports
Isa active_isa();           // what the ops below use (best_isa() unless forced or RINFER_ISA=scalar|avx2|avxvnni|avx512)
void force_isa(Isa isa);    // tests and benchmarks: pin an implementation

// AVX-VNNI at the AVX2 level: vpdpbusd on ymm registers, which CPUs without
// AVX-512 have from Intel Alder Lake on (AMD Zen 5 has it too). The W8A8 /
// W4A8 prefill GEMM uses it; without it the AVX2 level runs W4A8 with
// vpmaddubsw and dequantizes Q8 weights to f32 for prefill. Active where
// active_isa() is Avx2 and the CPU has it, unless RINFER_ISA=avx2 (plain
// AVX2, as on Haswell to Comet Lake or Zen 1 to 3) or force_avx_vnni(0);
// RINFER_ISA=avxvnni asks for it (a CPU without AVX-VNNI runs plain AVX2).
bool avx_vnni_active();
void force_avx_vnni(int on);  // tests: 1 on (where the CPU has it), 0 off, -1 as the CPU has it
const char* active_level_name();  // what runs, as RINFER_ISA spells it: scalar, avx2, avxvnni or avx512

// y[m, n] = sum_k x[m, k] * W[n, k] + bias[n]
//   x: f32, M rows of K values, row stride ldx (elements)
//   W: N rows of K values of dtype wdt (F32, F16 or BF16), contiguous
//   bias: N floats or nullptr
//   y: f32, M rows, row stride ldy (elements)
// Work is split over the pool's threads.
void matmul(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, DType wdt, int64_t N,
            const float* bias, float* y, int64_t ldy, ThreadPool& pool);

// Multiply-adds done by matmul, matmul_bf16_blocked and matmul_q (M x N x K
// per call, all threads) since the last reset: how `rinfer bench` turns the
// prefill time into achieved FLOP/s without a per-model formula (MoE routing
// decides how many expert rows a prompt really multiplies).
uint64_t matmul_macs();
void reset_matmul_macs();

// BF16 weights in the blocked layout that decode streams best:
//   [N/8][K/32][8 rows][32 k], i.e. W[n, k] at element
//   ((n / 8) * (K / 32) + k / 32) * 256 + (n % 8) * 32 + k % 32,
// so the GEMV reads the whole matrix as one sequential stream (row-major W is
// read as several row streams at once, which the prefetchers serve at only
// 0.6-0.7 of the bandwidth). Needs N % 8 == 0 and K % 32 == 0
// (bf16_blockable); the converter stores BF16 projection matrices this way.
// Same arguments and results as matmul() on the row-major matrix (the GEMM
// regime follows set_bf16_gemm as well).
bool bf16_blockable(int64_t N, int64_t K);
void block_bf16(const uint16_t* rows, int64_t N, int64_t K, uint16_t* blocked);    // row-major -> blocked
void unblock_bf16(const uint16_t* blocked, int64_t N, int64_t K, uint16_t* rows);  // blocked -> row-major
void matmul_bf16_blocked(const float* x, int64_t M, int64_t K, int64_t ldx, const uint16_t* w, int64_t N,
                         const float* bias, float* y, int64_t ldy, ThreadPool& pool);
// Several blocked BF16 matrices of one input (a layer's q/k/v, gate/up):
// outs[i].y = x W_i^T + b_i, each exactly matmul_bf16_blocked's result, as
// one job: at decode (AVX-512 and AVX2) x is reordered once and the 8-row
// blocks of all the matrices are one sequence split over the threads; at
// prefill (AVX-512) x is packed once and the tasks of all the matrices run in
// one pool job. At most kMatmulQMultiMax matrices; otherwise one call each.
struct Bf16BlockedOut {
  const uint16_t* w;  // [N/8][K/32][8][32]
  int64_t N;
  const float* bias;  // [N] or null
  float* y;
  int64_t ldy;
};
void matmul_bf16_blocked_multi(const float* x, int64_t M, int64_t K, int64_t ldx, const Bf16BlockedOut* outs, int n,
                               ThreadPool& pool);

// BF16 weights in the prefill GEMM (M > 8 rows; decode GEMVs always keep x
// f32): F32Fma widens W to f32 in registers (x stays f32); Bf16Dot rounds each
// x value to BF16 (relative error <= 2^-9) and multiplies with vdpbf16ps
// (AVX-512 BF16; products exact, f32 accumulation). Auto takes whichever has
// the higher peak on this CPU class: Bf16Dot on AMD (Zen 4 and later:
// vdpbf16ps at twice the fp32 FMA rate), F32Fma on Intel (vdpbf16ps at half
// the FMA rate). The environment variable RINFER_BF16_GEMM=fma|dot overrides
// Auto. Bf16Dot without AVX-512 BF16 falls back to F32Fma.
enum class Bf16Gemm : uint8_t { Auto, F32Fma, Bf16Dot };
void set_bf16_gemm(Bf16Gemm mode);  // process-wide
bool bf16_gemm_uses_dot();          // what the BF16 GEMM does now on the active ISA
// What matmul does for M rows of a wdt weight: "f32-gemv", "bf16-gemv",
// "bf16-dot-gemm", "bf16-fma-gemm", "f16-fma-gemm", ... (scalar: "...-scalar").
const char* matmul_path(int64_t M, DType wdt);
// The same for BF16 weights in the blocked layout: "bf16-gemv-blocked" at
// decode, "bf16-dot-blocked" for batched decode (up to 64 rows, vdpbf16ps on
// the layout as stored), then the packed GEMM's.
const char* matmul_bf16_blocked_path(int64_t M);

// y = x / sqrt(mean(x^2) + eps) * weight, one row of n values (y may alias x).
void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y);

using RopeStyle = rinfer::RopeStyle;  // core/rope_style.h
// Rotate, in place, the first rot_dim values of each of n_heads heads of
// head_dim values (stride head_dim) by angle pos * inv_freq[i], i < rot_dim/2;
// cos and sin are multiplied by mscale (1 except for YaRN).
void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, const float* inv_freq,
          RopeStyle style, float mscale);
// rope() in two steps, for callers that rotate several vectors at one
// position (a token's q and k in every layer: a forward pass takes each
// token's angles once, RotaryEmbedding::angles). rope_angles gives the cos
// and sin that rope applies at pos, i < rot_dim / 2 (libm, as rope):
//   cs[i] = cos(pos * inv_freq[i]) * mscale, cs[rot_dim / 2 + i] = sin(...) * mscale;
// rope_with_angles rotates with them: rope()'s values bit for bit.
void rope_angles(int64_t pos, const float* inv_freq, int rot_dim, float mscale, float* cs);
void rope_with_angles(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, RopeStyle style);

// out[i] = silu(gate[i]) * up[i]   (out may alias gate or up)
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);
// y[i] = fma(a, x[i], y[i]), one rounding (each element on its own, so every
// ISA gives the same bits).
void axpy(float* y, float a, const float* x, int64_t n);
// x = softmax(x), numerically stable, in place.
void softmax(float* x, int64_t n);
// probs = softmax((logits - max) / temperature) (temperature > 0; the same
// distribution as softmax(logits / T), without overflow for any T):
// sampling's distribution, the division vectorized with the rest.
void softmax_tempered(const float* logits, int64_t n, float temperature, float* probs);
// The index of the first largest x[i], as the loop `if (x[i] > x[best]) best
// = i` from best = 0 gives it: NaNs never win, and x[0] NaN gives 0. Greedy
// sampling over a vocabulary of 150k logits takes this every decode step.
// n >= 1, n < 2^31.
int64_t argmax(const float* x, int64_t n);

// PagedKV (core/paged_kv.h): the paged KV cache of one layer, as attention reads it.
using rinfer::PagedKV;

// One query head attending over the first n_ctx cached positions of a sequence
// (reference::attention_head is the definition every kernel is tested against; on AVX-512 this is one row of
// attention_rows, so callers with several heads should use that):
//   out = softmax(scale * q . K[0..n_ctx) + alibi_slope * (j - (n_ctx - 1))) V
// q and out are head_dim floats; kv_head selects the K/V head (GQA mapping is
// the caller's); scratch holds at least n_ctx floats. alibi_slope = 0 for none.
void attention_head(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    int64_t n_ctx, float scale, float alibi_slope, float* out, float* scratch);

// One query row of attention_rows: q and out are head_dim floats; the row
// attends to positions [0, n_ctx) (n_ctx = 0: out is zero).
struct AttnRow {
  const float* q;
  float* out;
  int64_t n_ctx;
  float alibi_slope;
};
// Several query rows that read the same K/V head of one sequence: the query
// heads of a GQA group, and for a prompt several of its tokens (causal: each
// row with its own n_ctx). Each row's result is attention_head's, but every
// cache block is read and converted once for all rows instead of once per
// row (decode on TinyLlama reads each K/V block for 8 query heads). Scratch
// is the calling thread's own (grow-only, n_rows * max n_ctx floats).
void attention_rows(const AttnRow* rows, int n_rows, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    float scale);

// Decode attention on a BF16 cache (attention_rows' row path: fewer than 12
// rows, i.e. one token's GQA group of heads, and attention_head): F32
// widens the cached K and V to f32 and multiplies with f32 FMAs; Bf16Dot
// multiplies them as stored with vdpbf16ps (AVX-512 BF16), q and the
// softmax probabilities each entering as the sum of two BF16 numbers
// (|x - hi - lo| <= 2^-18 |x|), so the results stay within f32-level
// bounds of the reference (tests/kernels/test_ops.cpp) and the golden
// logits do not move, with no widening of the cache and fewer loads. Auto
// (default) takes Bf16Dot wherever the CPU has AVX-512 BF16;
// RINFER_BF16_ATTN=dot|f32 overrides Auto. Prompts (12 rows or more per K/V
// head: rows in lanes) keep f32.
enum class Bf16Attention : uint8_t { Auto, F32, Bf16Dot };
void set_bf16_attention(Bf16Attention mode);  // process-wide
// Whether the row path takes BF16 dot products on a cache of this dtype and
// head_dim now (BF16, head_dim % 32 == 0 and <= 256, AVX-512 BF16 active).
bool attention_uses_bf16_dot(DType kv_dtype, int head_dim);

// Write one token's K and V (n_kv_heads * head_dim floats each) into slot
// `slot` (block * block_size + offset) of the cache, converting to its dtype
// (I8: quantizing each head and writing its scale, see PagedKV).
void store_kv(const PagedKV& kv, int64_t slot, const float* k, const float* v);


// ================================================================= quantized weights
// Symmetric per-group quantization of a weight matrix W[N][K] (y = x W^T):
// every run of group_size consecutive k of a row shares one scale s, and
//   W[n, k] ~= s[n, k / group_size] * q[n, k],
//   q in [-127, 127] (Q8, s = max|w| / 127) or [-7, 7] (Q4, s = max|w| / 7).
// Quantization error: |W - s q| <= s / 2 per element (tested).
//
// Packed layout (repacked for the kernels; produced by quantize_weights):
// rows are taken in blocks of 16 (N is padded to Np = round_up(N, 16); the
// padding rows have q = 0 and scale 0). q is stored unsigned, u = q + offset
// with offset 128 (Q8) or 8 (Q4): a fixed zero point (see `zeros`).
//  - Q8 data: [Np/16][K/4][16 rows][4 k] bytes, i.e. byte
//        (n/16) * 16K + (k/4) * 64 + (n%16) * 4 + k%4
//    (one 64-byte line = 16 rows x 4 consecutive k: one VNNI operand).
//  - Q4 data: [Np/16][K/8][16 rows][4 k] bytes of two nibbles, i.e. byte
//        (n/16) * 8K + (k/8) * 64 + (n%16) * 4 + k%4
//    low nibble for k % 8 < 4, high nibble for k % 8 >= 4.
//  - scales: [Np/16][K/group_size][16 rows] of scale_dtype (F16 or F32).
// Interleaved variant (`interleaved`, made by interleave_quant_scales): the
// scales live inside `data`. Each 16-row block is a run of chunks, one
// 64-byte line holding the 16 scales of the next 2 groups (F16; the second
// half zero when a block's last chunk has one group) or of the next group
// (F32), followed by those groups' data lines as above; blocks follow one
// another (quant_interleaved_bytes). A decode GEMV then streams one run of
// lines per block instead of a data run and a scale run. quant_layout.h
// addresses both layouts.
// Requirements: group_size in {32, 64, 128}, K % group_size == 0, data and
// scales 64-byte aligned for best speed (any alignment works).
using rinfer::QuantType;  // core/quantized_weight.h
const char* quant_type_name(QuantType t);  // "q8" / "q4"

using rinfer::QuantizedWeight;  // core/quantized_weight.h

bool quant_group_size_supported(int64_t group_size);  // 32, 64 or 128
int64_t quant_padded_rows(int64_t N);                  // round_up(N, 16)
size_t quant_data_bytes(QuantType type, int64_t N, int64_t K);
size_t quant_scale_bytes(int64_t N, int64_t K, int64_t group_size, DType scale_dtype);
// Bytes of w in its layout: data + scales, or the interleaved data.
size_t quant_weight_bytes(const QuantizedWeight& w);
size_t quant_interleaved_bytes(QuantType type, int64_t N, int64_t K, int64_t group_size, DType scale_dtype);
// Write w (separate layout) into `out` (quant_interleaved_bytes) in the
// interleaved layout; returns the view of it (out, interleaved = true). The
// same values: every kernel gives the same bits on either.
QuantizedWeight interleave_quant_scales(const QuantizedWeight& w, void* out);
// Fails (rinfer::Error naming the problem) on an unsupported group size, K not
// a multiple of it, a scale dtype other than F16/F32 or N, K <= 0.
void check_quant_shape(QuantType type, int64_t N, int64_t K, int64_t group_size, DType scale_dtype);

// Quantize N rows of K floats (row stride ldw elements) into caller-owned
// `data` / `scales` buffers of the sizes above, in the packed layout. F16
// scales are rounded up when needed so that no value clips; weights must be
// finite (fails otherwise). Deterministic: the result does not depend on the
// thread count, and equals reference::quantize_weights bit for bit.
void quantize_weights(const float* w, int64_t N, int64_t K, int64_t ldw, QuantType type, int64_t group_size,
                      DType scale_dtype, void* data, void* scales, ThreadPool& pool);
// out[n * K + k] = s * q (N x K floats): the weights the kernels multiply by.
void dequantize_weights(const QuantizedWeight& w, float* out);

// y[m, n] = sum_k x[m, k] * Wq[n, k] + bias[n], arguments as matmul().
// Two regimes (see matmul_q_path):
//  - decode, M <= quant_gemv_max_m(): a GEMV that streams W once, either
//    weight-only ("W8A16"/"W4A16": x stays f32, weights dequantized in
//    registers, f32 accumulation, group scales applied once per group) or, on
//    AVX-512 VNNI (vpdpbusd) and on AVX2 (vpmaddubsw + vpmaddwd), with x
//    quantized to int8 per (row, group) (ActQuant::PerGroup) and integer dot
//    products. set_quant_decode picks; Auto (default) takes int8 activations
//    wherever one of those runs (not on AVX-512 without VNNI): it needs fewer
//    instructions per weight byte, so it is never slower where the GEMV is
//    memory-bound and faster where it is not.
//  - prefill, larger M: W8A8 / W4A8: each x row is quantized to int8 with one
//    scale per row (ActQuant::PerRow, quantize_row_i8), integer dot products
//    per group (vpdpbusd: AVX-512 VNNI on zmm, AVX-VNNI on ymm; plain AVX2
//    vpmaddubsw on Q4 weights), then scaled and summed in f32: the same bits
//    on all three. Otherwise (Q8 on plain AVX2, AVX-512 without VNNI) the
//    weights are dequantized to f32 panels and a f32 GEMM is used instead
//    (activations stay f32).
void matmul_q(const float* x, int64_t M, int64_t K, int64_t ldx, const QuantizedWeight& w, const float* bias, float* y,
              int64_t ldy, ThreadPool& pool);
int64_t quant_gemv_max_m();  // 4

// matmul_q of one x by several weights (a layer's q/k/v or gate/up): the same
// results as one matmul_q per weight. On the int8-activation decode GEMV
// (AVX-512 and AVX2) and the int8 prefill GEMMs (weights of one type and group
// size, n <= kMatmulQMultiMax) x is quantized (and packed) once and every weight's
// tasks run as one pool job: one barrier per group of matrices instead of
// one per matrix. Otherwise one matmul_q each.
struct QMatmulOut {
  const QuantizedWeight* w;
  const float* bias;  // [w->N] or null
  float* y;
  int64_t ldy;
};
constexpr int kMatmulQMultiMax = 4;
void matmul_q_multi(const float* x, int64_t M, int64_t K, int64_t ldx, const QMatmulOut* outs, int n,
                    ThreadPool& pool);

// The gated MLP's first half: gate.y = silu(x Wg^T + bg) * (x Wu^T + bu), both
// weights N x K of one quant type and group size. On the VNNI prefill GEMM
// one micro tile computes 16 outputs of the gate and the same 16 of up and
// stores only their product, so up's M x N never goes through memory;
// elsewhere matmul_q_multi writes both (up into up.y, scratch) and silu_mul
// forms the product in gate.y. The same bits either way.
void matmul_q_gate_up_silu(const float* x, int64_t M, int64_t K, int64_t ldx, const QMatmulOut& gate,
                           const QMatmulOut& up, ThreadPool& pool);

enum class QuantDecode : uint8_t { Auto, WeightOnly, Int8Activations };
void set_quant_decode(QuantDecode mode);  // process-wide; Int8Activations needs VNNI or AVX2 (else weight-only)
QuantDecode quant_decode();

// How a path treats x: None (f32 as is), PerRow (quantize_row_i8 on each
// row), PerGroup (quantize_row_i8 on each group_size run of each row).
enum class ActQuant : uint8_t { None, PerRow, PerGroup };
// What matmul_q does for M rows on the active ISA: "w8a16-gemv", "w4a16-gemv"
// (weight-only; activations f32), "w8a8-vnni-gemv", "w4a8-vnni-gemv",
// "w8a8-avx2-gemv", "w4a8-avx2-gemv" (int8 activations), "w8a8-vnni-gemm",
// "w4a8-vnni-gemm" (AVX-512 VNNI), "w8a8-avxvnni-gemm", "w4a8-avxvnni-gemm"
// (AVX2 level with AVX-VNNI), "w8a8-avx2-gemm", "w4a8-avx2-gemm" (plain
// AVX2: vpmaddubsw), "w8a16-dequant-gemm", "w4a16-dequant-gemm" (AVX-512
// without VNNI: no int8 GEMM), "w8a16-scalar", "w4a16-scalar".
const char* matmul_q_path(int64_t M, const QuantizedWeight& w);
ActQuant matmul_q_activation_quant(int64_t M, const QuantizedWeight& w);

// Dynamic per-row activation quantization used by the W8A8 paths:
//   amax = max |x|, q[k] = round_half_even(clamp(x[k] * (127 / amax), -127, 127)),
//   *scale = amax / 127 (0 and q = 0 when amax = 0; NaN maps to -127).
void quantize_row_i8(const float* x, int64_t n, int8_t* q, float* scale);

namespace reference {
// The scalar implementations: the definition every SIMD variant is tested against.
void matmul(const float* x, int64_t M, int64_t K, int64_t ldx, const void* w, DType wdt, int64_t N,
            const float* bias, float* y, int64_t ldy);
void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* y);
void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, const float* inv_freq,
          RopeStyle style, float mscale);
void rope_angles(int64_t pos, const float* inv_freq, int rot_dim, float mscale, float* cs);
void rope_with_angles(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, RopeStyle style);
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
void add_inplace(float* y, const float* x, int64_t n);
void axpy(float* y, float a, const float* x, int64_t n);
void softmax(float* x, int64_t n);
void softmax_tempered(const float* logits, int64_t n, float temperature, float* probs);
int64_t argmax(const float* x, int64_t n);
void attention_head(const float* q, const PagedKV& kv, int kv_head, const int32_t* block_table,
                    int64_t n_ctx, float scale, float alibi_slope, float* out, float* scratch);
void store_kv(const PagedKV& kv, int64_t slot, const float* k, const float* v);
void quantize_weights(const float* w, int64_t N, int64_t K, int64_t ldw, QuantType type, int64_t group_size,
                      DType scale_dtype, void* data, void* scales);
void quantize_row_i8(const float* x, int64_t n, int8_t* q, float* scale);
// Quantized matmul in double precision on the dequantized weights, x first
// quantized as `act` says (the definition each path is tested against).
void matmul_q(const float* x, int64_t M, int64_t K, int64_t ldx, const QuantizedWeight& w, const float* bias, float* y,
              int64_t ldy, ActQuant act);
}  // namespace reference

}  // namespace rinfer::kernels::cpu
