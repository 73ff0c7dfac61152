// Expressions, filters, tests and methods. Expected values are what Jinja2 3.1 prints (Python
// str() of the value: True, None, 1.0, ['a', 1]).
#include <gtest/gtest.h>

#include "jinja_test_util.h"
#include "tokenizer/jinja/value.h"
#include "vellum/status.h"

namespace vellum::jinja {
namespace {

using nlohmann::json;
using testing::render;

TEST(JinjaExpressionTest, LiteralsPrintLikePython) {
  EXPECT_EQ(render("{{ 1 }} {{ -2 }} {{ 1.5 }} {{ 2.0 }} {{ 1e3 }} {{ true }} {{ False }} {{ none }} {{ None }}"),
            "1 -2 1.5 2.0 1000.0 True False None None");
  EXPECT_EQ(render("{{ [1, 'a', none, true] }} {{ {'k': 'v', 'n': [1.0]} }} {{ (1, 2) }}"),
            "[1, 'a', None, True] {'k': 'v', 'n': [1.0]} (1, 2)");
  EXPECT_EQ(render("{{ \"it's\" }} {{ ['it\\'s'] }}"), "it's [\"it's\"]");
  EXPECT_EQ(render("{{ 0.1 + 0.2 }} {{ 1e-05 * 1 }} {{ 1e16 * 1 }} {{ 123456789.125 }}"),
            "0.30000000000000004 1e-05 1e+16 123456789.125");
}

TEST(JinjaExpressionTest, StringEscapesAndConcatenation) {
  EXPECT_EQ(render(R"({{ 'a\nb\t"c"\\' }})"), "a\nb\t\"c\"\\");
  EXPECT_EQ(render(R"({{ '\u00e9\x41' }})"), "éA");
  EXPECT_EQ(render("{{ 'a' 'b' }}{{ 'x' ~ 1 ~ none ~ true }}{{ 'p' + 'q' }}"), "abx1NoneTruepq");
}

TEST(JinjaExpressionTest, Arithmetic) {
  EXPECT_EQ(render("{{ 7 + 2 }} {{ 7 - 2 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }}"),
            "9 5 14 3.5 3 1 1024");
  EXPECT_EQ(render("{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 1 + 1.5 }} {{ 4 / 2 }}"), "-4 2 -2 2.5 2.0");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }}"), "ababab [1, 1] [1, 2]");
  // Jinja precedence: a filter applies to the whole unary expression (-3 | abs == 3), ** is
  // left-associative, ~ binds tighter than + (so 'a' ~ 1 + 2 is ('a' ~ 1) + 2, an error).
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -3 | abs }} {{ 2 ** 3 ** 2 }}"), "7 9 3 64");
  EXPECT_EQ(render("{{ 0 ** 0 }} {{ (-1) ** 3 }} {{ (-2) ** 3 }} {{ 2 ** -1 }} {{ 2.0 ** 2 }}"), "1 -1 -8 0.5 4.0");
  EXPECT_THROW(render("{{ 'a' ~ 1 + 2 }}"), Error);
}

TEST(JinjaExpressionTest, ComparisonsAndLogic) {
  EXPECT_EQ(render("{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ 2 >= 3 }} {{ [1, 2] == [1, 2] }} {{ 1 != 'a' }}"),
            "True True False True True");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }}"),
            "True True True True");
  // and/or return an operand, like Python.
  EXPECT_EQ(render("{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 1 }}| {{ not 0 }} {{ not [1] }}"),
            "x b | True False");
  EXPECT_EQ(render("{{ 'y' if 1 > 0 else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if false }}]"), "y n []");
  EXPECT_EQ(render("{{ not x is defined }} {{ x is not defined and true }}"), "True True");
}

TEST(JinjaExpressionTest, AttributeSubscriptAndSlices) {
  json context = {{"m", {{"role", "user"}, {"content", "hello"}}}, {"xs", {10, 20, 30, 40}}};
  EXPECT_EQ(render("{{ m.role }} {{ m['content'] }} {{ m.missing is defined }} {{ m['nope'] is defined }}", context),
            "user hello False False");
  EXPECT_EQ(render("{{ xs[0] }} {{ xs[-1] }} {{ xs[9] is defined }} {{ xs.1 }}", context), "10 40 False 20");
  EXPECT_EQ(render("{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[1:3] }} {{ xs[-2:] }}", context),
            "[20, 30, 40] [10, 20, 30] [40, 30, 20, 10] [10, 30] [20, 30] [30, 40]");
  EXPECT_EQ(render("{{ 'héllo'[1] }} {{ 'héllo'[1:3] }} {{ 'héllo'[::-1] }} {{ 'abc'[5:] }}"), "é él olléh ");
}

TEST(JinjaExpressionTest, Tests) {
  EXPECT_EQ(render("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 1 is not none }}"),
            "False True True True");
  EXPECT_EQ(render("{{ 'a' is string }} {{ 1 is string }} {{ {} is mapping }} {{ [] is mapping }}"),
            "True False True False");
  EXPECT_EQ(render("{{ [] is iterable }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ [] is sequence }}"),
            "True True False True");
  EXPECT_EQ(render("{{ 1 is number }} {{ 1.5 is number }} {{ 'a' is number }} {{ 1 is integer }} {{ 1.0 is float }}"),
            "True True False True True");
  EXPECT_EQ(render("{{ true is boolean }} {{ false is false }} {{ true is true }} {{ 1 is boolean }}"),
            "True True True False");
  EXPECT_EQ(render("{{ 4 is even }} {{ 4 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }}"),
            "True False True False");
  EXPECT_EQ(render("{{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 'a' is in 'cat' }} {{ 'x' is lower }} {{ range is callable }}"),
            "True True True True True");
}

TEST(JinjaExpressionTest, StringFilters) {
  EXPECT_EQ(render("[{{ '  a b \n' | trim }}] [{{ 'xxaxx' | trim('x') }}]"), "[a b] [a]");
  EXPECT_EQ(render("{{ 'aBc' | upper }} {{ 'aBc' | lower }} {{ 'hello world' | capitalize }} {{ 'hello world' | title }}"),
            "ABC abc Hello world Hello World");
  EXPECT_EQ(render("{{ 'a-b-c' | replace('-', '+') }} {{ 'a-b-c' | replace('-', '', 1) }}"), "a+b+c ab-c");
  EXPECT_EQ(render("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ 'x\n' | indent(width='> ', first=True) }}"),
            "a\n  b\n\n  c|  a\n  b|> x\n");
  EXPECT_EQ(render("{{ 5 | string ~ 'x' }} {{ '<a>' | safe }} {{ '<a&>' | e }} {{ 'a b  c' | wordcount }}"),
            "5x <a> &lt;a&amp;&gt; 3");
}

TEST(JinjaExpressionTest, FormattingFilters) {
  EXPECT_EQ(render("{{ '%s-%5d|%.2f|%r|%%' | format('a', 3, 2.345, 'q') }} {{ '%03d' | format(7) }} {{ '|%-4s|' | format('ab') }}"),
            "a-    3|2.35|'q'|% 007 |ab  |");
  EXPECT_EQ(render("{{ 'Hello World' | truncate(5) }} {{ 'Hello World, again' | truncate(9, true) }} {{ 'Hello World, again' | truncate(12) }} {{ 'short' | truncate(3) }}"),
            "He... Hello ... Hello... short");
  EXPECT_EQ(render("[{{ 'hello' | center(10) }}][{{ 'ab' | center(5) }}] {{ [1, 2, 3] | batch(2) | list }} {{ [1, 2, 3] | batch(2, 0) | list }}"),
            "[  hello   ][  ab ] [[1, 2], [3]] [[1, 2], [3, 0]]");
  EXPECT_EQ(render("{{ 'Hi <b>there</b>, x_y 42' | wordcount }}"), "6");
  EXPECT_THROW(render("{{ '%d' | format('x') }}"), Error);
  EXPECT_THROW(render("{{ '%5.3.2f' | format(1) }}"), Error);
}

TEST(JinjaExpressionTest, UnicodeCaseMapping) {
  EXPECT_EQ(render("{{ 'Ünïcödé ΑΒΓ αβγ Привет 日本' | upper }}"), "ÜNÏCÖDÉ ΑΒΓ ΑΒΓ ПРИВЕТ 日本");
  EXPECT_EQ(render("{{ 'ÜNÏ ĀĒ ΑΣΑ ПРИВЕТ' | lower }} {{ 'élan vital' | title }} {{ 'éCOLE' | capitalize }}"),
            "ünï āē ασα привет Élan Vital École");
}

TEST(JinjaExpressionTest, SequenceFilters) {
  json context = {{"xs", {3, 1, 2}}, {"s", "héllo"}};
  EXPECT_EQ(render("{{ xs | length }} {{ xs | count }} {{ s | length }} {{ {'a': 1} | length }} {{ missing | length }}", context),
            "3 3 5 1 0");
  EXPECT_EQ(render("{{ xs | first }} {{ xs | last }} {{ s | first }} {{ xs | reverse | list }} {{ s | reverse }}", context),
            "3 2 h [2, 1, 3] olléh");
  EXPECT_EQ(render("{{ xs | sort }} {{ xs | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }} {{ xs | join(', ') }}", context),
            "[1, 2, 3] [3, 2, 1] ['A', 'b', 'c'] 3, 1, 2");
  EXPECT_EQ(render("{{ [1, 2, 1, 3] | unique | list }} {{ ['a', 'A', 'b'] | unique | list }} {{ 'ab' | list }}"),
            "[1, 2, 3] ['a', 'b'] ['a', 'b']");
  EXPECT_EQ(render("{{ xs | min }} {{ xs | max }} {{ xs | sum }} {{ [] | first is defined }}", context), "1 3 6 False");
}

TEST(JinjaExpressionTest, MapSelectAndAttributeFilters) {
  json context = {{"ms", json::parse(R"([{"role": "system", "content": "s"}, {"role": "user", "content": "u1"},
                                         {"role": "user", "content": "u2", "x": {"y": 7}}])")}};
  EXPECT_EQ(render("{{ ms | map(attribute='role') | join(',') }}", context), "system,user,user");
  EXPECT_EQ(render("{{ ms | map(attribute='x.y', default=0) | list }}", context), "[0, 0, 7]");
  EXPECT_EQ(render("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}", context),
            "['u1', 'u2']");
  EXPECT_EQ(render("{{ ms | rejectattr('role', 'eq', 'user') | list | length }} {{ ms | selectattr('x') | list | length }}", context),
            "1 1");
  EXPECT_EQ(render("{{ [1, 2, 3, 4] | select('odd') | list }} {{ [0, 1, '', 'a'] | select | list }} {{ [1, 2] | reject('even') | list }}"),
            "[1, 3] [1, 'a'] [1]");
  EXPECT_EQ(render("{{ ['a', 'b'] | map('upper') | join }} {{ ms | sort(attribute='content') | map(attribute='content') | first }}", context),
            "AB s");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | dictsort }} {{ ms[2] | attr('content') }}", context), "[('a', 2), ('b', 1)] u2");
}

TEST(JinjaExpressionTest, DefaultAndConversions) {
  EXPECT_EQ(render("{{ x | default('d') }} {{ x | d('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ none | default(1) }}"),
            "d d  d None");
  EXPECT_EQ(render("{{ '42' | int + 1 }} {{ '4.7' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '2.5' | float }} {{ 2 | float }}"),
            "43 4 7 3 2.5 2.0");
  EXPECT_EQ(render("{{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 2.1 | round(0, 'ceil') }}"), "3 2.57 2.0 3.0");
}

TEST(JinjaExpressionTest, ToJsonMatchesHuggingFace) {
  json context = json::parse(R"({"tool": {"name": "f", "args": [1, 2.5, null, true, "é\"\n"], "empty": {}}})");
  EXPECT_EQ(render("{{ tool | tojson }}", context),
            R"({"args": [1, 2.5, null, true, "é\"\n"], "empty": {}, "name": "f"})");
  EXPECT_EQ(render("{{ tool.args[:2] | tojson(indent=2) }}", context), "[\n  1,\n  2.5\n]");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [] } | tojson(indent=4) }}"), "{\n    \"b\": 1,\n    \"a\": []\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }} {{ 'x' | tojson }}"), R"({"a": 2, "b": 1} "x")");
}

TEST(JinjaExpressionTest, ContextKeyOrderIsKeptWithOrderedJson) {
  const Template tmpl = Template::parse("{{ tool | tojson }} {% for k in tool %}{{ k }}{% endfor %}");
  nlohmann::ordered_json tool;
  tool["name"] = "f";
  tool["description"] = "d";
  nlohmann::ordered_json context;
  context["tool"] = tool;
  EXPECT_EQ(tmpl.render(Value::from_json(context)), R"({"name": "f", "description": "d"} namedescription)");
}

TEST(JinjaExpressionTest, StringMethods) {
  EXPECT_EQ(render("[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}][{{ '\n\nx\n'.strip('\n') }}]"),
            "[x][x  ][  x][x]");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c']");
  EXPECT_EQ(render("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }}"),
            "True True True");
  EXPECT_EQ(render("{{ 'Ab'.upper() }}{{ 'Ab'.lower() }} {{ 'a-a'.replace('a', 'b') }} {{ 'abc'.find('c') }} {{ 'aaa'.count('a') }}"),
            "ABab b-b 2 3");
  EXPECT_EQ(render("{{ '-'.join(['a', 'b']) }} {{ 'x{}y{}'.format(1, 'z') }} {{ '{name}!'.format(name='n') }} {{ 'a\nb'.splitlines() }}"),
            "a-b x1yz n! ['a', 'b']");
  EXPECT_EQ(render("{{ '<think>r</think>\n\nanswer'.split('</think>')[-1].lstrip('\n') }}"), "answer");
  EXPECT_EQ(render("{{ ' ok '.strip().title() }} {{ '12'.isdigit() }}"), "Ok True");
}

TEST(JinjaExpressionTest, DictMethods) {
  json context = {{"d", {{"a", 1}, {"b", 2}}}};
  EXPECT_EQ(render("{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }}", context),
            "[('a', 1), ('b', 2)] ['a', 'b'] [1, 2]");
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ [1, 2].index(2) }}", context), "1 None 0 1");
}

TEST(JinjaExpressionTest, Globals) {
  EXPECT_EQ(render("{{ range(3) | list }} {{ range(1, 4) | list }} {{ range(5, 0, -2) | list }}"),
            "[0, 1, 2] [1, 2, 3] [5, 3, 1]");
  EXPECT_EQ(render("{{ dict(a=1, b='x') }} {{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d') }}"),
            "{'a': 1, 'b': 'x'} 26 Jul 2024 2024-07-26");
}

TEST(JinjaExpressionTest, UndefinedValues) {
  EXPECT_EQ(render("[{{ missing }}][{{ missing | trim }}][{{ missing ~ 'x' }}]"), "[][][x]");
  EXPECT_EQ(render("{% if missing %}y{% else %}n{% endif %}{{ missing == missing }}"), "nTrue");
  EXPECT_EQ(render("{{ none.attr is defined }}"), "False");
  // The context overrides globals, like keyword variables passed to render().
  EXPECT_EQ(render("{{ range }}", {{"range", "mine"}}), "mine");
}

TEST(JinjaExpressionTest, PythonFloatRepr) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(-0.5), "-0.5");
  EXPECT_EQ(python_float_repr(1e22), "1e+22");
  EXPECT_EQ(python_float_repr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(0.00001234), "1.234e-05");
}

}  // namespace
}  // namespace vellum::jinja
