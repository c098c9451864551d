// Reading a JSON file a user wrote (project, lesson): one message naming the file and the fix
// when it is missing or not JSON.
#pragma once
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "Error.h"

namespace ml {

// what: "project file"; missingHint / badHint: the fix to suggest.
inline nlohmann::json readJsonFile(const std::string& path, const std::string& what, const std::string& missingHint,
                                   const std::string& badHint) {
  std::ifstream in(path);
  if (!in) throw UserError("cannot open " + what + " '" + path + "': " + missingHint);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(path + ": not valid JSON (" + std::string(e.what()) + "): " + badHint);
  }
}

// The field checks every reader of a user JSON file shares: errors read
// "<source>: <field> <what is wrong>", and unknown fields are named with the allowed ones.
struct JsonFieldReader {
  std::string source;

  [[noreturn]] void fail(const std::string& field, const std::string& msg) const { throw UserError(source + ": " + field + " " + msg); }
  void onlyKeys(const nlohmann::json& obj, const std::string& path, const std::set<std::string>& allowed) const {
    if (!obj.is_object()) fail(path, "must be a JSON object, got " + obj.dump());
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (allowed.count(it.key())) continue;
      std::string names;
      for (const auto& a : allowed) names += (names.empty() ? "" : ", ") + a;
      fail(path.empty() ? it.key() : path + "." + it.key(), "is not a known field (allowed here: " + names + ")");
    }
  }
};

}  // namespace ml
