// Errors a user can cause (bad project, missing data set, impossible batch size...).
// They carry a message that names the thing and the fix; the CLI prints it and exits non-zero,
// the studio shows it in a dialog. Programming errors use assert instead.
#pragma once
#include <stdexcept>
#include <string>

namespace ml {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace ml
