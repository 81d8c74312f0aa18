#pragma once
// GGUF (llama.cpp's model file, version 3) writer: metadata key/values,
// tensor infos, then the tensor data, each tensor 32-byte aligned.
//   u32 "GGUF", u32 3, u64 n_tensors, u64 n_kv,
//   n_kv x (string key, u32 type, value), n_tensors x (string name, u32 n_dims,
//   u64 ne[n_dims] (ne[0] varies fastest: a [rows, cols] matrix is ne = {cols,
//   rows}), u32 ggml type, u64 offset into the data section), padding, data.
// Tensor bytes are produced at write() time, one tensor at a time, so a
// writer holds at most one tensor in memory (streamed conversion). The file
// goes to a temporary name and is renamed when complete.
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace rinfer::io {

// The ggml tensor types the writer can encode.
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8 };

// Bytes of n values of type t; n must be a multiple of the type's block
// (32 for Q4_0 / Q8_0: gguf_row_multiple).
uint64_t gguf_bytes(GgmlType t, int64_t n);
int64_t gguf_row_multiple(GgmlType t);
const char* gguf_type_name(GgmlType t);

// ggml's block formats (ggml-quants reference encoders): 32 values per block.
//   Q8_0: f16 d = max|x| / 127, then 32 x int8 round(x / d).
//   Q4_0: f16 d = x_m / -8 (x_m: the value of largest magnitude, signed),
//         then 16 bytes: byte j = q(x[j]) | q(x[j + 16]) << 4,
//         q(x) = min(15, int(x / d + 8.5)); value = (q - 8) d.
// n: a multiple of 32.
void encode_q8_0(const float* x, int64_t n, uint8_t* dst);
void encode_q4_0(const float* x, int64_t n, uint8_t* dst);
// Any type from f32 (F16: round to nearest even).
void gguf_encode(GgmlType t, const float* x, int64_t n, uint8_t* dst);

class GgufWriter {
 public:
  // Metadata; a key may be set once (a second set throws).
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_str(const std::string& key, const std::string& v);
  void set_str_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);

  // A tensor of shape ne (ne[0] fastest); fill(dst) writes its
  // gguf_bytes(type, numel) bytes when write() reaches it.
  using Fill = std::function<void(uint8_t* dst)>;
  void add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne, Fill fill);

  uint64_t data_bytes() const;  // tensor data, without padding
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t bytes;
    Fill fill;
  };
  void key(const std::string& k, uint32_t type);
  std::string kv_;  // serialized key/value pairs
  uint64_t n_kv_ = 0;
  std::set<std::string> keys_;
  std::vector<Tensor> tensors_;
  std::set<std::string> names_;
};

}  // namespace rinfer::io
