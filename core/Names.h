// The settings' enums and their names in the file: each enum's toString is a switch (the compiler
// names a missing case), and its name is read back by walking every value, so the two never
// disagree and no enum keeps a second table.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>

namespace ml {

// The value of `values` whose toString is `name`, if any.
template <typename E, std::size_t N>
std::optional<E> fromName(std::string_view name, const E (&values)[N]) {
  for (const E v : values)
    if (name == toString(v)) return v;
  return std::nullopt;
}

}  // namespace ml
