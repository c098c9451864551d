// Lesson files: parsing with errors that name the file and the field, and the list of figure
// names a lesson's experiments produce, so a reveal text that asks for a figure nobody measures
// is refused when the lesson loads, not when a learner reaches the end of it.
#include "learn/Lesson.h"

#include "JsonFile.h"
#include "distribute/Faults.h"
#include "nn/Precision.h"
#include "project/SharedData.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "Error.h"
#include "backend/DeviceList.h"

namespace ml {

namespace fs = std::filesystem;
using nlohmann::json;

Project LessonExperiment::apply(const Project& base) const {
  Project p = base;
  p.distribute.devices = devices;
  p.training.perDeviceBatch = batchPolicy == "per-device";
  if (batch > 0) p.training.batchSize = batch;
  if (lrScaling) p.training.lrScaling = *lrScaling;
  if (warmupEpochs >= 0) p.training.warmupEpochs = warmupEpochs;
  if (learningRate > 0) p.training.optimizer.learningRate = learningRate;
  if (epochs > 0) p.training.epochs = epochs;
  p.distribute.faults = faults;
  if (precision) p.training.precision = *precision;
  if (batchnormSynchronized)
    for (auto& l : p.model.layers)
      if (auto* bn = l.as<BatchNormalizationSpec>()) bn->synchronized = *batchnormSynchronized;
  if (lossScale) {
    p.training.lossScaling = *lossScale > 0;
    if (*lossScale > 0) p.training.lossScale = *lossScale;
  }
  return p;
}

namespace {

// [a-z] (or a digit when digitFirst), then lower-case letters, digits and the extra characters.
bool isName(const std::string& s, const char* extra, bool digitFirst = false) {
  auto lowerOrDigit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  const bool letterFirst = !s.empty() && s[0] >= 'a' && s[0] <= 'z';
  const bool digitOk = !s.empty() && digitFirst && s[0] >= '0' && s[0] <= '9';
  if (!letterFirst && !digitOk) return false;
  for (char c : s)
    if (!lowerOrDigit(c) && (c == '\0' || std::strchr(extra, c) == nullptr)) return false;
  return true;
}

struct LessonReader : JsonFieldReader {
  const json& need(const json& obj, const std::string& path, const char* key, const char* what) const {
    if (!obj.contains(key)) fail(path.empty() ? key : path + "." + key, std::string("is missing: give ") + what);
    return obj.at(key);
  }
  std::string text(const json& obj, const std::string& path, const char* key, bool required, const char* what) const {
    const std::string field = path.empty() ? key : path + "." + key;
    if (!obj.contains(key)) {
      if (required) fail(field, std::string("is missing: give ") + what);
      return "";
    }
    const json& v = obj.at(key);
    if (!v.is_string()) fail(field, std::string("must be ") + what + ", got " + shortDump(v));
    if (required && v.get<std::string>().empty()) fail(field, std::string("is empty: give ") + what);
    return v.get<std::string>();
  }
  double number(const json& obj, const std::string& path, const char* key, double fallback, double lo, const char* what) const {
    if (!obj.contains(key)) return fallback;
    const json& v = obj.at(key);
    if (!v.is_number() || v.get<double>() < lo) fail(path + "." + key, std::string("must be ") + what + ", got " + shortDump(v));
    return v.get<double>();
  }
  int64_t integer(const json& obj, const std::string& path, const char* key, int64_t fallback, int64_t lo,
                  const char* what) const {
    if (!obj.contains(key)) return fallback;
    const json& v = obj.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > (int64_t{1} << 40))
      fail(path.empty() ? key : path + "." + key, std::string("must be ") + what + ", got " + shortDump(v));
    return v.get<int64_t>();
  }
};

// Long: one or two lines per key of an experiment, each checked where it is read.
LessonExperiment parseExperiment(const LessonReader& r, const json& e, const std::string& path) {
  r.onlyKeys(e, path,
             {"label", "title", "devices", "batch_policy", "batch_size", "lr_scaling", "warmup_epochs", "learning_rate", "epochs",
              "steps", "faults", "precision", "loss_scale", "batchnorm_synchronized"});
  LessonExperiment x;
  x.label = r.text(e, path, "label", true, "a name such as \"four\" (lower-case letters, digits, _)");
  if (!isName(x.label, "_"))
    r.fail(path + ".label",
           "is '" + clipText(x.label, 40) +
               "': use lower-case letters, digits and _, starting with a letter (it names figures such as {final_acc_" +
               "four})");
  x.title = r.text(e, path, "title", false, "a string");
  if (x.title.empty()) x.title = x.label;
  const std::string devices = r.text(e, path, "devices", true, "a device list such as \"cpu:4\"");
  try {
    x.devices = parseDevices(devices);
  } catch (const UserError& err) {
    r.fail(path + ".devices", "is '" + clipText(devices, 40) + "': " + err.what());
  }
  x.batchPolicy = r.text(e, path, "batch_policy", false, "global or per-device");
  if (x.batchPolicy.empty()) x.batchPolicy = "global";
  if (x.batchPolicy != "global" && x.batchPolicy != "per-device")
    r.fail(path + ".batch_policy", "is '" + clipText(x.batchPolicy, 40) + "' (allowed: global, per-device)");
  x.batch = r.integer(e, path, "batch_size", 0, 1, "a positive integer");
  if (const std::string rule = r.text(e, path, "lr_scaling", false, "none, linear or sqrt"); !rule.empty()) {
    x.lrScaling = parseLrRule(rule);
    if (!x.lrScaling) r.fail(path + ".lr_scaling", "is '" + clipText(rule, 40) + "' (allowed: " + kLrRuleNames + ")");
  }
  x.warmupEpochs = r.number(e, path, "warmup_epochs", -1, 0, "a number of epochs (0 or more)");
  x.learningRate = r.number(e, path, "learning_rate", 0, 1e-12, "a positive learning rate");
  x.epochs = static_cast<int>(r.integer(e, path, "epochs", 0, 1, "a positive integer"));
  x.steps = r.integer(e, path, "steps", 0, 1, "a positive integer");
  if (const std::string precision = r.text(e, path, "precision", false, "float32, mixed_bfloat16 or mixed_float16");
      !precision.empty()) {
    x.precision = parsePrecision(precision);
    if (!x.precision) r.fail(path + ".precision", "is '" + clipText(precision, 40) + "' (allowed: " + kPrecisionNames + ")");
  }
  if (e.contains("batchnorm_synchronized")) {
    const json& v = e.at("batchnorm_synchronized");
    if (!v.is_boolean())
      r.fail(path + ".batchnorm_synchronized",
             "must be true (statistics all-reduced across replicas) or false (per replica), got " + shortDump(v));
    x.batchnormSynchronized = v.get<bool>();
  }
  if (e.contains("loss_scale")) {
    const json& v = e.at("loss_scale");
    if (v.is_string() && v.get<std::string>() == "none")
      x.lossScale = 0.0;
    else if (v.is_number() && v.get<double>() > 0 && std::isfinite(v.get<double>()))
      x.lossScale = v.get<double>();
    else
      r.fail(path + ".loss_scale", "must be a positive initial scale such as 32768, or \"none\", got " + shortDump(v));
  }
  if (e.contains("faults")) {
    const json& f = e.at("faults");
    if (!f.is_array()) r.fail(path + ".faults", "must be a list such as [\"slow:cpu:1=3x\"]");
    for (const auto& v : f)
      if (!v.is_string()) r.fail(path + ".faults", "must hold texts such as \"slow:cpu:1=3x\", got " + shortDump(v));
    try {
      for (const auto& v : f) x.faults.push_back(parseFault(v.get<std::string>()));
      planFaults(x.faults, x.devices);  // each device one of the experiment's
    } catch (const UserError& err) {
      r.fail(path + ".faults", err.what());
    }
  }
  return x;
}

Project parseLessonProject(const LessonReader& r, const json& j, const std::string& projectsDir, std::string& ref) {
  const json& pj = r.need(j, "", "project", "a project file name relative to projects/ (\"spirals.json\") or an inline project");
  if (pj.is_string()) {
    ref = pj.get<std::string>();
    // Where the project may be: the lesson folder's projects, then beside the lesson file, then the
    // shipped projects (a copied shipped lesson names "spirals.json" and still finds it).
    std::vector<fs::path> places;
    if (fs::path(ref).is_absolute()) {
      places.push_back(ref);
    } else {
      places.push_back(fs::path(projectsDir) / ref);
      places.push_back(fs::path(r.source).parent_path() / ref);
      places.push_back(fs::path(findSharedData().projectsDir) / ref);
    }
    std::error_code ec;  // a name too long or an unreadable folder is "not there", not an exception
    const auto found = std::find_if(places.begin(), places.end(), [&](const fs::path& p) { return fs::is_regular_file(p, ec); });
    if (found == places.end()) {
      std::string tried;
      for (const auto& p : places) tried += (tried.empty() ? "" : ", ") + clipText(p.lexically_normal().string(), 200);
      r.fail("project", "names '" + clipText(ref, 80) + "', which is not at " + tried +
                            ": give a file in projects/, beside the lesson, or its full path");
    }
    const fs::path path = *found;
    try {
      return Project::load(path.string());
    } catch (const UserError& e) {
      r.fail("project", std::string("'") + clipText(ref, 80) + "' is not a valid project: " + e.what());
    }
  }
  if (!pj.is_object()) r.fail("project", "must be a file name (string) or an inline project (object), got " + shortDump(pj));
  ref = "inline";
  return Project::fromJson(pj, r.source + ": project");
}

}  // namespace

Lesson parseLesson(const json& j, const std::string& source, const std::string& projectsDir) {
  LessonReader r{{source}};
  r.onlyKeys(j, "", {"schema_version", "id", "order", "title", "idea", "project", "experiments", "question", "reveal"});
  Lesson l;
  l.schemaVersion = static_cast<int>(r.integer(j, "", "schema_version", kLessonSchemaVersion, 1, "an integer"));
  if (l.schemaVersion > kLessonSchemaVersion)
    r.fail("schema_version", "is " + std::to_string(l.schemaVersion) + " but this Mirrorlab reads lessons of version 1.." +
                                 std::to_string(kLessonSchemaVersion) + ": update Mirrorlab");
  l.id = r.text(j, "", "id", true, "an id such as \"speedup-not-linear\"");
  if (!isName(l.id, "-", true)) r.fail("id", "is '" + clipText(l.id, 40) + "': use lower-case letters, digits and -");
  l.order = static_cast<int>(r.integer(j, "", "order", 0, 0, "a non-negative integer"));
  l.title = r.text(j, "", "title", true, "a title");
  l.idea = r.text(j, "", "idea", true, "the idea the lesson teaches, in a sentence or two");
  l.project = parseLessonProject(r, j, projectsDir, l.projectRef);

  const json& ex = r.need(j, "", "experiments", "a list of experiments, each with a label and devices");
  if (!ex.is_array() || ex.empty()) r.fail("experiments", "must be a non-empty list of experiments");
  std::set<std::string> labels;
  for (size_t i = 0; i < ex.size(); ++i) {
    const std::string path = "experiments[" + std::to_string(i) + "]";
    LessonExperiment x = parseExperiment(r, ex[i], path);
    if (!labels.insert(x.label).second)
      r.fail(path + ".label", "'" + clipText(x.label, 40) + "' is used twice: labels must be unique");
    validate(x.apply(l.project), source + ": " + path);
    l.experiments.push_back(std::move(x));
  }

  const json& q = r.need(j, "", "question", "an object with text, choices and correct");
  r.onlyKeys(q, "question", {"text", "choices", "correct", "explanation"});
  l.question.text = r.text(q, "question", "text", true, "the question to answer before running");
  const json& ch = r.need(q, "question", "choices", "a list of at least two answers");
  if (!ch.is_array() || ch.size() < 2) r.fail("question.choices", "must be a list of at least two answers");
  for (size_t i = 0; i < ch.size(); ++i) {
    if (!ch[i].is_string() || ch[i].get<std::string>().empty())
      r.fail("question.choices[" + std::to_string(i) + "]", "must be a non-empty string, got " + shortDump(ch[i]));
    l.question.choices.push_back(ch[i].get<std::string>());
  }
  if (!q.contains("correct")) r.fail("question.correct", "is missing: give the index of the right choice, from 0");
  l.question.correct = static_cast<int>(r.integer(q, "question", "correct", 0, 0, "an index into choices, from 0"));
  if (l.question.correct >= static_cast<int>(l.question.choices.size()))
    r.fail("question.correct", "is " + std::to_string(l.question.correct) + " but there are only " +
                                   std::to_string(l.question.choices.size()) + " choices (the index counts from 0)");
  l.question.explanation = r.text(q, "question", "explanation", false, "a string");

  l.reveal = r.text(j, "", "reveal", true, "the text shown after the run, with {placeholders} for the measured figures");
  const auto known = lessonFigureNames(l);
  for (const auto& name : placeholdersIn(l.reveal)) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string names;
    for (const auto& k : known) names += (names.empty() ? "" : ", ") + k;
    r.fail("reveal", "uses {" + clipText(name, 40) + "}, which no experiment of this lesson measures (available: " + names + ")");
  }
  return l;
}

Lesson loadLesson(const std::string& path, const std::string& projectsDir) {
  const json j = readJsonFile(path, "lesson file", "check the path (lessons are in projects/lessons/)",
                              "fix the file or start from a shipped lesson");
  Lesson l = parseLesson(j, path, projectsDir);
  l.sourcePath = path;
  return l;
}

// The projects a lesson folder's lessons refer to: an installed share/mirrorlab/lessons has its
// projects beside it (share/mirrorlab/projects); the source tree's projects/lessons sits inside them.
static std::string lessonProjectsDir(const std::string& dir) {
  const fs::path d = fs::path(dir).lexically_normal();
  const fs::path parent = (d.filename().empty() ? d.parent_path() : d).parent_path();
  std::error_code ec;
  if (parent.filename() == "mirrorlab" && fs::is_directory(parent / "projects", ec)) return (parent / "projects").string();
  return parent.string();
}

LessonFolder scanLessons(const std::string& dir, const std::string& projectsDir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UserError("lesson folder '" + dir +
                    "' does not exist: reinstall Mirrorlab, set MIRRORLAB_LESSONS or give --dir; searched:\n" +
                    describeSharedDataSearch());
  const std::string projects = projectsDir.empty() ? lessonProjectsDir(dir) : projectsDir;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && e.path().extension() == ".json") files.push_back(e.path());
  if (ec)
    throw UserError("lesson folder '" + dir + "' cannot be read (" + ec.message() + "): check its permissions or give --dir");
  std::sort(files.begin(), files.end());
  LessonFolder out;
  std::set<std::string> ids;
  for (const auto& f : files) {
    try {
      Lesson l = loadLesson(f.string(), projects);
      if (!ids.insert(l.id).second)
        throw UserError(f.string() + ": id '" + l.id + "' is already used by another lesson in " + dir + ": ids must be unique");
      out.lessons.push_back(std::move(l));
    } catch (const UserError& e) {
      out.problems.push_back(e.what());
    }
  }
  std::stable_sort(out.lessons.begin(), out.lessons.end(), [](const Lesson& a, const Lesson& b) { return a.order < b.order; });
  return out;
}

std::vector<Lesson> loadLessons(const std::string& dir, const std::string& projectsDir) {
  LessonFolder f = scanLessons(dir, projectsDir);
  if (!f.problems.empty()) throw UserError(f.problems.front());
  return std::move(f.lessons);
}

std::string defaultLessonsDir() {
  if (const char* env = std::getenv("MIRRORLAB_LESSONS"); env && *env) return env;
  return findSharedData().lessonsDir;
}

// A plain scan, not std::regex: libstdc++'s regex recurses per character and a long reveal
// text exhausted the stack ("learn list" crashed for every lesson because of one).
std::vector<std::string> placeholdersIn(const std::string& text) {
  std::vector<std::string> out;
  auto nameChar = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t open = text.find('{'); open != std::string::npos; open = text.find('{', open + 1)) {
    size_t end = open + 1;
    while (end < text.size() && nameChar(text[end])) ++end;
    if (end == open + 1 || end >= text.size() || text[end] != '}') continue;
    const std::string name = text.substr(open + 1, end - open - 1);
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

std::vector<std::string> lessonFigureNames(const Lesson& lesson) {
  static const char* perExperiment[] = {
      "final_acc",         "final_loss",      "train_loss", "steps",           "seconds",  "samples_per_sec", "step_ms",
      "sync_share",        "allreduce_share", "wait_share", "checksums_equal", "checksum", "replicas",        "global_batch",
      "per_replica_batch", "shard_sizes",     "lr",         "steps_per_epoch", "status",   "max_wait_ms",     "min_wait_ms",
      "skipped_steps",     "loss_scale",      "first_loss", "loss_diff"};
  static const char* perDeviceCount[] = {"speedup", "efficiency", "sync_share", "step_ms", "samples_per_sec"};
  std::vector<std::string> names = {"checksums_equal", "params", "gradient_kib", "host_cores", "experiments"};
  std::set<int> counts;
  bool multi = false;
  for (const auto& x : lesson.experiments) {
    for (const char* f : perExperiment) names.push_back(std::string(f) + "_" + x.label);
    const int n = x.devices.size();
    counts.insert(n);
    multi = multi || n > 1;
  }
  for (int n : counts)
    for (const char* f : perDeviceCount) names.push_back(std::string(f) + "_" + std::to_string(n));
  if (lesson.experiments.size() >= 2) names.insert(names.end(), {"max_loss_diff", "final_acc_diff"});
  if (multi) names.push_back("replica_grad_diff");
  return names;
}

}  // namespace ml
