// The Jinja chat-template engine as rinfer renders a model's template
// (rinfer::ChatTemplate: parse, then render with a small fixed context of
// messages, special tokens and add_generation_prompt). The input is the
// template source.
#include "fuzz_util.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ojson = nlohmann::ordered_json;
  static const ojson specials = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}};
  static const ojson messages = ojson::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi <b>there</b> 1+1?"},
    {"role": "assistant", "content": "2"},
    {"role": "user", "content": "caf\u00e9 \u4f60\u597d"}])");
  static const rinfer::ChatTemplateOptions opts = [] {
    rinfer::ChatTemplateOptions o;
    o.add_generation_prompt = true;
    o.extra = {{"enable_thinking", false}};
    return o;
  }();
  const std::string source(reinterpret_cast<const char*>(data), size);
  rinfer::fuzz::expect_rejections([&] {
    rinfer::ChatTemplate t(source, specials);
    t.render(messages, opts);
  });
  return 0;
}
