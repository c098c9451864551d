// Reading a JSON file a user wrote (project, lesson): one message naming the file and the fix
// when it is missing or not JSON.
#pragma once
#include <fstream>
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

}  // namespace ml
