// Reading JSON a user or a file supplies (project, lesson, weights header, a stored run's
// configuration): one message naming the source and the fix when it is missing, not JSON,
// nested absurdly deep (which would exhaust the stack in recursive code) or holds a number no
// double can hold; values quoted in messages are cut short.
#pragma once
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "Error.h"
#include "Limits.h"

namespace ml {

// No Mirrorlab file nests deeper than a handful of levels; 64 leaves room and keeps every
// recursive walk (dump, compare, copy) far from the stack's end.
inline constexpr int kMaxJsonDepth = 64;
// A project, lesson or stored configuration is a few KiB; more is not one of ours.
inline constexpr uint64_t kMaxJsonFileBytes = 64ull << 20;

// True when arrays/objects nest deeper than kMaxJsonDepth (brackets inside strings do not count).
inline bool jsonTooDeep(std::string_view text) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// A JSON value for a message: compact, and cut after max characters.
inline std::string shortDump(const nlohmann::json& v, size_t max = 80) {
  return clipText(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), max);
}

// Parses text; every failure is a UserError "<source>: ...: <badHint>".
inline nlohmann::json parseJsonText(std::string_view text, const std::string& source, const std::string& badHint) {
  if (jsonTooDeep(text))
    throw UserError(source + ": arrays or objects are nested more than " + std::to_string(kMaxJsonDepth) +
                    " levels deep, which no Mirrorlab file needs: " + badHint);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(source + ": not valid JSON (" + clipText(e.what(), 160) + "): " + badHint);
  } catch (const nlohmann::json::out_of_range& e) {
    // 406: a number beyond the range of a double, such as 1e309.
    std::string what = e.what();
    std::string number;
    if (const auto q = what.find('\''); q != std::string::npos) number = what.substr(q + 1, what.find('\'', q + 1) - q - 1);
    throw UserError(source + ": the number " + clipText(number, 40) +
                    " is too large (numbers must lie within about +-1.8e308, the range of a double): " + badHint);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(source + ": cannot be read as JSON (" + clipText(e.what(), 160) + "): " + badHint);
  }
}

// For stored text Mirrorlab wrote itself (a run's configuration): a discarded value, never an
// exception or a crash, when the text is not JSON or nested too deep.
inline nlohmann::json parseJsonOrDiscarded(std::string_view text) {
  if (jsonTooDeep(text)) return nlohmann::json(nlohmann::json::value_t::discarded);
  try {
    return nlohmann::json::parse(text, nullptr, false);
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

// what: "project file"; missingHint / badHint: the fix to suggest.
inline nlohmann::json readJsonFile(const std::string& path, const std::string& what, const std::string& missingHint,
                                   const std::string& badHint) {
  const std::string text = readRegularFile(path, what, missingHint, kMaxJsonFileBytes);
  return parseJsonText(text, path, badHint);
}

// The field checks every reader of a user JSON file shares: errors read
// "<source>: <field> <what is wrong>" (the field in the installed words, Field.h, when fieldWords is
// set) and carry the field's path; an unknown key is named with where it sits and the keys allowed there.
struct JsonFieldReader {
  std::string source;
  std::string (*fieldWords)(const std::string& path) = nullptr;  // "training.batch_size" -> words

  [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
    throw UserError(source + ": " + (fieldWords ? fieldWords(field) : field) + " " + msg, field);
  }
  void onlyKeys(const nlohmann::json& obj, const std::string& path, const std::set<std::string>& allowed) const {
    if (!obj.is_object()) fail(path, "must be a JSON object, got " + shortDump(obj));
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (allowed.count(it.key())) continue;
      std::string names;
      for (const auto& a : allowed) names += (names.empty() ? "" : ", ") + a;
      std::string where = path;
      for (size_t at = 0; (at = where.find('.', at)) != std::string::npos;) where.replace(at, 1, " › ");
      throw UserError(source + ": '" + clipText(it.key(), 40) + "' " +
                          (path.empty() ? std::string("at the top of the file") : "in the file's " + where + " section") +
                          " is not a known field (allowed there: " + names + ")",
                      path.empty() ? it.key() : path + "." + it.key());
    }
  }
};

}  // namespace ml
