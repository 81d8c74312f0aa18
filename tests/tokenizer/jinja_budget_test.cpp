// The chat-template interpreter's resource budget (tokenizer/jinja/budget.h):
// templates an attacker writes (recursion, deep nesting, self-containing
// lists, huge strings and lists, endless loops, integer overflow) end with
// a one-line rinfer::Error naming the limit, quickly, never with a crash,
// UB or gigabytes of memory; and real templates stay far inside it.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "tokenizer/chat_template.h"
#include "tokenizer_test_util.h"

namespace rinfer {
namespace {

using ojson = nlohmann::ordered_json;

std::string render(const std::string& src, const jinja::Budget& budget = {}) {
  return ChatTemplate(src, ojson{{"bos_token", "<s>"}}, budget).render(ojson::array());
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Parsing or rendering `src` fails with a one-line error containing
// `part`, in well under `seconds` (a bound for a loaded machine or a
// sanitizer build; it takes milliseconds to a second).
void expect_limit(const std::string& src, const std::string& part, const jinja::Budget& budget = {},
                  double seconds = 30) {
  const auto t0 = std::chrono::steady_clock::now();
  test::expect_error([&] { render(src, budget); }, part);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(dt, seconds) << "template: " << src.substr(0, 100);
}

// A small budget, for the variants of each class that would otherwise move
// hundreds of megabytes before reaching the default limits (each class is
// also checked once at the defaults).
jinja::Budget small() {
  jinja::Budget b;
  b.max_steps = 300'000;
  b.max_output = 1 << 20;
  b.max_string = 1 << 20;
  b.max_items = 1 << 17;
  b.max_bytes = 16 << 20;
  return b;
}

jinja::Budget small_lists() {
  jinja::Budget b = small();
  b.max_items = 1 << 14;
  return b;
}

// Sanitizer builds run ~50x slower: there the variants that spend the
// default budgets (10M steps, 64 MB) are skipped (the small-budget ones
// still run), and deep sources are shorter (still far past the limits).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

constexpr int kDeep = kSanitized ? 20000 : 100000;

// --- recursion (evaluation depth) ---------------------------------------

TEST(JinjaBudget, RecursiveMacros) {
  const std::string deeper = "recursion deeper than 512";
  expect_limit("{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}", deeper);
  // Mutual recursion, and recursion through blocks and a {% set %} block.
  expect_limit("{% macro a(n) %}{{ b(n) }}{% endmacro %}{% macro b(n) %}{{ a(n) }}{% endmacro %}{{ a(0) }}", deeper);
  expect_limit("{% macro f(n) %}{% for i in [1] %}{% if true %}{{ f(n) }}{% endif %}{% endfor %}{% endmacro %}"
               "{{ f(0) }}",
               deeper);
  expect_limit("{% macro f() %}{% set x %}{{ f() }}{% endset %}{% endmacro %}{{ f() }}", deeper);
  // Through a default argument and inside a nested call chain.
  expect_limit("{% macro f(n, m=f(0)) %}{% endmacro %}{{ f(0) }}", deeper);
  expect_limit("{% macro f(n) %}{{ [1, 2]|map('string')|join(f(n)|string) }}{% endmacro %}{{ f(0) }}", deeper);
  // A filter chain that recurses through map('map', 'map', ...).
  std::string maps = "{{ 'a'|map(";
  for (int i = 0; i < 5000; ++i) maps += "'map', ";
  expect_limit(maps + "'upper')|list }}", deeper);
  // Recursion a real template might do (rendering nested JSON schemas) fits.
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}({{ f(n - 1) }}){% endif %}{% endmacro %}{{ f(100) }}"),
            repeat("(", 100) + repeat(")", 100));
}

TEST(JinjaBudget, RecursionErrorNamesTheLine) {
  test::expect_error([] { render("a\n{% macro f(n) %}\n{{ f(n+1) }}{% endmacro %}{{ f(0) }}"); },
                     "chat template: line 3: recursion deeper than 512");
}

// --- parser nesting -------------------------------------------------------

TEST(JinjaBudget, DeepExpressionsAreRefusedByTheParser) {
  const std::string deeper = "nesting deeper than 256";
  // Recursive descent: parentheses, not, unary minus, lists, dicts, calls.
  expect_limit("{{ " + repeat("(", kDeep) + "1" + repeat(")", kDeep) + " }}", deeper);
  expect_limit("{{ " + repeat("not ", kDeep) + "x }}", deeper);
  expect_limit("{{ " + repeat("- ", kDeep) + "1 }}", deeper);
  expect_limit("{{ " + repeat("[", kDeep) + repeat("]", kDeep) + " }}", deeper);
  expect_limit("{{ " + repeat("{'a': ", kDeep) + "1" + repeat("}", kDeep) + " }}", deeper);
  expect_limit("{{ " + repeat("f(", kDeep) + repeat(")", kDeep) + " }}", deeper);
  // Chains the parser builds in a loop, each link one level deeper.
  expect_limit("{{ x" + repeat(".a", kDeep) + " }}", deeper);
  expect_limit("{{ x" + repeat("[0]", kDeep) + " }}", deeper);
  expect_limit("{{ f" + repeat("()", kDeep) + " }}", deeper);
  expect_limit("{{ x" + repeat("|trim", kDeep) + " }}", deeper);
  expect_limit("{{ x" + repeat(" is defined", kDeep) + " }}", deeper);
  expect_limit("{{ 1" + repeat(" + 1", kDeep) + " }}", deeper);
  expect_limit("{{ 2" + repeat(" ** 2", kDeep) + " }}", deeper);
  expect_limit("{{ 'a'" + repeat(" ~ 'a'", kDeep) + " }}", deeper);
  expect_limit("{{ x" + repeat(" or x", kDeep) + " }}", deeper);
  expect_limit("{{ 1" + repeat(" == 1", kDeep) + " }}", deeper);
  expect_limit("{{ 1" + repeat(" if x else 1", kDeep) + " }}", deeper);
  // Within the limit, nesting works.
  EXPECT_EQ(render("{{ " + repeat("(", 200) + "1" + repeat(")", 200) + " }}"), "1");
  EXPECT_EQ(render("{{ 0" + repeat(" + 1", 200) + " }}"), "200");
}

TEST(JinjaBudget, DeepBlocksAreRefusedByTheParser) {
  const std::string deeper = "nesting deeper than 256";
  expect_limit(repeat("{% if true %}", kDeep) + "x" + repeat("{% endif %}", kDeep), deeper);
  expect_limit(repeat("{% for i in [1] %}", kDeep) + "x" + repeat("{% endfor %}", kDeep), deeper);
  expect_limit(repeat("{% macro m() %}", kDeep) + repeat("{% endmacro %}", kDeep), deeper);
  expect_limit(repeat("{% set x %}", kDeep) + repeat("{% endset %}", kDeep), deeper);
  // Unclosed: the depth error comes before "missing endif".
  expect_limit(repeat("{% if true %}", kDeep), deeper);
  // Blocks and the expressions inside them count together.
  expect_limit(repeat("{% if true %}", 200) + "{{ " + repeat("(", 100) + "1" + repeat(")", 100) + " }}" +
                   repeat("{% endif %}", 200),
               deeper);
  EXPECT_EQ(render(repeat("{% if true %}", 200) + "x" + repeat("{% endif %}", 200)), "x");
}

// --- self-containing and deep values ---------------------------------------

TEST(JinjaBudget, SelfContainingContainers) {
  // Direct: refused where it is made.
  expect_limit("{% set x = [] %}{{ x.append(x) }}{{ x }}", "a list cannot contain itself");
  expect_limit("{% set x = [] %}{% for i in range(3) %}{{ x.append(x if i == 2 else i) }}{% endfor %}",
               "a list cannot contain itself");
  expect_limit("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns.me == ns }}",
               "a namespace cannot contain itself");
  // Indirect cycles: printing, comparing and serializing end at the value
  // nesting limit (and the cycles are freed when the render ends: the ASan
  // build's leak check sees none).
  const std::string deeper = "value nested deeper than 256";
  expect_limit("{% set x = [] %}{{ x.append([x]) }}{{ x }}", deeper);
  expect_limit("{% set x = [] %}{% set y = [1, [x]] %}{{ x.append(y) }}{{ x|tojson }}", deeper);
  const std::string two = "{% set x = [] %}{{ x.append([x]) }}{% set y = [] %}{{ y.append([y]) }}";
  expect_limit(two + "{{ x == y }}", deeper);
  expect_limit(two + "{{ x < y }}", deeper);
  expect_limit(two + "{{ x in [y] }}", deeper);
  expect_limit(two + "{{ [x, y]|unique|list }}", deeper);
  expect_limit("{% set x = [] %}{% set y = [] %}{{ x.append(y) }}{{ y.append(x) }}{{ x }}", deeper);
  expect_limit("{% set x = [] %}{% set d = {'k': x} %}{{ x.append(d) }}{{ d|tojson(indent=2) }}", deeper);
  expect_limit("{% set x = [] %}{% set d = {'k': x} %}{{ x.append(d) }}{{ d|string }}", deeper);
  expect_limit("{% set ns = namespace(l=[]) %}{{ ns.l.append(ns) }}{% set ns.d = {'l': ns.l} %}{{ ns.d|tojson }}",
               deeper);
  expect_limit("{% set ns = namespace(a=1) %}{% set ns.l = [1, {'x': ns}] %}{{ ns.l|tojson }}", deeper);
  // Exponentially many paths through shared lists: the step budget ends it.
  const std::string dag =
      "{% set ns = namespace(x=[1], y=[1]) %}{% for i in range(200) %}{% set ns.x = [ns.x, ns.x] %}"
      "{% set ns.y = [ns.y, ns.y] %}{% endfor %}";
  if (!kSanitized) expect_limit(dag + "{{ ns.x == ns.y }}", "more than 10000000 evaluation steps");
  expect_limit(dag + "{{ ns.x == ns.y }}", "more than 300000 evaluation steps", small());
  expect_limit(dag + "{{ ns.x }}", "more than 300000 evaluation steps", small());
  expect_limit(dag + "{{ ns.x|tojson }}", "more than 300000 evaluation steps", small());
  // Cycles that are never printed are fine, and freed at the end.
  EXPECT_EQ(render("{% set x = [] %}{% set y = [x] %}{{ x.append(y) }}{{ x|length }}"), "None1");
  // Sharing is not a cycle.
  EXPECT_EQ(render("{% set a = [1] %}{% set b = [] %}{{ b.append(a) }}{{ b.append(a) }}{{ b }}{{ b|tojson }}"),
            "NoneNone[[1], [1]][[1], [1]]");
  EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% set ns.y = ns.x %}{{ ns.y.append(1) }}{{ ns.x }}"), "None[1]");
}

TEST(JinjaBudget, DeepValuesArePrintedComparedAndFreedSafely) {
  // A list nested 100 000 deep, built in a loop (no cycle): printing,
  // comparing and tojson stop at the nesting limit, and freeing it does not
  // recurse once per level.
  auto build = [](int depth) {
    return "{% set ns = namespace(x=[], y=[]) %}{% for i in range(" + std::to_string(depth) +
           ") %}{% set ns.x = [ns.x] %}{% set ns.y = [ns.y] %}{% endfor %}";
  };
  const std::string deeper = "value nested deeper than 256";
  expect_limit(build(1000) + "{{ ns.x }}", deeper);
  expect_limit(build(1000) + "{{ ns.x|tojson }}", deeper);
  expect_limit(build(1000) + "{{ ns.x == ns.y }}", deeper);
  expect_limit(build(1000) + "{{ ns.x < ns.y }}", deeper);
  expect_limit(build(1000) + "{{ ns.x in [ns.y] }}", deeper);
  EXPECT_EQ(render(build(100000) + "{{ ns.x|length }}"), "1");  // and freed without deep recursion
  // Dicts too.
  expect_limit("{% set ns = namespace(d={}) %}{% for i in range(100000) %}{% set ns.d = {'a': ns.d} %}{% endfor %}"
               "{{ ns.d|tojson }}",
               deeper);
}

// --- sizes ------------------------------------------------------------------

TEST(JinjaBudget, StringRepetition) {
  const std::string longer = "string longer than 67108864 bytes";
  expect_limit("{{ 'a' * 10**10 }}", longer);
  expect_limit("{{ 10**10 * 'ab' }}", longer);
  expect_limit("{{ 'abc' * 9223372036854775807 }}", longer);
  expect_limit("{{ ('a' * 1000000) * 1000 }}", longer);
  EXPECT_EQ(render("{{ 'ab' * 3 }}|{{ 'ab' * -3 }}|{{ '' * 10**18 }}|{{ 2 * 'x' }}"), "ababab|||xx");
}

TEST(JinjaBudget, StringGrowth) {
  // Doubling in a loop, at the default limit.
  if (!kSanitized)
    expect_limit("{% set ns = namespace(s='a') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
               "string longer than 67108864 bytes");
  const std::string longer = "string longer than 1048576 bytes";
  expect_limit("{% set ns = namespace(s='a') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
               longer, small());
  expect_limit("{% set ns = namespace(s='a') %}{% for i in range(100) %}{% set ns.s = ns.s ~ 'x' * 100000 %}"
               "{% endfor %}",
               longer, small());
  // Builtins that build strings.
  expect_limit("{{ range(10000)|map('string')|join('x' * 1000) }}", longer, small());
  expect_limit("{{ ('x' * 1000).join(range(10000)|map('string')) }}", longer, small());
  expect_limit("{{ ('a' * 10000).replace('a', 'b' * 1000) }}", longer, small());
  expect_limit("{{ ('a' * 10000)|replace('a', 'b' * 1000) }}", longer, small());
  expect_limit("{{ 'a\nb'|indent(10**12) }}", "string longer than 67108864 bytes");
  expect_limit("{{ ('\n' * 10000)|indent('x' * 1000, blank=true) }}", longer, small());
  expect_limit("{{ [1]|tojson(indent=10**12) }}", "string longer than 67108864 bytes");
  expect_limit("{{ [[[[1]]]]|tojson(indent=300000) }}", longer, small());
  expect_limit("{{ ('<' * 300000)|escape }}", longer, small());
  expect_limit("{% set ns = namespace(l=[]) %}{% for i in range(10) %}{{ ns.l.append('x' * 200000) }}{% endfor %}"
               "{{ ns.l|tojson }}",
               longer, small());
  expect_limit("{% set s = ['x' * 200000] %}{{ (s + s + s + s + s + s + s + s)|string }}", longer, small());
  expect_limit("{{ ('x' * 100000)|upper * 20 }}", longer, small());
  expect_limit("{% set s = 'x' * 1000 %}{{ [s, s] * 1 }}", "unsupported operand");  // no list repetition
}

TEST(JinjaBudget, ListGrowth) {
  expect_limit("{{ range(10**12)|length }}", "list longer than 1048576 items");
  expect_limit("{{ range(-9223372036854775807 - 1, 9223372036854775807)|length }}", "list longer than 1048576 items");
  const std::string longer = "list longer than 16384 items";
  expect_limit("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
               longer, small_lists());
  expect_limit("{% set l = range(16384)|list %}{{ l.append(1) }}", longer, small_lists());
  expect_limit("{% set l = [] %}{% for i in range(100) %}{% for j in range(1000) %}{% set _ = l.append(j) %}"
               "{% endfor %}{% endfor %}",
               longer, small_lists());
  expect_limit("{% set l = range(16000)|list %}{{ (l + range(1000))|length }}", longer, small_lists());
  expect_limit("{{ ('a' * 20000)|list|length }}", longer, small_lists());
  expect_limit("{{ ('a' * 20000)|reverse }}", longer, small_lists());
  expect_limit("{{ ('a' * 20000).split('a')|length }}", longer, small_lists());
  expect_limit("{{ (' a' * 20000).split()|length }}", longer, small_lists());
  expect_limit("{{ [('a' * 20000)|map('upper')] }}", longer, small_lists());
  // Indexing and slicing a long string does not make a list of its characters.
  EXPECT_EQ(render("{% set s = 'ab' * 2000000 %}{{ s[-1] }}{{ s[1] }}{{ s[3999998:] }}{{ s[::-1][:3] }}"),
            "bbabbab");
  EXPECT_EQ(render("{{ 'héllo'[1] }}{{ 'héllo'[-4:-1] }}{{ 'héllo'[::-2] }}"), "ééllolh");
}

TEST(JinjaBudget, OutputAndTotalBytes) {
  if (!kSanitized)
    expect_limit("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "output larger than 67108864 bytes");
  const std::string larger = "output larger than 1048576 bytes";
  expect_limit("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", larger, small());
  expect_limit("{% for i in range(10000) %}x{{ i }}{% endfor %}" + repeat("y", 1 << 20), larger, small());
  // A {% set %} block and a macro body are output too.
  expect_limit("{% set x %}{% for i in range(1000) %}{{ 'y' * 10000 }}{% endfor %}{% endset %}{{ x|length }}",
               larger, small());
  expect_limit("{% macro m() %}{% for i in range(1000) %}{{ 'y' * 10000 }}{% endfor %}{% endmacro %}{{ m()|length }}",
               larger, small());
  // Every string an expression evaluates to is charged (rinfer copies
  // strings): a loop that copies a big string ends at max_bytes in all (a
  // smaller budget here, to stay fast: the default is 1 GiB).
  const std::string bytes = "more than 16777216 bytes of strings evaluated";
  expect_limit("{% set s = 'x' * 1000000 %}{% for i in range(100) %}{% if s %}{% endif %}{% endfor %}", bytes,
               small());
  expect_limit("{% set l = ['x' * 1000000] %}{% for i in range(100) %}{{ l[0]|length }}{% endfor %}", bytes, small());
  expect_limit("{% set s = 'x' * 1000000 %}{% for i in range(100) %}{% set t = s[1:] %}{% endfor %}", bytes, small());
}

// --- steps ----------------------------------------------------------------

TEST(JinjaBudget, EvaluationSteps) {
  if (!kSanitized)
    expect_limit("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                 "more than 10000000 evaluation steps");
  const std::string steps = "more than 300000 evaluation steps";
  expect_limit("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", steps, small());
  expect_limit("{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}", steps,
               small());
  expect_limit("{% for i in range(10000) %}{% for j in range(10000) if j < 0 %}{% endfor %}{% endfor %}", steps,
               small());
  // Exponential recursion within the depth limit.
  expect_limit("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
               steps, small());
  // Quadratic builtins: unique compares every pair, 'in' scans a list,
  // sort compares, every copy of a list is charged.
  expect_limit("{{ range(10000)|unique|length }}", steps, small());
  expect_limit("{% set l = range(10000) %}{% for i in range(1000) %}{{ -1 in l }}{% endfor %}", steps, small());
  expect_limit("{% set l = range(10000) %}{% for i in range(1000) %}{{ l|sort|first }}{% endfor %}", steps, small());
  expect_limit("{% set l = range(10000) %}{% for i in range(1000) %}{{ l|last }}{% endfor %}", steps, small());
  // A smaller budget ends sooner, with its own number.
  jinja::Budget tiny;
  tiny.max_steps = 1000;
  test::expect_error([&] { render("{% for i in range(100000) %}{% endfor %}", tiny); },
                     "more than 1000 evaluation steps");
}

// --- integers ---------------------------------------------------------------

TEST(JinjaBudget, IntegerOverflowIsAnError) {
  expect_limit("{{ 2 ** 100000000 }}", "integer overflow in 2 ** 100000000");
  expect_limit("{{ 2 ** 63 }}", "integer overflow in 2 ** 63");
  expect_limit("{{ 10 ** 19 }}", "integer overflow in 10 ** 19");
  expect_limit("{{ (-3) ** 41 }}", "integer overflow in -3 ** 41");
  expect_limit("{{ 9223372036854775807 + 1 }}", "integer overflow in 9223372036854775807 + 1");
  expect_limit("{{ -9223372036854775807 - 2 }}", "integer overflow in -9223372036854775807 - 2");
  expect_limit("{{ 3037000500 * 3037000500 }}", "integer overflow in 3037000500 * 3037000500");
  expect_limit("{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow in -9223372036854775808 // -1");
  expect_limit("{{ -(-9223372036854775807 - 1) }}", "integer overflow in 0 - -9223372036854775808");
  expect_limit("{{ (-9223372036854775807 - 1)|abs }}", "integer overflow in 0 - -9223372036854775808");
  expect_limit("{{ [9223372036854775807, 1]|sum }}", "integer overflow in 9223372036854775807 + 1");
  expect_limit("{% set ns = namespace(n=1) %}{% for i in range(100) %}{% set ns.n = ns.n * 10 %}{% endfor %}",
               "integer overflow in 1000000000000000000 * 10");
  expect_limit("{{ 10.0 ** 400 }}", "float overflow in 10.0 ** 400");
  expect_limit("{{ 0 ** -1 }}", "zero cannot be raised to a negative power");
  expect_limit("{{ 99999999999999999999 }}", "integer out of range");
  // Exact results at the edges of int64, and cases that must stay fast.
  EXPECT_EQ(render("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 1 ** 1000000000000000000 }} {{ (-1) ** 1000000000000000001 }} "
                   "{{ 0 ** 0 }} {{ 2 ** -1 }}"),
            "4611686018427387904 -9223372036854775808 1 -1 1 0.5");
  EXPECT_EQ(render("{{ 9223372036854775807 - 1 + 1 }} {{ (-9223372036854775807 - 1) % -1 }} {{ 7 % -1 }} "
                   "{{ -7 // -1 }} {{ (-9223372036854775807 - 1) // 2 }}"),
            "9223372036854775807 0 0 7 -4611686018427387904");
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) is divisibleby(-1) }} {{ 7 is divisibleby(-1) }} "
                   "{{ 7 is divisibleby 0 }}"),
            "True True False");
}

TEST(JinjaBudget, FloatToIntConversions) {
  expect_limit("{{ (1e308 * 10)|int }}", "cannot convert float infinity to integer");
  expect_limit("{{ (-1e308 * 10)|int }}", "cannot convert float infinity to integer");
  expect_limit("{{ 1e300|int }}", "does not fit in 64 bits");
  expect_limit("{{ 9.3e18|int }}", "does not fit in 64 bits");
  expect_limit("{{ '99999999999999999999'|int }}", "integer overflow: 99999999999999999999 does not fit");
  expect_limit("{{ '1e300'|int }}", "does not fit in 64 bits");
  expect_limit("{{ 'inf'|int }}", "cannot convert float infinity to integer");
  expect_limit("{{ range(1e300) }}", "does not fit in 64 bits");
  expect_limit("{{ range(1e999) }}", "cannot convert float infinity to integer");
  expect_limit("{% set nan = 1e999 - 1e999 %}{{ range(nan) }}", "cannot convert float NaN to integer");
  expect_limit("{{ 'abc'[:1e300] }}", "does not fit in 64 bits");
  expect_limit("{{ 'abc' * (1e999 - 1e999) }}", "unsupported operand");
  expect_limit("{{ range('a') }}", "expected an integer, got str");
  // Python's int(): NaN is a ValueError, so Jinja's |int gives the default.
  EXPECT_EQ(render("{{ (1e999 - 1e999)|int }} {{ (1e999 - 1e999)|int(7) }}"), "0 7");
  EXPECT_EQ(render("{{ '12'|int }} {{ ' -12 '|int }} {{ '+5'|int }} {{ '3.7'|int }} {{ '-3.7'|int }} {{ 'abc'|int }} "
                   "{{ 'abc'|int(7) }} {{ '12abc'|int }} {{ '0x10'|int }} {{ 3.9|int }} {{ -3.9|int }} {{ true|int }} "
                   "{{ none|int }}"),
            "12 -12 5 3 -3 0 7 0 0 3 -3 1 0");
  EXPECT_EQ(render("{{ 9.2e18|int }} {{ (-9223372036854775808.0)|int }} {{ 1e999 }} {{ -1e999 }}"),
            "9200000000000000000 -9223372036854775808 inf -inf");
}

TEST(JinjaBudget, RangeAndSlicesAtTheEdges) {
  // range() and slices count their items first: no step walks past int64.
  EXPECT_EQ(render("{{ range(9223372036854775800, 9223372036854775807, 5)|list }}"),
            "[9223372036854775800, 9223372036854775805]");
  EXPECT_EQ(render("{{ range(-9223372036854775807 - 1, 9223372036854775807, 4611686018427387904)|list }}"),
            "[-9223372036854775808, -4611686018427387904, 0, 4611686018427387904]");
  EXPECT_EQ(render("{{ range(-9223372036854775800, -9223372036854775807 - 1, -5)|list }}"),
            "[-9223372036854775800, -9223372036854775805]");
  EXPECT_EQ(render("{{ range(5, 0, -2)|list }} {{ range(0)|list }} {{ range(3, 1)|list }}"), "[5, 3, 1] [] []");
  EXPECT_EQ(render("{{ 'abc'[1::9223372036854775807] }} {{ [1, 2, 3][::-9223372036854775807 - 1] }} "
                   "{{ [1, 2, 3][-9223372036854775807 - 1:9223372036854775807] }} {{ 'abc'[::-1] }}"),
            "b [3] [1, 2, 3] cba");
  expect_limit("{{ range(1, 2, 0) }}", "range() step must not be zero");
}

// --- real templates stay far inside the budget --------------------------------

class BudgetChatCases : public ::testing::TestWithParam<std::string> {};

TEST_P(BudgetChatCases, RealTemplatesFitATenthOfTheBudget) {
  jinja::Budget tight;
  tight.max_nesting = 25;
  tight.max_depth = 100;
  tight.max_steps = 1'000'000;
  tight.max_output = 1 << 20;
  tight.max_string = 1 << 20;
  tight.max_items = 1 << 10;
  tight.max_bytes = 1 << 22;
  const auto dir = test::testdata("tokenizer/hf/" + GetParam());
  EXPECT_EQ(test::expect_chat_cases(ChatTemplate::load(dir, tight), GetParam()), 8);
}

INSTANTIATE_TEST_SUITE_P(Families, BudgetChatCases, ::testing::Values("llama3", "qwen3", "deepseek_v3"));

// --- through the CLI ------------------------------------------------------------

// A copy of the stories260K model whose tokenizer_config.json carries
// `tmpl` as its chat template.
void write_model(const test::TempDir& t, const std::string& tmpl) {
  for (const auto& e : std::filesystem::directory_iterator(test::stories_hf()))
    std::filesystem::copy_file(e.path(), t.path() / e.path().filename());
  ojson cfg = ojson::parse(std::ifstream(test::stories_hf() / "tokenizer_config.json"));
  cfg["chat_template"] = tmpl;
  std::filesystem::remove(t.path() / "tokenizer_config.json");
  t.write("tokenizer_config.json", cfg.dump());
}

struct Cmd {
  int code = -1;
  std::string err;
};

Cmd run_rinfer(const test::TempDir& t, const std::string& args) {
  const auto err_file = t.path() / "stderr.txt";
  const std::string cmd = std::string(RINFER_BIN) + " " + args + " >/dev/null 2>'" + err_file.string() + "'";
  const int status = std::system(cmd.c_str());
  Cmd r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream e(err_file);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

TEST(JinjaBudget, CliReportsOneLineErrors) {
  const std::pair<std::string, std::string> cases[] = {
      {"{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}", "recursion deeper than 512"},
      {"{{ " + repeat("(", kDeep) + "1" + repeat(")", kDeep) + " }}", "nesting deeper than 256"},
      {"{% set x = [] %}{{ x.append(x) }}{{ x }}", "a list cannot contain itself"},
      {"{{ 'a' * 10**10 }}", "string longer than 67108864 bytes"},
      {"{{ 2 ** 100000000 }}", "integer overflow in 2 ** 100000000"},
  };
  for (const auto& [tmpl, part] : cases) {
    test::TempDir t;
    write_model(t, tmpl);
    t.write("messages.json", R"([{"role": "user", "content": "Hi"}])");
    const std::string model = "--model '" + t.str() + "'";
    for (const std::string& args :
         {"chat-template " + model + " --messages '" + (t.path() / "messages.json").string() + "'",
          "run " + model + " --chat --prompt Hi -n 1 --temperature 0"}) {
      const Cmd r = run_rinfer(t, args);
      EXPECT_EQ(r.code, 1) << args << "\n" << r.err;
      EXPECT_NE(r.err.find(part), std::string::npos) << args << "\n" << r.err;
      // One line: the message and its newline.
      EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << "\n" << r.err;
    }
  }
}

}  // namespace
}  // namespace rinfer
