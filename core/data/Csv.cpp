// CSV reader: the file is read at once, split into lines and cells by hand, and numbers are parsed
// with std::from_chars, which ignores the locale (a German desktop must not read "0.5" as 0).
#include "data/Csv.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include "Error.h"
#include "Field.h"
#include "Limits.h"

namespace ml {
namespace {

// Whole regular files only (data.path: /dev/zero would read until memory runs out); the floats
// parsed from the text take at most twice its size.
std::string readText(const std::string& path) {
  std::string text =
      readRegularFile(path, "CSV file", "check " + fieldInWords("data.path") + " or " + fieldInWords("data.test_path"));
  requireMemory(3.0 * static_cast<double>(text.size()), "CSV file '" + path + "'", "use a smaller file");
  return text;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Splits one line at commas outside double quotes, then strips surrounding quotes. Doubled quotes
// inside a quoted field are left as they are: numeric data sets do not need them.
void splitCells(std::string_view line, std::vector<std::string_view>& cells) {
  cells.clear();
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i < line.size() && line[i] == '"') quoted = !quoted;
    if (i == line.size() || (line[i] == ',' && !quoted)) {
      std::string_view c = trim(line.substr(start, i - start));
      if (c.size() >= 2 && c.front() == '"' && c.back() == '"') c = trim(c.substr(1, c.size() - 2));
      cells.push_back(c);
      start = i + 1;
    }
  }
}

bool parseNumber(std::string_view c, float& out) {
  if (!c.empty() && c.front() == '+') c.remove_prefix(1);
  if (c.empty()) return false;
  const auto [p, ec] = std::from_chars(c.data(), c.data() + c.size(), out);
  return ec == std::errc() && p == c.data() + c.size() && std::isfinite(out);
}

// Why a cell is not a number, and the fix: an empty cell is filled in or its row removed; a column
// that holds text in most rows (names, categories) is dropped or encoded as numbers, since fixing
// row after row would never end. Only on the error path: the file is read once more to decide.
std::string cellError(const std::string& path, std::string_view text, const std::vector<std::string>& header, size_t column,
                      size_t labelIndex, int64_t row, std::string_view cell) {
  const std::string where =
      "CSV file '" + path + "', row " + std::to_string(row) + ", column '" + clipText(header[column], 40) + "'";
  if (cell.empty()) return where + " is empty: fill it in (every cell needs a number) or remove the row";
  int64_t numbers = 0, words = 0;
  std::vector<std::string_view> cells;
  bool first = true;
  for (std::string_view rest = text; !rest.empty();) {
    const size_t nl = rest.find('\n');
    const std::string_view line = trim(rest.substr(0, nl));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    if (line.empty()) continue;
    if (std::exchange(first, false)) continue;  // the header
    splitCells(line, cells);
    if (column >= cells.size() || cells[column].empty()) continue;
    float v = 0;
    (parseNumber(cells[column], v) ? numbers : words) += 1;
  }
  const std::string sample = "'" + clipText(std::string(cell), 40) + "'";
  if (words > numbers) {
    if (column == labelIndex)
      return where + " is the label column and holds text (" + sample + "): Mirrorlab needs class numbers 0, 1, 2, ... " +
             "Replace each class name with its number in the file";
    const std::string others = words > 1 ? " and " + std::to_string(words - 1) + " more" : "";
    return where + " holds text (" + sample + others + "): Mirrorlab reads numbers only. Drop the column '" +
           clipText(header[column], 40) + "' from the file, or turn its values into numbers";
  }
  return where + ": " + sample + " is not a number. Fix the cell or remove the row";
}

}  // namespace

bool looksLikeClassLabels(const std::vector<float>& labels) {
  if (labels.empty()) return false;
  std::set<float> distinct;
  for (float v : labels) {
    if (v < 0.0f || v != std::floor(v) || v > 1e6f) return false;
    if (distinct.insert(v).second && distinct.size() > 1000) return false;
  }
  return true;
}

void makeClassification(Dataset& d) {
  float maxLabel = 0.0f;
  for (float v : d.y) maxLabel = std::max(maxLabel, v);
  d.targetDim = 1;
  d.numClasses = static_cast<int>(maxLabel) + 1;
}

FeatureStats computeFeatureStats(const Dataset& d) {
  const int64_t f = d.featureCount();
  FeatureStats s;
  s.mean.assign(static_cast<size_t>(f), 0.0);
  s.stddev.assign(static_cast<size_t>(f), 0.0);
  if (d.size == 0) return s;
  // Two passes in double: one-pass formulas lose the variance of columns with a large mean.
  for (int64_t i = 0; i < d.size; ++i)
    for (int64_t j = 0; j < f; ++j) s.mean[static_cast<size_t>(j)] += d.sample(i)[j];
  for (double& m : s.mean) m /= static_cast<double>(d.size);
  for (int64_t i = 0; i < d.size; ++i)
    for (int64_t j = 0; j < f; ++j) {
      const double dv = d.sample(i)[j] - s.mean[static_cast<size_t>(j)];
      s.stddev[static_cast<size_t>(j)] += dv * dv;
    }
  for (size_t j = 0; j < s.stddev.size(); ++j) {
    const double sd = std::sqrt(s.stddev[j] / static_cast<double>(d.size));
    // Relative threshold: a column that is constant up to float rounding is constant.
    s.stddev[j] = sd > 1e-7 * std::max(1.0, std::abs(s.mean[j])) ? sd : 0.0;
  }
  return s;
}

void applyFeatureStats(Dataset& d, const FeatureStats& stats) {
  const int64_t f = d.featureCount();
  for (int64_t i = 0; i < d.size; ++i) {
    float* row = d.x.data() + i * f;
    for (int64_t j = 0; j < f; ++j) {
      const double sd = stats.stddev[static_cast<size_t>(j)];
      row[j] = sd > 0.0 ? static_cast<float>((row[j] - stats.mean[static_cast<size_t>(j)]) / sd) : 0.0f;
    }
  }
}

// Long: one pass over the text, the header row and the data rows in one loop, each refusal
// naming the row, the column and the fix.
Dataset readCsv(const std::string& path, const std::string& labelColumn, bool classification, bool standardize) {
  const std::string text = readText(path);
  std::string_view rest(text);
  if (rest.size() >= 3 && rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);  // UTF-8 BOM from Excel

  std::vector<std::string> header;
  std::vector<std::string_view> cells;
  size_t labelIndex = 0;
  Dataset ds;
  ds.name = path;
  ds.targetDim = 1;
  int64_t row = 0;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    const std::string_view line = trim(rest.substr(0, nl));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    ++row;
    if (line.empty()) continue;
    splitCells(line, cells);
    if (header.empty()) {
      for (std::string_view c : cells) header.emplace_back(c);
      // Two columns of one name: the label column (or a reader of the exported model) would pick one silently.
      std::set<std::string_view> seen;
      for (size_t c = 0; c < header.size(); ++c)
        if (!seen.insert(header[c]).second) {
          const size_t first = static_cast<size_t>(std::find(header.begin(), header.end(), header[c]) - header.begin());
          throw UserError("CSV file '" + path + "' has two columns named '" + clipText(header[c], 40) + "' (columns " +
                          std::to_string(first + 1) + " and " + std::to_string(c + 1) +
                          "): give every column of the header row its own name");
        }
      const auto it = std::find(header.begin(), header.end(), labelColumn);
      if (it == header.end()) {
        std::string cols;
        for (const auto& h : header) cols += (cols.empty() ? "" : ", ") + h;
        throw UserError("CSV file '" + path + "' has no label column '" + clipText(labelColumn, 40) + "'; its columns are: " +
                            clipText(cols, 200) + ". Choose one of them as " + fieldInWords("data.label_column"),
                        "data.label_column");
      }
      labelIndex = static_cast<size_t>(it - header.begin());
      if (header.size() < 2)
        throw UserError("CSV file '" + path + "' has only the label column: it needs at least one feature column");
      continue;
    }
    if (cells.size() != header.size())
      throw UserError("CSV file '" + path + "', row " + std::to_string(row) + ": " + std::to_string(cells.size()) +
                      " cells, but the header has " + std::to_string(header.size()) + " columns");
    for (size_t c = 0; c < cells.size(); ++c) {
      float v = 0.0f;
      if (!parseNumber(cells[c], v)) throw UserError(cellError(path, text, header, c, labelIndex, row, cells[c]));
      if (c == labelIndex) {
        if (classification && (v < 0.0f || v != std::floor(v)))
          throw UserError("CSV file '" + path + "', row " + std::to_string(row) + ", column '" + clipText(header[c], 40) +
                          "': a class label must be a non-negative integer, found '" + clipText(cells[c], 40) + "'");
        ds.y.push_back(v);
      } else {
        ds.x.push_back(v);
      }
    }
    ++ds.size;
  }
  if (header.empty()) throw UserError("CSV file '" + path + "' is empty: it needs a header row and data rows");
  if (ds.size == 0) throw UserError("CSV file '" + path + "' has a header but no data rows");
  ds.sampleShape = {static_cast<int64_t>(header.size() - 1)};
  if (classification) makeClassification(ds);
  if (standardize) applyFeatureStats(ds, computeFeatureStats(ds));
  return ds;
}

}  // namespace ml
