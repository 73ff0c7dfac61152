#include "model/io/tensor_names.h"

#include <fmt/format.h>

namespace vellum::model {

std::string layer_tensor_name(int layer, std::string_view suffix) {
  return fmt::format("blk.{}.{}", layer, suffix);
}

}  // namespace vellum::model
