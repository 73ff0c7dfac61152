// Statements and whitespace control, one construct per test. Expected strings follow Jinja2
// 3.1 with trim_blocks=True, lstrip_blocks=True (how transformers renders chat templates).
#include <gtest/gtest.h>

#include "jinja_test_util.h"
#include "vellum/status.h"

namespace vellum::jinja {
namespace {

using nlohmann::json;
using testing::render;

TEST(JinjaWhitespaceTest, PlainTextPassesThroughAndOneTrailingNewlineIsDropped) {
  EXPECT_EQ(render("hello"), "hello");
  EXPECT_EQ(render("hello\n"), "hello");
  EXPECT_EQ(render("hello\n\n"), "hello\n");
  EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
  EXPECT_EQ(render(""), "");
}

TEST(JinjaWhitespaceTest, TrimBlocksDropsTheNewlineAfterABlockTag) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  EXPECT_EQ(render("{# note #}\nx"), "x");
  // Only one newline, and not after variable tags.
  EXPECT_EQ(render("{% if true %}\n\nyes{% endif %}"), "\nyes");
  EXPECT_EQ(render("{{ 1 }}\nx"), "1\nx");
}

TEST(JinjaWhitespaceTest, LstripBlocksDropsIndentationBeforeABlockTag) {
  EXPECT_EQ(render("  {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(render("a\n    {% if true %}\n    b\n    {% endif %}\nc"), "a\n    b\nc");
  EXPECT_EQ(render("\t{# c #}x"), "x");
  // Not when something other than whitespace precedes the tag on its line.
  EXPECT_EQ(render("a  {% if true %}x{% endif %}"), "a  x");
  // Never before variable tags.
  EXPECT_EQ(render("  {{ 'x' }}"), "  x");
}

TEST(JinjaWhitespaceTest, PlusDisablesTrimAndLstrip) {
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(render("{% if true +%}\nx{% endif %}"), "\nx");
}

TEST(JinjaWhitespaceTest, MinusStripsAllWhitespaceOnThatSide) {
  EXPECT_EQ(render("a \n\t {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(render("a\n\n{%- if true -%}\n\n b {%- endif %}"), "ab");
  EXPECT_EQ(render("a \n{#- comment -#}\n b"), "ab");
  EXPECT_EQ(render("{{ 5 - 3 }}|{{ 5 -3 }}|{{- 5 -}}"), "2|2|5");
}

TEST(JinjaWhitespaceTest, RawBlocksAreLiteral) {
  EXPECT_EQ(render("{% raw %}{{ not parsed }}{% if %}{% endraw %}!"), "{{ not parsed }}{% if %}!");
}

TEST(JinjaStatementTest, IfElifElse) {
  const char* tmpl = "{% if x > 2 %}big{% elif x > 0 %}small{% else %}none{% endif %}";
  EXPECT_EQ(render(tmpl, {{"x", 3}}), "big");
  EXPECT_EQ(render(tmpl, {{"x", 1}}), "small");
  EXPECT_EQ(render(tmpl, {{"x", 0}}), "none");
  EXPECT_EQ(render("{% if missing %}a{% else %}b{% endif %}"), "b");
}

TEST(JinjaStatementTest, ForLoopVariables) {
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
                   {{"xs", {"a", "b"}}}),
            "1021TrueFalse2;2110FalseTrue2;");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.previtem | default('-') }}{{ x }}{{ loop.nextitem | default('-') }} {% endfor %}",
                   {{"xs", {1, 2, 3}}}),
            "-12 123 23- ");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.cycle('odd', 'even') }} {% endfor %}", {{"xs", {1, 2, 3}}}),
            "odd even odd ");
}

TEST(JinjaStatementTest, ForElseAndLoopFilter) {
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in missing %}x{% else %}empty{% endfor %}"), "empty");
  // The filter runs before the loop, so loop.length and loop.last count only kept items.
  EXPECT_EQ(render("{% for x in xs if x % 2 == 1 %}{{ x }}/{{ loop.length }}{{ '.' if loop.last }} {% endfor %}",
                   {{"xs", {1, 2, 3, 4, 5}}}),
            "1/3 3/3 5/3. ");
  EXPECT_EQ(render("{% for x in xs if x > 9 %}x{% else %}none{% endfor %}", {{"xs", {1}}}), "none");
}

TEST(JinjaStatementTest, ForUnpacksTuplesAndIteratesDicts) {
  json context = {{"d", {{"a", 1}, {"b", 2}}}};
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", context), "a=1;b=2;");
  EXPECT_EQ(render("{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}", context), "a=1;b=2;");
  EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}", context), "ab");
  EXPECT_EQ(render("{% for (a, b) in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}"), "3 7 ");
  EXPECT_EQ(render("{% for c in 'héllo' %}[{{ c }}]{% endfor %}"), "[h][é][l][l][o]");
}

TEST(JinjaStatementTest, BreakAndContinue) {
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "012");
  EXPECT_EQ(render("{% for x in range(5) %}{% if x is odd %}{% continue %}{% endif %}{{ x }}{% endfor %}"), "024");
  // break leaves only the innermost loop
  EXPECT_EQ(render("{% for i in range(2) %}{% for j in range(5) %}{% if j == 1 %}{% break %}{% endif %}"
                   "{{ i }}{{ j }} {% endfor %}{% endfor %}"),
            "00 10 ");
}

TEST(JinjaStatementTest, NestedLoopsHaveTheirOwnLoopVariable) {
  EXPECT_EQ(render("{% for a in [1, 2] %}{% for b in [1, 2, 3] %}{{ loop.index }}{% endfor %}"
                   "|{{ loop.index }} {% endfor %}"),
            "123|1 123|2 ");
}

TEST(JinjaStatementTest, SetInsideALoopDoesNotLeakButNamespacesDo) {
  EXPECT_EQ(render("{% set n = 0 %}{% for x in [1, 2] %}{% set n = n + x %}{% endfor %}{{ n }}"), "0");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for x in [1, 2] %}{% set ns.n = ns.n + x %}"
                   "{% endfor %}{{ ns.n }}"),
            "3");
  EXPECT_EQ(render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c is defined }}"), "12False");
  // if blocks do not open a scope
  EXPECT_EQ(render("{% if true %}{% set x = 5 %}{% endif %}{{ x }}"), "5");
}

TEST(JinjaStatementTest, NamespacesMayHoldThemselves) {
  // Python allows the cycle; the renderer empties its namespaces when it ends, so the cycle is
  // freed (the jinja fuzzer's seed namespace_cycles.jinja checks that under LeakSanitizer).
  EXPECT_EQ(render("{% set ns = namespace(n=1) %}{% set ns.me = ns %}{% set ns.l = [ns, {'k': ns}] %}"
                   "{% set other = namespace(peer=ns) %}{% set ns.peer = other %}"
                   "{{ ns.me.me.n }} {{ ns.l[1].k.peer.peer.n }} {{ ns.me == ns }} {{ ns }}"),
            "1 1 True <Namespace>");
}

TEST(JinjaStatementTest, SetForms) {
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set t = 1, 2 %}{{ t }} {{ (1,) }} {{ () }}"), "(1, 2) (1,) ()");
  EXPECT_EQ(render("{% set block %}  x {{ 1 + 1 }}{% endset %}[{{ block }}]"), "[  x 2]");
  EXPECT_EQ(render("{% set ns = namespace(s='') %}{% set ns.s %}captured{% endset %}{{ ns.s }}"), "captured");
}

TEST(JinjaStatementTest, MacrosWithDefaultsKeywordsAndRecursion) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}"),
            "Hi A! Hi B? Hi C.");
  EXPECT_EQ(render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}"
                   "{% endmacro %}{{ fact(5) }}"),
            "120");
  // Macros see the variables of the template that defines them.
  EXPECT_EQ(render("{% set suffix = '?' %}{% macro m(x) %}{{ x }}{{ suffix }}{% endmacro %}{{ m('a') }}"), "a?");
  // A missing argument is undefined, as in Jinja.
  EXPECT_EQ(render("{% macro m(a, b) %}{{ b is defined }}{% endmacro %}{{ m(1) }}"), "False");
}

TEST(JinjaStatementTest, CallBlocksPassACaller) {
  EXPECT_EQ(render("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
                   "{% call wrap('b') %}bold{% endcall %}"),
            "<b>bold</b>");
  EXPECT_EQ(render("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                   "{% call(item) each([1, 2]) %}[{{ item }}]{% endcall %}"),
            "[1][2]");
}

TEST(JinjaStatementTest, FilterAndGenerationBlocks) {
  EXPECT_EQ(render("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
  EXPECT_EQ(render("{% filter trim | upper %}  x  {% endfilter %}"), "X");
  EXPECT_EQ(render("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
}

}  // namespace
}  // namespace vellum::jinja
