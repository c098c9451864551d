// The messages of refused input (Errors.h).
#include "support/Errors.h"

#include <gtest/gtest.h>

#include "Error.h"
#include "project/Project.h"

namespace mltest {

std::string errorOf(const std::function<void()>& f, const std::string& whenNone) {
  try {
    f();
  } catch (const ml::UserError& e) {
    return e.what();
  }
  return whenNone;
}

std::string userErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ml::UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected ml::UserError";
  return {};
}

std::string projectError(const nlohmann::json& j, const std::string& path) {
  return errorOf([&] { ml::Project::fromJson(j, path); });
}

}  // namespace mltest
