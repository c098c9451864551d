// The message of the ml::UserError a call throws, for the tests of refused input.
#pragma once
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace mltest {

// f's UserError message, or `whenNone` when f throws none (any other exception passes through).
std::string errorOf(const std::function<void()>& f, const std::string& whenNone = "");

// As errorOf, and a test failure when f throws no UserError.
std::string userErrorOf(const std::function<void()>& f);

// The UserError message ml::Project::fromJson gives for `j` read from `path` ("" when none).
std::string projectError(const nlohmann::json& j, const std::string& path = "p.json");

}  // namespace mltest
