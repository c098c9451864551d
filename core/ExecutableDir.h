// The folder of the running program (/proc/self/exe), where the plugins are looked for first.
#pragma once
#include <string>

namespace ml {

// "" when it cannot be read.
std::string executableDir();

}  // namespace ml
