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

// Six significant digits, as messages and descriptions quote settings (0.001, 1e-05, 256).
inline std::string shortNumber(double v) { return formatNumber("%.6g", v); }

}  // namespace ml
