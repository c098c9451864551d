// Project files: parsing with errors that name the field, the value and what is allowed.
#include "project/Project.h"

#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "Error.h"
#include "JsonFile.h"

namespace ml {

using nlohmann::json;

namespace {

struct Reader : JsonFieldReader {
  template <typename T>
  void get(const json& obj, const std::string& path, const char* key, T& out, const char* what) const {
    if (!obj.contains(key)) return;
    const json& v = obj.at(key);
    const std::string field = path.empty() ? key : path + "." + key;
    try {
      if constexpr (std::is_same_v<T, bool>) {
        if (!v.is_boolean()) throw 0;
      } else if constexpr (std::is_integral_v<T>) {
        if (!v.is_number_integer() && !v.is_number_unsigned()) throw 0;
        // Refuse values the field cannot hold instead of letting them wrap (-1 as a seed, 2^32+1 epochs).
        if (v.is_number_unsigned()) {
          if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())) throw 0;
        } else {
          const int64_t x = v.get<int64_t>();
          if constexpr (std::is_unsigned_v<T>) {
            if (x < 0) throw 0;
          } else if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) || x > static_cast<int64_t>(std::numeric_limits<T>::max())) {
            throw 0;
          }
        }
      } else if constexpr (std::is_floating_point_v<T>) {
        if (!v.is_number()) throw 0;
      } else if constexpr (std::is_same_v<T, std::string>) {
        if (!v.is_string()) throw 0;
      }
      out = v.get<T>();
    } catch (...) {
      fail(field, std::string("must be ") + what + ", got " + v.dump());
    }
  }
};

}  // namespace

json Project::toJson() const {
  json layers = json::array();
  for (const auto& l : model.layers) {
    json j = l.args.is_object() ? l.args : json::object();
    j["type"] = l.type;
    if (!l.name.empty()) j["name"] = l.name;
    layers.push_back(j);
  }
  json opt{{"name", training.optimizer.name}, {"learning_rate", training.optimizer.learningRate}};
  if (training.optimizer.name == "sgd") {
    opt["momentum"] = training.optimizer.momentum;
    opt["nesterov"] = training.optimizer.nesterov;
  } else if (training.optimizer.name == "adam") {
    opt["beta_1"] = training.optimizer.beta1;
    opt["beta_2"] = training.optimizer.beta2;
    opt["epsilon"] = training.optimizer.epsilon;
  } else if (training.optimizer.name == "rmsprop") {
    opt["rho"] = training.optimizer.rho;
    opt["momentum"] = training.optimizer.momentum;
    opt["epsilon"] = training.optimizer.epsilon;
  }
  json d{{"kind", data.kind}};
  if (!data.path.empty()) d["path"] = data.path;
  if (data.kind == "idx") {
    d["train_images"] = data.trainImages;
    d["train_labels"] = data.trainLabels;
    if (!data.testImages.empty()) d["test_images"] = data.testImages;
    if (!data.testLabels.empty()) d["test_labels"] = data.testLabels;
  }
  if (data.kind == "csv") {
    d["label_column"] = data.labelColumn;
    d["standardize"] = data.standardize;
    if (!data.testPath.empty()) d["test_path"] = data.testPath;
  }
  if (data.kind == "spirals" || data.kind == "blobs") {
    d["samples"] = data.samples;
    d["classes"] = data.classes;
    d["noise"] = data.noise;
    d["seed"] = data.seed;
    if (data.kind == "blobs") d["features"] = data.features;
  }
  if (data.validationSplit > 0) d["validation_split"] = data.validationSplit;
  json out{
      {"schema_version", schemaVersion},
      {"name", name},
      {"description", description},
      {"model", {{"input_shape", model.inputShape}, {"layers", layers}}},
      {"data", d},
      {"training",
       {{"epochs", training.epochs},
        {"batch_size", training.batchSize},
        {"per_device_batch", training.perDeviceBatch},
        {"optimizer", opt},
        {"loss", training.loss},
        {"from_logits", training.fromLogits},
        {"metrics", training.metrics},
        {"seed", training.seed},
        {"lr_scaling", training.lrScaling},
        {"warmup_epochs", training.warmupEpochs},
        {"accumulate", training.accumulate}}},
      {"distribute",
       {{"devices", distribute.devices},
        {"allreduce", distribute.allreduce},
        {"bucket_bytes", distribute.bucketBytes},
        {"threads_per_device", distribute.threadsPerDevice}}},
  };
  // Written only when set, so that files which rely on the default keep their exact text.
  if (training.lrReferenceBatch > 0) out["training"]["lr_reference_batch"] = training.lrReferenceBatch;
  return out;
}

Project Project::fromJson(const json& j, const std::string& source) {
  Reader r{{source}};
  Project p;
  r.onlyKeys(j, "", {"schema_version", "name", "description", "model", "data", "training", "distribute"});
  r.get(j, "", "schema_version", p.schemaVersion, "an integer");
  if (p.schemaVersion > kProjectSchemaVersion || p.schemaVersion < 1)
    r.fail("schema_version", "is " + std::to_string(p.schemaVersion) + " but this Mirrorlab reads versions 1.." +
                                 std::to_string(kProjectSchemaVersion) + ": update Mirrorlab");
  r.get(j, "", "name", p.name, "a string");
  r.get(j, "", "description", p.description, "a string");
  if (!j.contains("model")) r.fail("model", "is missing: a project needs a model with input_shape and layers");
  const json& m = j.at("model");
  r.onlyKeys(m, "model", {"input_shape", "layers"});
  if (!m.contains("input_shape") || !m.at("input_shape").is_array())
    r.fail("model.input_shape", "must be an array of positive integers, e.g. [28, 28]");
  for (const auto& d : m.at("input_shape")) {
    if (!d.is_number_integer() || d.get<int64_t>() <= 0)
      r.fail("model.input_shape", "must hold positive integers, got " + m.at("input_shape").dump());
    p.model.inputShape.push_back(d.get<int64_t>());
  }
  if (!m.contains("layers") || !m.at("layers").is_array()) r.fail("model.layers", "must be an array of layers");
  int idx = 0;
  for (const auto& l : m.at("layers")) {
    const std::string path = "model.layers[" + std::to_string(idx++) + "]";
    if (!l.is_object() || !l.contains("type") || !l.at("type").is_string())
      r.fail(path, "must be an object with a \"type\" (Dense, Activation, Flatten, Dropout), got " + l.dump());
    LayerSpec s;
    s.type = l.at("type").get<std::string>();
    r.get(l, path, "name", s.name, "a string");
    s.args = l;
    s.args.erase("type");
    s.args.erase("name");
    p.model.layers.push_back(std::move(s));
  }
  if (j.contains("data")) {
    const json& d = j.at("data");
    r.onlyKeys(d, "data", {"kind", "path", "train_images", "train_labels", "test_images", "test_labels", "label_column",
                           "standardize", "test_path", "samples", "classes", "features", "noise", "validation_split", "seed"});
    r.get(d, "data", "kind", p.data.kind, "a string");
    r.get(d, "data", "path", p.data.path, "a string");
    r.get(d, "data", "train_images", p.data.trainImages, "a path");
    r.get(d, "data", "train_labels", p.data.trainLabels, "a path");
    r.get(d, "data", "test_images", p.data.testImages, "a path");
    r.get(d, "data", "test_labels", p.data.testLabels, "a path");
    r.get(d, "data", "label_column", p.data.labelColumn, "a column name");
    r.get(d, "data", "standardize", p.data.standardize, "true or false");
    r.get(d, "data", "test_path", p.data.testPath, "a path");
    r.get(d, "data", "samples", p.data.samples, "an integer");
    r.get(d, "data", "classes", p.data.classes, "an integer");
    r.get(d, "data", "features", p.data.features, "an integer");
    r.get(d, "data", "noise", p.data.noise, "a number");
    r.get(d, "data", "validation_split", p.data.validationSplit, "a number in [0, 1)");
    r.get(d, "data", "seed", p.data.seed, "a non-negative integer");
  }
  if (j.contains("training")) {
    const json& t = j.at("training");
    r.onlyKeys(t, "training", {"epochs", "batch_size", "per_device_batch", "optimizer", "loss", "from_logits", "metrics",
                               "seed", "lr_scaling", "lr_reference_batch", "warmup_epochs", "accumulate"});
    r.get(t, "training", "epochs", p.training.epochs, "a positive integer");
    r.get(t, "training", "batch_size", p.training.batchSize, "a positive integer");
    r.get(t, "training", "per_device_batch", p.training.perDeviceBatch, "true or false");
    r.get(t, "training", "loss", p.training.loss, "a loss name");
    r.get(t, "training", "from_logits", p.training.fromLogits, "true or false");
    r.get(t, "training", "seed", p.training.seed, "a non-negative integer");
    r.get(t, "training", "lr_scaling", p.training.lrScaling, "none, linear or sqrt");
    r.get(t, "training", "lr_reference_batch", p.training.lrReferenceBatch, "a global batch size (0: the batch_size field)");
    r.get(t, "training", "warmup_epochs", p.training.warmupEpochs, "a number of epochs");
    r.get(t, "training", "accumulate", p.training.accumulate, "a positive integer");
    if (t.contains("metrics")) {
      if (!t.at("metrics").is_array()) r.fail("training.metrics", "must be an array such as [\"accuracy\"]");
      p.training.metrics.clear();
      for (const auto& mm : t.at("metrics")) {
        if (!mm.is_string()) r.fail("training.metrics", "must hold metric names, got " + mm.dump());
        p.training.metrics.push_back(mm.get<std::string>());
      }
    }
    if (t.contains("optimizer")) {
      const json& o = t.at("optimizer");
      auto& os = p.training.optimizer;
      if (o.is_string()) {
        os.name = o.get<std::string>();
      } else {
        r.onlyKeys(o, "training.optimizer", {"name", "learning_rate", "momentum", "nesterov", "beta_1", "beta_2", "rho", "epsilon"});
        r.get(o, "training.optimizer", "name", os.name, "sgd, adam or rmsprop");
      }
      // Keras' defaults per optimizer, then the file's values.
      if (os.name == "sgd") os.learningRate = 0.01;
      if (o.is_object()) {
        r.get(o, "training.optimizer", "learning_rate", os.learningRate, "a positive number");
        r.get(o, "training.optimizer", "momentum", os.momentum, "a number in [0, 1)");
        r.get(o, "training.optimizer", "nesterov", os.nesterov, "true or false");
        r.get(o, "training.optimizer", "beta_1", os.beta1, "a number in [0, 1)");
        r.get(o, "training.optimizer", "beta_2", os.beta2, "a number in [0, 1)");
        r.get(o, "training.optimizer", "rho", os.rho, "a number in [0, 1)");
        r.get(o, "training.optimizer", "epsilon", os.epsilon, "a positive number");
      }
    }
  }
  if (j.contains("distribute")) {
    const json& d = j.at("distribute");
    r.onlyKeys(d, "distribute", {"devices", "allreduce", "bucket_bytes", "threads_per_device"});
    r.get(d, "distribute", "devices", p.distribute.devices, "a device list such as \"cpu:2\"");
    r.get(d, "distribute", "allreduce", p.distribute.allreduce, "ring or reduce-to-one");
    r.get(d, "distribute", "bucket_bytes", p.distribute.bucketBytes, "a positive integer");
    r.get(d, "distribute", "threads_per_device", p.distribute.threadsPerDevice, "a non-negative integer");
  }
  validate(p, source);
  return p;
}

void validate(const Project& p, const std::string& source) {
  auto fail = [&](const std::string& field, const std::string& msg) { throw UserError(source + ": " + field + " " + msg); };
  const auto& t = p.training;
  if (t.epochs < 1) fail("training.epochs", "must be at least 1, got " + std::to_string(t.epochs));
  if (t.batchSize < 1) fail("training.batch_size", "must be at least 1, got " + std::to_string(t.batchSize));
  if (t.accumulate < 1) fail("training.accumulate", "must be at least 1, got " + std::to_string(t.accumulate));
  if (!(t.optimizer.learningRate > 0)) fail("training.optimizer.learning_rate", "must be positive");
  const auto& on = t.optimizer.name;
  if (on != "sgd" && on != "adam" && on != "rmsprop") fail("training.optimizer.name", "is '" + on + "' (allowed: sgd, adam, rmsprop)");
  if (t.optimizer.momentum < 0 || t.optimizer.momentum >= 1) fail("training.optimizer.momentum", "must be in [0, 1)");
  if (t.lrScaling != "none" && t.lrScaling != "linear" && t.lrScaling != "sqrt")
    fail("training.lr_scaling", "is '" + t.lrScaling + "' (allowed: none, linear, sqrt)");
  if (t.warmupEpochs < 0) fail("training.warmup_epochs", "must be 0 or more");
  if (t.lrReferenceBatch < 0) fail("training.lr_reference_batch", "must be 0 (the batch_size field) or a global batch size");
  const auto& k = p.data.kind;
  if (k != "fashion-mnist" && k != "idx" && k != "csv" && k != "spirals" && k != "blobs")
    fail("data.kind", "is '" + k + "' (allowed: fashion-mnist, idx, csv, spirals, blobs)");
  if (p.data.validationSplit < 0 || p.data.validationSplit >= 1) fail("data.validation_split", "must be in [0, 1)");
  if ((k == "spirals" || k == "blobs") && (p.data.samples < 1 || p.data.classes < 1 || p.data.features < 1))
    fail("data", "samples, classes and features must be positive");
  const auto& a = p.distribute.allreduce;
  if (a != "ring" && a != "reduce-to-one" && a != "nccl")
    fail("distribute.allreduce", "is '" + a + "' (allowed: ring, reduce-to-one, nccl)");
  if (p.distribute.bucketBytes < 4) fail("distribute.bucket_bytes", "must be at least 4");
}

Project Project::load(const std::string& path) {
  return fromJson(readJsonFile(path, "project file", "check the path (example projects are in projects/)",
                               "fix the file or start from projects/fashion-mlp.json"),
                  path);
}

void Project::save(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw UserError("cannot write project file '" + path + "': check the folder exists and is writable");
  out << toJson().dump(2) << "\n";
  if (!out) throw UserError("writing project file '" + path + "' failed: is the disk full?");
}

}  // namespace ml
