// Errors a user can cause (bad project, missing data set, impossible batch size...).
// They carry a message that names the thing and the fix; the CLI prints it and exits non-zero,
// the studio shows it in a dialog. Programming errors use assert instead.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>

namespace ml {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& what) : std::runtime_error(what) {}
  // field: the project file field the error is about, as a JSON path ("training.batch_size",
  // "model.layers[2].units"), so that a front end can act on it (the studio can show that field).
  UserError(const std::string& what, const std::string& field)
      : std::runtime_error(what), field_(field.empty() ? nullptr : std::make_shared<const std::string>(field)) {}

  // "" when the error is not about one field. Shared so that copying the error cannot throw.
  const std::string& field() const {
    static const std::string none;
    return field_ ? *field_ : none;
  }

 private:
  std::shared_ptr<const std::string> field_;
};

}  // namespace ml
