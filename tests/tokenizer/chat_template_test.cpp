// Chat templates against transformers' apply_chat_template renderings
// (../shared/testdata/tokenizer/hf/<family>/chat_cases.jsonl), byte for
// byte, plus the Jinja features and errors real templates hit.
#include <gtest/gtest.h>

#include <fstream>

#include "tokenizer/chat_template.h"
#include "tokenizer_test_util.h"

namespace rinfer {
namespace {

using ojson = nlohmann::ordered_json;

class ChatCases : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatCases, RendersLikeTransformers) {
  const auto dir = test::testdata("tokenizer/hf/" + GetParam());
  EXPECT_EQ(test::expect_chat_cases(ChatTemplate::load(dir), GetParam()), 8);
}

INSTANTIATE_TEST_SUITE_P(Families, ChatCases, ::testing::Values("llama3", "qwen3", "deepseek_v3"));

std::string render(const std::string& src, const ojson& messages = ojson::array(), ChatTemplateOptions opt = {}) {
  return ChatTemplate(src, ojson{{"bos_token", "<s>"}}).render(messages, opt);
}

TEST(Jinja, WhitespaceControl) {
  // trim_blocks + lstrip_blocks, as transformers sets them.
  EXPECT_EQ(render("{% if true %}\n  a\n{% endif %}\nb"), "  a\nb");
  EXPECT_EQ(render("x  {% if true %}y{% endif %}"), "x  y");
  EXPECT_EQ(render("  {% if true %}y{% endif %}"), "y");
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("{# note #}\nz"), "z");
}

TEST(Jinja, ExpressionsAndFilters) {
  const ojson msgs = ojson::parse(R"([{"role": "user", "content": " Hi "}, {"role": "assistant", "content": "Yo"}])");
  EXPECT_EQ(render("{{ messages|length }}|{{ messages[0].content|trim }}|{{ messages[-1]['role'] }}", msgs),
            "2|Hi|assistant");
  EXPECT_EQ(render("{% for m in messages %}{{ loop.index }}{{ m.role[0]|upper }}{% if not loop.last %},{% endif %}"
                   "{% endfor %}",
                   msgs),
            "1U,2A");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}"
                   "{{ ns.n }}",
                   msgs),
            "2");
  EXPECT_EQ(render("{{ [1, 2.5, none, true, 'a'] }}"), "[1, 2.5, None, True, 'a']");
  EXPECT_EQ(render("{{ {'a': [1, 2], 'b': 'x'}|tojson }}"), R"({"a": [1, 2], "b": "x"})");
  EXPECT_EQ(render("{{ 'a<think>b'.split('<think>')[-1] }}{{ '  x\n'.strip() }}{{ 'abc'[::-1] }}"), "bxcba");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 1 / 2 }} {{ 'a' ~ 1 }}"), "3 -4 1 0.5 a1");
  EXPECT_EQ(render("{{ x is defined }}{{ x|default('d') }}{{ none is none }}"), "FalsedTrue");
  EXPECT_EQ(render("{% for m in messages if m.role == 'user' %}{{ m.role }}{% endfor %}", msgs), "user");
  EXPECT_EQ(render("{{ messages|selectattr('role', 'equalto', 'assistant')|map(attribute='content')|join(',') }}", msgs),
            "Yo");
  EXPECT_EQ(render("{% macro f(x, y='!') %}<{{ x }}{{ y }}>{% endmacro %}{{ f('a') }}{{ f('b', y='?') }}"), "<a!><b?>");
  EXPECT_EQ(render("{% for i in range(3) %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}"), "02");
  EXPECT_EQ(render("{% set x %}in{{ bos_token }}{% endset %}{{ x }}"), "in<s>");
  // Message content is data, never evaluated.
  EXPECT_EQ(render("{{ messages[0].content }}", ojson::parse(R"([{"role": "user", "content": "{{ 1 }}"}])")),
            "{{ 1 }}");
}

TEST(Jinja, Errors) {
  test::expect_error([] { render("{% include 'x' %}"); }, "unsupported tag \"include\"");
  test::expect_error([] { render("{{ x | frobnicate }}"); }, "unsupported filter \"frobnicate\"");
  test::expect_error([] { render("{% if true %}x"); }, "missing '{% endif %}'");
  test::expect_error([] { render("{{ raise_exception('Only user and assistant roles') }}"); },
                     "raise_exception: Only user and assistant roles");
  test::expect_error([] { render("{{ 'a' + 1 }}"); }, "unsupported operand types");
  test::expect_error([] { render("{{ 'unterminated }}"); }, "unterminated string");
  // An empty subscript (found by fuzzing: it reached the interpreter as a
  // null expression); an empty slice is fine.
  test::expect_error([] { render("{{ messages[] }}"); }, "expected an index or a slice in '[]'");
  test::expect_error([] { render("{% if messages[ ].role %}x{% endif %}"); }, "expected an index or a slice");
  EXPECT_EQ(render("{{ 'abc'[:] }}{{ 'abc'[::] }}"), "abcabc");
  test::expect_error([] { ChatTemplate::load(test::testdata("tokenizer/hf/llama2")); }, "has no chat template");
}

}  // namespace
}  // namespace rinfer
