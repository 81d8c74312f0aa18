// Bad input through the CLI: every case exits 1 (2 for command-line usage
// errors) with exactly one "rinfer: error: ..." line on stderr, never a
// crash, and `convert` leaves nothing behind. Corrupt checkpoints are copies
// of stories260K/hf edited in temporary folders.
#include <tuple>

#include "cli_util.h"

namespace rinfer::test::cli {
namespace {

std::string run_stories(const std::string& extra) {
  return "run --model " + quote(stories_hf()) + " --threads 1 -n 2 " + extra;
}

// A writable copy of stories260K/hf in tmp/name.
fs::path stories_copy(const TempDir& tmp, const std::string& name = "ckpt") {
  return copy_checkpoint(stories_hf(), tmp.path / name);
}

// A copy whose model.safetensors header went through `edit`.
template <typename Fn>
fs::path with_header_edit(const TempDir& tmp, Fn edit) {
  const fs::path dir = stories_copy(tmp);
  Safetensors st = Safetensors::load(dir / "model.safetensors");
  edit(st.header);
  st.save(dir / "model.safetensors");
  return dir;
}

}  // namespace

// ------------------------------------------------------------ model folders

TEST(CliErrors, MissingModelDirectory) {
  TempDir tmp;
  const std::string missing = (tmp.path / "nope").string();
  expect_checkpoint_rejected(tmp, missing, "does not exist");
  expect_fails("bench --model " + quote(missing), "does not exist");
  // A path with a line break still gives one line.
  expect_fails("run --model " + quote((tmp.path / "two\nlines").string()) + " --prompt hi", "does not exist");
}

TEST(CliErrors, DirectoryWithoutConfigJson) {
  TempDir tmp;
  const fs::path dir = stories_copy(tmp);
  fs::remove(dir / "config.json");
  expect_checkpoint_rejected(tmp, dir, "config.json");
  const fs::path empty = tmp.path / "empty";
  fs::create_directory(empty);
  expect_checkpoint_rejected(tmp, empty, "config.json");
  // A file where a folder is expected.
  expect_fails("run --model " + quote((dir / "tokenizer.model").string()) + " --prompt hi", "directory");
}

TEST(CliErrors, MalformedConfigJson) {
  TempDir tmp;
  const fs::path dir = stories_copy(tmp);
  write_bytes(dir / "config.json", "{\"architectures\": [\"LlamaForCausalLM\"], garbage");
  expect_checkpoint_rejected(tmp, dir, "config.json is not valid JSON");
  write_bytes(dir / "config.json", std::string("\x00\x01\xff\n\n{", 6));
  expect_checkpoint_rejected(tmp, dir, "config.json is not valid JSON");
  write_bytes(dir / "config.json", "");
  expect_checkpoint_rejected(tmp, dir, "config.json is not valid JSON");
  write_bytes(dir / "config.json", "[1, 2]");
  expect_checkpoint_rejected(tmp, dir, "expected a JSON object");
}

TEST(CliErrors, ConfigJsonMissingKeys) {
  for (const char* key : {"hidden_size", "vocab_size", "num_hidden_layers", "intermediate_size"}) {
    TempDir tmp;
    const fs::path dir = stories_copy(tmp);
    edit_config(dir, [&](json& c) { c.erase(key); });
    expect_checkpoint_rejected(tmp, dir, std::string("missing required key \"") + key + "\"");
  }
  TempDir tmp;
  const fs::path dir = stories_copy(tmp);
  edit_config(dir, [](json& c) { c.erase("architectures"); });
  expect_checkpoint_rejected(tmp, dir, "\"architectures\"");
}

TEST(CliErrors, ConfigJsonWrongTypes) {
  struct Case {
    const char* key;
    json value;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"num_hidden_layers", "five", "\"num_hidden_layers\" must be an integer"},
      {"hidden_size", 64.5, "\"hidden_size\" must be an integer"},
      {"rms_norm_eps", "small", "\"rms_norm_eps\" must be a number"},
      {"tie_word_embeddings", "yes", "\"tie_word_embeddings\" must be true or false"},
      {"eos_token_id", "x", "\"eos_token_id\""},
      {"bos_token_id", 1000000000000LL, "\"bos_token_id\""},
      {"architectures", "LlamaForCausalLM", "\"architectures\""},
      {"rope_scaling", 2, "rope_scaling"},
      // Well-typed but impossible values.
      {"hidden_size", 0, "hidden_size must be positive"},
      {"num_attention_heads", 0, "num_attention_heads must be positive"},
      {"num_key_value_heads", 3, "multiple of num_key_value_heads"},
      {"head_dim", 9, "head_dim must be even"},
      {"hidden_act", "gelu", "hidden_act"},
      // A config that disagrees with the weights names the tensor, and
      // never turns into an absurd allocation ("out of memory"); an absurd
      // size is refused where config.json is read.
      {"vocab_size", 1000, "model.embed_tokens.weight"},
      {"vocab_size", 1000000000000LL, "\"vocab_size\" is out of range"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " = " + c.value.dump());
    TempDir tmp;
    const fs::path dir = stories_copy(tmp);
    edit_config(dir, [&](json& cfg) { cfg[c.key] = c.value; });
    expect_checkpoint_rejected(tmp, dir, c.needle);
  }
}

TEST(CliErrors, UnknownArchitectureListsSupportedOnes) {
  TempDir tmp;
  const fs::path dir = stories_copy(tmp);
  edit_config(dir, [](json& c) { c["architectures"] = {"GPTNeoXForCausalLM"}; });
  expect_checkpoint_rejected(tmp, dir, "GPTNeoXForCausalLM");
  const CmdResult r = expect_fails("run --model " + quote(dir.string()) + " --prompt hi", "LlamaForCausalLM");
  EXPECT_NE(r.err.find("Qwen2ForCausalLM"), std::string::npos) << r.err;
}

// ------------------------------------------------------------ safetensors

TEST(CliErrors, TruncatedSafetensors) {
  TempDir tmp;
  const fs::path dir = stories_copy(tmp);
  const std::string bytes = read_bytes(dir / "model.safetensors");
  write_bytes(dir / "model.safetensors", bytes.substr(0, bytes.size() / 2));
  expect_checkpoint_rejected(tmp, dir, "run past the end of file");
  // Cut inside the header, inside the length, and to nothing.
  write_bytes(dir / "model.safetensors", bytes.substr(0, 100));
  expect_checkpoint_rejected(tmp, dir, "truncated");
  write_bytes(dir / "model.safetensors", bytes.substr(0, 5));
  expect_checkpoint_rejected(tmp, dir, "shorter than the 8-byte header length");
  write_bytes(dir / "model.safetensors", "");
  expect_checkpoint_rejected(tmp, dir, "not a safetensors file");
}

// Bytes the header does not account for: appended to the file, or a header
// length a few bytes short (the JSON ends in padding, so it still parses,
// and every weight would be read shifted).
TEST(CliErrors, DataSectionNotTiledByTheHeader) {
  TempDir tmp;
  const fs::path dir = stories_copy(tmp);
  const std::string bytes = read_bytes(dir / "model.safetensors");
  write_bytes(dir / "model.safetensors", bytes + std::string(1, '\0'));
  expect_checkpoint_rejected(tmp, dir, "1 bytes after the last tensor's data");
  write_bytes(dir / "model.safetensors", bytes + std::string(4096, 'x'));
  expect_checkpoint_rejected(tmp, dir, "4096 bytes after the last tensor's data");
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | uint8_t(bytes[size_t(i)]);
  for (uint64_t shorter : {1, 2, 3}) {
    SCOPED_TRACE(shorter);
    std::string shifted = bytes;
    shifted.replace(0, 8, u64_le(hlen - shorter));
    write_bytes(dir / "model.safetensors", shifted);
    // Padding cut: the data section is `shorter` bytes longer than its tensors;
    // the JSON itself cut: not valid JSON. Either way, no model.
    const CmdResult r = run_rinfer("run --model " + quote(dir.string()) + " --prompt hi --max-new-tokens 1");
    EXPECT_NE(r.code, 0);
    EXPECT_TRUE(r.err.find(std::to_string(shorter) + " bytes after the last tensor's data") != std::string::npos ||
                r.err.find("not valid JSON") != std::string::npos)
        << r.err;
  }
}

// NaN and infinity in the weights: `run` warns naming the tensors, `validate`
// refuses the model.
TEST(CliErrors, NonFiniteWeights) {
  TempDir tmp;
  for (const auto& [name, bits] : {std::pair{"model.layers.0.mlp.up_proj.weight", 0x7FC00000u},
                                   {"model.layers.1.self_attn.o_proj.weight", 0xFF800000u}}) {
    SCOPED_TRACE(name);
    const fs::path dir = stories_copy(tmp, std::string("nan-") + name);
    Safetensors st = Safetensors::load(dir / "model.safetensors");
    const uint64_t begin = st.header[name]["data_offsets"][0].get<uint64_t>();
    for (int i = 0; i < 3; ++i) std::memcpy(st.data.data() + begin + 4 * (5 + i), &bits, 4);
    st.save(dir / "model.safetensors");
    // The NaNs then reach the logits: run stops there rather than sample from them.
    const CmdResult r = run_rinfer("run --model " + quote(dir.string()) + " --prompt hi --max-new-tokens 2");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("the model computed a non-finite logit"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(std::string("rinfer: warning: weights hold NaN or infinity: ") + name +
                         " (3 values, the first at element 5)"),
              std::string::npos)
        << r.err;
  }
  // validate: the golden llama with one infinity.
  const fs::path golden = tmp.path / "golden";
  fs::copy(golden_dir("llama"), golden, fs::copy_options::recursive);
  Safetensors st = Safetensors::load(golden / "hf" / "model.safetensors");
  const std::string name = "model.layers.0.mlp.down_proj.weight";
  ASSERT_TRUE(st.header.contains(name));
  const uint64_t begin = st.header[name]["data_offsets"][0].get<uint64_t>();
  const std::string dtype = st.header[name]["dtype"].get<std::string>();
  const uint32_t inf32 = 0x7F800000u;
  const uint16_t inf16 = dtype == "BF16" ? 0x7F80u : 0x7C00u;
  if (dtype == "F32")
    std::memcpy(st.data.data() + begin, &inf32, 4);
  else
    std::memcpy(st.data.data() + begin, &inf16, 2);
  st.save(golden / "hf" / "model.safetensors");
  const CmdResult v = run_rinfer("validate --golden " + quote(golden.string()));
  EXPECT_NE(v.code, 0);
  EXPECT_NE(v.err.find("weights hold NaN or infinity: " + name + " (1 values, the first at element 0)"),
            std::string::npos)
      << v.err;
}

// One nesting budget for every JSON file: a deep tokenizer.json (a
// normalizer Sequence 50,000 deep), config.json, tokenizer_config.json and
// model_desc-like files are one-line errors, not a stack overflow.
TEST(CliErrors, DeeplyNestedJsonFiles) {
  TempDir tmp;
  std::string seq;
  for (int i = 0; i < 50000; ++i) seq += "{\"type\":\"Sequence\",\"normalizers\":[";
  seq += "{\"type\":\"NFC\"}";
  for (int i = 0; i < 50000; ++i) seq += "]}";
  const fs::path tok = tmp.path / "tokenizer.json";
  write_bytes(tok, "{\"version\":\"1.0\",\"normalizer\":" + seq +
                       ",\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}");
  expect_fails("tokenize --tokenizer " + quote(tok.string()) + " --text hi", "nests deeper than 128 levels");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  {
    const fs::path dir = stories_copy(tmp, "cfg");
    write_bytes(dir / "config.json", "{\"architectures\":" + deep + "}");
    expect_fails("run --model " + quote(dir.string()) + " --prompt hi", "config.json nests deeper than 128 levels");
  }
  {
    const fs::path dir = stories_copy(tmp, "tokcfg");
    write_bytes(dir / "tokenizer_config.json", "{\"chat_template\":\"x\",\"extra\":" + deep + "}");
    expect_fails("run --model " + quote(dir.string()) + " --prompt hi --chat",
                 "tokenizer_config.json nests deeper than 128 levels");
  }
}

TEST(CliErrors, AbsurdHeaderLength) {
  TempDir tmp;
  const fs::path dir = stories_copy(tmp);
  std::string bytes = read_bytes(dir / "model.safetensors");
  for (uint64_t len : {uint64_t(0x7fffffffffffffffull), uint64_t(0xffffffffffffffffull), uint64_t(1) << 40}) {
    SCOPED_TRACE(len);
    bytes.replace(0, 8, u64_le(len));
    write_bytes(dir / "model.safetensors", bytes);
    expect_checkpoint_rejected(tmp, dir, "header length");
  }
}

TEST(CliErrors, GarbageHeader) {
  TempDir tmp;
  const fs::path dir = stories_copy(tmp);
  std::string bytes = read_bytes(dir / "model.safetensors");
  const std::string orig = bytes;
  bytes.replace(8, 16, "\x01\x02garbage\n\r\x7f{{{[[[");
  write_bytes(dir / "model.safetensors", bytes);
  expect_checkpoint_rejected(tmp, dir, "header is not valid JSON");
  // Valid JSON but not an object, and a header with a NUL byte.
  const std::string arr = "[1,2,3]";
  write_bytes(dir / "model.safetensors", u64_le(arr.size()) + arr);
  expect_checkpoint_rejected(tmp, dir, "not a JSON object");
  bytes = orig;
  bytes[20] = '\0';
  write_bytes(dir / "model.safetensors", bytes);
  expect_checkpoint_rejected(tmp, dir, "NUL");
}

TEST(CliErrors, TensorSpanPastEndOfFile) {
  TempDir tmp;
  Safetensors st = Safetensors::load(stories_hf() + "/model.safetensors");
  const uint64_t size = st.data.size();
  const fs::path dir = with_header_edit(tmp, [&](json& h) {
    auto& off = h["model.norm.weight"]["data_offsets"];
    const uint64_t n = off[1].get<uint64_t>() - off[0].get<uint64_t>();
    off = {size + 64 - n, size + 64};
  });
  expect_checkpoint_rejected(tmp, dir, "model.norm.weight");
  expect_fails("run --model " + quote(dir.string()) + " --prompt hi", "past the end of file");
}

TEST(CliErrors, SpanDisagreesWithShape) {
  TempDir tmp;
  const fs::path dir = with_header_edit(tmp, [](json& h) { h["model.norm.weight"]["shape"] = {65}; });
  expect_checkpoint_rejected(tmp, dir, "model.norm.weight");
}

TEST(CliErrors, UnknownDtype) {
  TempDir tmp;
  const fs::path dir = with_header_edit(tmp, [](json& h) { h["model.norm.weight"]["dtype"] = "Q4_K"; });
  expect_checkpoint_rejected(tmp, dir, "unknown dtype 'Q4_K'");
}

TEST(CliErrors, UnsupportedWeightDtype) {
  // A known safetensors dtype that is not a float type: named, not a crash.
  TempDir tmp;
  const fs::path dir =
      with_header_edit(tmp, [](json& h) { h["model.layers.0.mlp.up_proj.weight"]["dtype"] = "I32"; });
  expect_checkpoint_rejected(tmp, dir, "model.layers.0.mlp.up_proj.weight is stored as I32");
}

TEST(CliErrors, RequiredTensorMissing) {
  TempDir tmp;
  // Renamed, so that the data section stays tiled (a gap is an error of its own).
  const fs::path dir = with_header_edit(tmp, [](json& h) {
    h["model.layers.0.mlp.up_proj.weight_"] = h["model.layers.0.mlp.up_proj.weight"];
    h.erase("model.layers.0.mlp.up_proj.weight");
  });
  expect_checkpoint_rejected(tmp, dir, "missing tensor model.layers.0.mlp.up_proj.weight");
}

TEST(CliErrors, MisShapedTensor) {
  // [172, 64] stored as [64, 172]: same bytes, wrong shape.
  TempDir tmp;
  const fs::path dir =
      with_header_edit(tmp, [](json& h) { h["model.layers.1.mlp.up_proj.weight"]["shape"] = {64, 172}; });
  const CmdResult r = expect_fails("run --model " + quote(dir.string()) + " --prompt hi",
                                   "tensor model.layers.1.mlp.up_proj.weight has shape [64, 172]");
  EXPECT_NE(r.err.find("expected [172, 64]"), std::string::npos) << r.err;
  // Layer 1 fails after layer 0 was written: the temporary output goes too.
  expect_checkpoint_rejected(tmp, dir, "expected [172, 64]");
}

TEST(CliErrors, OnlyPytorchBin) {
  TempDir tmp;
  const fs::path dir = stories_copy(tmp);
  fs::remove(dir / "model.safetensors");
  write_bytes(dir / "pytorch_model.bin", "PK\x03\x04 not really a zip");
  expect_checkpoint_rejected(tmp, dir, "pytorch_model.bin");
  expect_fails("run --model " + quote(dir.string()) + " --prompt hi", "safetensors");
  fs::remove(dir / "pytorch_model.bin");
  expect_checkpoint_rejected(tmp, dir, "no *.safetensors files");
}

TEST(CliErrors, BrokenConvertedDirectory) {
  TempDir tmp;
  const fs::path m = tmp.path / "m";
  ASSERT_EQ(run_rinfer("convert --hf " + quote(stories_hf()) + " --out " + quote(m.string()) + " -q").code, 0);
  // Numbers in the config that no integer can hold (UB when read as one;
  // found by fuzzing) and a float where an integer belongs.
  const json desc = json::parse(read_bytes(m / "model_desc.json"));
  for (const auto& [key, value, needle] :
       {std::tuple<std::string, json, std::string>{"max_position_embeddings", 1e30, "max_position_embeddings is out of range"},
        {"n_layers", 5.0, "\"n_layers\" must be an integer"},
        {"family", json{{"moe", {{"n_experts", -1e300}}}}, "family.moe.n_experts is out of range"}}) {
    json d = desc;
    d["config"][key] = value;
    write_bytes(m / "model_desc.json", d.dump());
    expect_fails("run --model " + quote(m.string()) + " --prompt hi", needle);
  }
  write_bytes(m / "model_desc.json", desc.dump());
  fs::remove(m / "layer_004.safetensors");
  expect_fails("run --model " + quote(m.string()) + " --prompt hi", "layer_004.safetensors");
  write_bytes(m / "model_desc.json", "{}");
  expect_fails("run --model " + quote(m.string()) + " --prompt hi", "model_desc.json");
  fs::remove(m / "tokenizer.model");
  write_bytes(m / "model_desc.json", "{broken");
  expect_fails("run --model " + quote(m.string()) + " --prompt hi", "model_desc.json is not valid JSON");
}

TEST(CliErrors, MissingTokenizer) {
  TempDir tmp;
  const fs::path dir = stories_copy(tmp);
  fs::remove(dir / "tokenizer.model");
  expect_fails("run --model " + quote(dir.string()) + " --prompt hi --threads 1", "tokenizer.model");
}

// ------------------------------------------------------------ requests

TEST(CliErrors, PromptLongerThanContext) {
  // stories260K: 512 positions.
  std::vector<int32_t> ids(513, 300);
  ids[0] = 1;
  expect_fails(run_stories("--prompt-ids " + join_ids(ids)), "prompt of 513 tokens is longer than the context of 512");
  expect_fails(run_stories("--prompt 'Once upon a time' --max-model-len 3"),
               "prompt of 5 tokens is longer than the context of 3");
  // A KV cache smaller than the prompt (capacity rounds up to 16-token blocks).
  expect_fails(run_stories("--prompt-ids " + join_ids(std::vector<int32_t>(17, 300)) + " --kv-cache-tokens 16"),
               "longer than the context of 16");
}

TEST(CliErrors, TokenIdsOutsideVocabulary) {
  for (const char* ids : {"512", "1,99999", "1,2,3,2147483647"})
    expect_fails(run_stories(std::string("--prompt-ids ") + ids), "outside the vocabulary [0, 512)");
  expect_fails(run_stories("--prompt-ids 1,-1"), "out of range");
  expect_fails(run_stories("--prompt-ids 1,99999999999"), "out of range");
  expect_fails(run_stories("--prompt-ids 1,2x"), "expected comma-separated integers");
  expect_fails(run_stories("--prompt-ids abc"), "expected comma-separated integers");
  expect_fails(run_stories("--prompt-ids ''"), "no token ids");
  // An empty field is a typo, not a separator.
  for (const char* ids : {"1,,2", "1,2,", ",1", ",", "1, ,2"})
    expect_fails(run_stories(std::string("--prompt-ids '") + ids + "'"), "an empty id in");
}

TEST(CliErrors, InvalidUtf8Prompt) {
  // Raw bytes through the shell, as $'\xff\xfe' would pass them.
  for (const std::string& bad : {std::string("\xff\xfe"), std::string("Once \xc3("), std::string("\xc0\xaf"),
                                std::string("ok \x80"), std::string("\xed\xa0\x80")}) {
    SCOPED_TRACE(bad);
    expect_fails(run_stories("--prompt " + quote(bad)), "not valid UTF-8");
  }
}

TEST(CliErrors, BadOptionValues) {
  struct Case {
    std::string args, needle;
  };
  const std::vector<Case> cases = {
      {"--prompt hi --max-new-tokens -1", "--max-new-tokens"},
      {"--prompt hi --max-new-tokens 1.5", "--max-new-tokens"},
      {"--prompt hi --temperature abc", "--temperature"},
      {"--prompt hi --temperature -0.5", "--temperature"},
      {"--prompt hi --temperature nan", "--temperature"},
      {"--prompt hi -t 1e308", "must be at most 3.40282e+38, got \"1e308\""},
      {"--prompt hi --top-p 2", "--top-p"},
      {"--prompt hi --top-p 0", "--top-p"},
      {"--prompt hi --top-k -1", "--top-k"},
      {"--prompt hi --repetition-penalty 0", "--repetition-penalty"},
      {"--prompt hi --seed -5", "--seed"},
      {"--prompt hi --seed 99999999999999999999999", "--seed"},
      {"--prompt hi --threads -3", "--threads"},
      {"--prompt hi --threads 100000", "--threads"},
      {"--prompt hi --kv-cache-tokens x", "--kv-cache-tokens"},
      {"--prompt hi --block-size 0", "--block-size"},
      {"--prompt hi --max-model-len -2", "--max-model-len"},
      {"--prompt hi --dtype f8", "--dtype"},
      {"--prompt hi --weights somewhere", "--weights"},
      {"--prompt hi --kv-cache-dtype q4", "--kv-cache-dtype"},
      {"--prompt hi --no-such-option", "--no-such-option"},
      {"--prompt hi --prompt-ids 1", "--prompt"},
      {"--prompt", "--prompt"},
  };
  for (const auto& c : cases) {
    const CmdResult r = expect_fails(run_stories(c.args), c.needle);
    EXPECT_EQ(r.code, 2) << "usage errors exit 2: " << c.args;
    EXPECT_EQ(r.err.find("179769313486231570814527423731704356798070567525844996598917476803157260780028538760"),
              std::string::npos)
        << r.err;
  }
  // Negative numbers say what is wanted rather than a 300-digit bound.
  const CmdResult r = expect_fails(run_stories("--prompt hi --max-new-tokens -1"), "must be an integer >= 0");
  EXPECT_NE(r.err.find("\"-1\""), std::string::npos) << r.err;
  expect_fails(run_stories("--prompt hi --temperature abc"), "must be a number >= 0, got \"abc\"");
  expect_fails(run_stories("--prompt hi --top-p 2"), "in (0, 1]");
}

TEST(CliErrors, UsageErrors) {
  for (const std::string args : {"", "bogus --model x", "run", "convert --hf x", "validate", "bench"}) {
    SCOPED_TRACE(args);
    const CmdResult r = run_rinfer(args);
    expect_error(r, "", "rinfer " + args);
    EXPECT_EQ(r.code, 2);
  }
  expect_fails("bogus", "unknown command \"bogus\"");
  expect_fails("run --prompt hi", "--model is required");
  // --help and --version still work and exit 0.
  for (const std::string args : {"--help", "--version", "run --help", "convert --help", "bench --help"}) {
    const CmdResult r = run_rinfer(args);
    EXPECT_EQ(r.code, 0) << args << ": " << r.err;
    EXPECT_FALSE(r.out.empty()) << args;
  }
}

// ------------------------------------------------------------ outputs

TEST(CliErrors, ConvertOntoExistingOutIsRefused) {
  TempDir tmp;
  const fs::path out = tmp.path / "existing";
  fs::create_directory(out);
  write_bytes(out / "keep.txt", "precious");
  expect_fails("convert --hf " + quote(stories_hf()) + " --out " + quote(out.string()) + " -q", "already exists");
  expect_fails("convert --hf " + quote(stories_hf()) + " --out " + quote(out.string() + "/") + " -q",
               "already exists");
  // Untouched: the same single file with the same bytes, no siblings.
  std::vector<fs::path> entries(fs::directory_iterator(out), fs::directory_iterator{});
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(read_bytes(out / "keep.txt"), "precious");
  EXPECT_TRUE(tmp_leftovers(tmp.path).empty());
  // An existing file is refused the same way.
  write_bytes(tmp.path / "file", "x");
  expect_fails("convert --hf " + quote(stories_hf()) + " --out " + quote((tmp.path / "file").string()),
               "already exists");
  EXPECT_EQ(read_bytes(tmp.path / "file"), "x");
}

TEST(CliErrors, ConvertIntoMissingParent) {
  TempDir tmp;
  const fs::path out = tmp.path / "no" / "such" / "m";
  expect_fails("convert --hf " + quote(stories_hf()) + " --out " + quote(out.string()), "does not exist");
  EXPECT_FALSE(fs::exists(tmp.path / "no"));
  expect_fails("convert --hf " + quote(stories_hf()) + " --out ''", "--out");
}

TEST(CliErrors, ConvertBadDtype) {
  TempDir tmp;
  const fs::path out = tmp.path / "m";
  const CmdResult r = expect_fails(
      "convert --hf " + quote(stories_hf()) + " --out " + quote(out.string()) + " --dtype q4", "--dtype");
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace rinfer::test::cli
