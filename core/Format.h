// printf-style formatting of one number into a std::string ("%.1f%%", "%.2f").
#pragma once
#include <cstdio>
#include <string>

namespace ml {

inline std::string formatNumber(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace ml
