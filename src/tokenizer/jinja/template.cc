#include "tokenizer/jinja/template.h"

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/parser.h"

namespace vellum::jinja {

Template Template::parse(std::string_view source) {
  return Template(std::make_shared<const Body>(parse_template(source)));
}

std::string Template::render(const nlohmann::json& context, const RenderOptions& options) const {
  return render(Value::from_json(context), options);
}

std::string Template::render(const Value& context, const RenderOptions& options) const {
  return render_body(*body_, context, options);
}

}  // namespace vellum::jinja
