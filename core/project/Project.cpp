// Project files: parsing with errors that name the field, the value and what is allowed.
#include "project/Project.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "AtomicFile.h"
#include "Error.h"
#include "Field.h"
#include "Format.h"
#include "JsonFile.h"
#include "Limits.h"
#include "nn/Precision.h"
#include "project/LayerJson.h"
#include "project/Settings.h"

namespace ml {

using nlohmann::json;

namespace {

// The allowed range of every whole-number field: validate() checks it, and the reader names it
// when a value does not even fit the field's type (epochs 1e20), instead of the type's limits.
struct CountRange {
  int64_t lo, hi;
};
const std::map<std::string, CountRange>& countRanges() {
  static const std::map<std::string, CountRange> ranges = {
      {"training.epochs", {1, 1000000}},
      {"training.batch_size", {1, kMaxBatch}},
      {"training.accumulate", {1, 65536}},
      {"training.loss_scale_growth_steps", {1, int64_t{1} << 40}},
      {"training.checkpoint_every", {1, int64_t{1} << 40}},
      {"training.checkpoint_keep", {1, 1000}},
      {"data.samples", {1, int64_t{1} << 28}},
      {"data.classes", {1, 1000}},
      {"data.features", {1, 100000}},
      {"distribute.bucket_bytes", {4, int64_t{1} << 32}},
      {"distribute.threads_per_device", {0, 1024}},
      {"distribute.workers", {1, 1024}},
  };
  return ranges;
}

std::string countRangeText(int64_t lo, int64_t hi) {
  return "must be at least " + std::to_string(lo) + " and at most " + std::to_string(hi);
}

struct Reader : JsonFieldReader {
  // Fields are named in the installed words (Field.h; the screens' for the CLI and the studio).
  template <typename T>
  void get(const json& obj, const std::string& path, const char* key, T& out, const char* what) const {
    if (!obj.contains(key)) return;
    const json& v = obj.at(key);
    const std::string field = path.empty() ? key : path + "." + key;
    auto refuse = [&] { fail(field, std::string("must be ") + what + ", got " + shortDump(v)); };
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) refuse();
      out = v.get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      // Refuse values the field cannot hold instead of letting them wrap (-1 as a seed, 2^32+1
      // epochs) or be cut (2.7 epochs); 3.0 and 1e3 are whole numbers and accepted.
      using L = std::numeric_limits<T>;
      const auto known = countRanges().find(field);
      auto outOfRange = [&](const char* tooWhat) {
        if (known != countRanges().end())
          fail(field, "is out of range: " + countRangeText(known->second.lo, known->second.hi) + ", got " + shortDump(v));
        fail(field, std::string(tooWhat) + what + " from " + std::to_string(L::min()) + " to " + std::to_string(L::max()) +
                        ", got " + shortDump(v));
      };
      if (v.is_number_unsigned()) {
        if (v.get<uint64_t>() > static_cast<uint64_t>(L::max())) {
          if (known != countRanges().end()) outOfRange("");
          fail(field,
               std::string("is too large: must be ") + what + " up to " + std::to_string(L::max()) + ", got " + shortDump(v));
        }
        out = static_cast<T>(v.get<uint64_t>());
      } else if (v.is_number_integer()) {
        const int64_t x = v.get<int64_t>();
        if (x < static_cast<int64_t>(L::min()) || (x > 0 && static_cast<uint64_t>(x) > static_cast<uint64_t>(L::max())))
          outOfRange("is out of range: must be ");
        out = static_cast<T>(x);
      } else if (v.is_number_float()) {
        const double d = v.get<double>();
        if (d != std::floor(d)) fail(field, std::string("must be a whole number (") + what + "), got " + shortDump(v));
        const double hi = std::ldexp(1.0, L::digits);  // exclusive: 2^63 for int64_t
        const double lo = L::is_signed ? -hi : 0.0;
        if (!(d >= lo && d < hi)) outOfRange("is out of range: must be ");
        out = static_cast<T>(d);
      } else {
        refuse();
      }
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) refuse();
      out = v.get<T>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) refuse();
      out = v.get<std::string>();
    }
  }
};

}  // namespace

// Long for the same reason as fromJson: one line per key, in the file's order, the mirror of
// the reader (a key written here and not read there is easy to see).
json Project::toJson() const {
  json layers = json::array();
  for (const auto& l : model.layers) layers.push_back(layerToJson(l));
  json opt{{"name", toString(training.optimizer.kind)}, {"learning_rate", training.optimizer.learningRate}};
  if (training.optimizer.kind == OptimizerKind::Sgd) {
    opt["momentum"] = training.optimizer.momentum;
    opt["nesterov"] = training.optimizer.nesterov;
  } else if (training.optimizer.kind == OptimizerKind::Adam) {
    opt["beta_1"] = training.optimizer.beta1;
    opt["beta_2"] = training.optimizer.beta2;
    opt["epsilon"] = training.optimizer.epsilon;
  } else {
    opt["rho"] = training.optimizer.rho;
    opt["momentum"] = training.optimizer.momentum;
    opt["epsilon"] = training.optimizer.epsilon;
  }
  json d{{"kind", toString(data.kind)}};
  if (!data.path.empty()) d["path"] = data.path;
  if (data.kind == DataKind::Idx) {
    d["train_images"] = data.trainImages;
    d["train_labels"] = data.trainLabels;
    if (!data.testImages.empty()) d["test_images"] = data.testImages;
    if (!data.testLabels.empty()) d["test_labels"] = data.testLabels;
  }
  if (data.kind == DataKind::Csv) {
    d["label_column"] = data.labelColumn;
    d["standardize"] = data.standardize;
    if (!data.testPath.empty()) d["test_path"] = data.testPath;
  }
  if (generated(data.kind)) {
    d["samples"] = data.samples;
    d["classes"] = data.classes;
    d["noise"] = data.noise;
    d["seed"] = data.seed;
    if (data.kind == DataKind::Blobs) d["features"] = data.features;
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
        {"loss", lossText(training)},
        {"from_logits", training.fromLogits},
        {"metrics", training.metrics},
        {"seed", training.seed},
        {"lr_scaling", toString(training.lrScaling)},
        {"warmup_epochs", training.warmupEpochs},
        {"accumulate", training.accumulate}}},
      {"distribute",
       {{"devices", distribute.devices.spec},
        {"allreduce", toString(distribute.allreduce)},
        {"bucket_bytes", distribute.bucketBytes},
        {"threads_per_device", distribute.threadsPerDevice}}},
  };
  // Written only when set, so that files which rely on the default keep their exact text.
  if (training.lrReferenceBatch > 0) out["training"]["lr_reference_batch"] = training.lrReferenceBatch;
  if (!training.lrDecayEpochs.empty()) {
    out["training"]["lr_decay_epochs"] = training.lrDecayEpochs;
    out["training"]["lr_decay_factor"] = training.lrDecayFactor;
  }
  if (training.checkpointEvery != 1 || training.checkpointInSteps)
    out["training"]["checkpoint_every"] = checkpointEveryText(training.checkpointEvery, training.checkpointInSteps);
  if (training.checkpointKeep != 3) out["training"]["checkpoint_keep"] = training.checkpointKeep;
  if (training.precision != Precision::Float32) out["training"]["precision"] = toString(training.precision);
  if (!training.lossScaling)
    out["training"]["loss_scale"] = "none";
  else if (training.lossScale != 32768.0)
    out["training"]["loss_scale"] = training.lossScale;
  if (training.lossScaleGrowthSteps != 2000) out["training"]["loss_scale_growth_steps"] = training.lossScaleGrowthSteps;
  if (distribute.hangSeconds != 60) out["distribute"]["hang_seconds"] = distribute.hangSeconds;
  if (distribute.stragglerFactor != 1.0) out["distribute"]["straggler_factor"] = distribute.stragglerFactor;
  if (!distribute.faults.empty()) out["distribute"]["faults"] = faultTexts(distribute.faults);
  if (distribute.shardOptimizer) out["distribute"]["shard_optimizer"] = true;
  if (distribute.tf32) out["distribute"]["tf32"] = true;
  if (distribute.allreduceDtype != AllReduceDtype::Float32)
    out["distribute"]["allreduce_dtype"] = toString(distribute.allreduceDtype);
  if (distribute.workers != 1) out["distribute"]["workers"] = distribute.workers;
  return out;
}

// Long (one block per section of the file, in the file's order) so that the reader can be
// checked against docs/PROJECT_FORMAT.md top to bottom; each key is a line or two.
Project Project::fromJson(const json& j, const std::string& source) {
  Reader r{{source, fieldInWords}};
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
      r.fail("model.input_shape", "must hold positive integers, got " + shortDump(m.at("input_shape")));
    p.model.inputShape.push_back(d.get<int64_t>());
  }
  if (!m.contains("layers") || !m.at("layers").is_array()) r.fail("model.layers", "must be an array of layers");
  // Each layer with the name the model will show (generated ones too), for its messages.
  std::vector<std::string> types, names;
  for (size_t i = 0; i < m.at("layers").size(); ++i) {
    const json& l = m.at("layers")[i];
    if (!l.is_object() || !l.contains("type") || !l.at("type").is_string())
      r.fail("model.layers[" + std::to_string(i) + "]",
             "must be an object with a \"type\" (" + layerTypeNames() + "), got " + shortDump(l));
    types.push_back(l.at("type").get<std::string>());
    names.push_back(l.contains("name") && l.at("name").is_string() ? l.at("name").get<std::string>() : "");
  }
  const std::vector<std::string> shown = layerNames(types, names);
  for (size_t i = 0; i < types.size(); ++i)
    p.model.layers.push_back(layerFromJson(m.at("layers")[i], LayerPlace{i, shown[i], types[i]}, source));
  if (j.contains("data")) {
    const json& d = j.at("data");
    r.onlyKeys(d, "data",
               {"kind", "path", "train_images", "train_labels", "test_images", "test_labels", "label_column", "standardize",
                "test_path", "samples", "classes", "features", "noise", "validation_split", "seed"});
    std::string kind = toString(p.data.kind);
    r.get(d, "data", "kind", kind, "a string");
    p.data.kind = dataKindSetting(kind, source);
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
    r.onlyKeys(t, "training",
               {"epochs", "batch_size", "per_device_batch", "optimizer", "loss", "from_logits", "metrics", "seed", "lr_scaling",
                "lr_reference_batch", "warmup_epochs", "lr_decay_epochs", "lr_decay_factor", "accumulate", "checkpoint_every",
                "checkpoint_keep", "precision", "loss_scale", "loss_scale_growth_steps"});
    if (t.contains("checkpoint_every")) {
      const json& c = t.at("checkpoint_every");
      if (c.is_number_integer())
        p.training.checkpointEvery = c.get<int64_t>();
      else if (c.is_string()) {
        try {
          parseCheckpointEvery(c.get<std::string>(), p.training.checkpointEvery, p.training.checkpointInSteps);
        } catch (const UserError&) {
          r.fail("training.checkpoint_every", "is '" + clipText(c.get<std::string>(), 40) +
                                                  "': write a whole number of steps or epochs, such as \"500 steps\" or "
                                                  "\"1 epoch\"");
        }
      } else
        r.fail("training.checkpoint_every", "must be a text such as \"1 epoch\" or \"500 steps\"");
    }
    r.get(t, "training", "checkpoint_keep", p.training.checkpointKeep, "a positive integer");
    r.get(t, "training", "epochs", p.training.epochs, "a positive integer");
    r.get(t, "training", "batch_size", p.training.batchSize, "a positive integer");
    r.get(t, "training", "per_device_batch", p.training.perDeviceBatch, "true or false");
    if (t.contains("loss")) {
      std::string loss;
      r.get(t, "training", "loss", loss, "a loss name");
      setLoss(p.training, loss, source);
    }
    r.get(t, "training", "from_logits", p.training.fromLogits, "true or false");
    r.get(t, "training", "seed", p.training.seed, "a non-negative integer");
    if (t.contains("lr_scaling")) {
      std::string rule;
      r.get(t, "training", "lr_scaling", rule, "none, linear or sqrt");
      p.training.lrScaling = lrRuleSetting(rule, source);
    }
    r.get(t, "training", "lr_reference_batch", p.training.lrReferenceBatch, "a global batch size (0: the batch_size field)");
    r.get(t, "training", "warmup_epochs", p.training.warmupEpochs, "a number of epochs");
    r.get(t, "training", "lr_decay_factor", p.training.lrDecayFactor, "a number above 0 and at most 1, such as 0.1");
    if (t.contains("lr_decay_epochs")) {
      const json& d = t.at("lr_decay_epochs");
      const char* how = "must be a list of epoch numbers in increasing order, such as [3, 7]";
      if (!d.is_array()) r.fail("training.lr_decay_epochs", std::string(how) + ", got " + shortDump(d));
      p.training.lrDecayEpochs.clear();
      for (const auto& e : d) {
        if (!e.is_number_integer() || e.get<int64_t>() < 1 ||
            (!p.training.lrDecayEpochs.empty() && e.get<int64_t>() <= p.training.lrDecayEpochs.back()))
          r.fail("training.lr_decay_epochs", std::string(how) + ", got " + shortDump(d));
        p.training.lrDecayEpochs.push_back(e.get<int64_t>());
      }
    }
    r.get(t, "training", "accumulate", p.training.accumulate, "a positive integer");
    std::string precision = toString(p.training.precision);
    r.get(t, "training", "precision", precision, "one of float32, mixed_bfloat16, mixed_float16");
    p.training.precision = precisionSetting(precision, source);
    if (t.contains("loss_scale") && t.at("loss_scale").is_string()) {
      if (t.at("loss_scale").get<std::string>() != "none")
        r.fail("training.loss_scale", "must be a positive number (the initial scale, 32768 by default) or \"none\", got " +
                                          shortDump(t.at("loss_scale")));
      p.training.lossScaling = false;
    } else {
      r.get(t, "training", "loss_scale", p.training.lossScale, "a positive number (the initial scale) or \"none\"");
    }
    r.get(t, "training", "loss_scale_growth_steps", p.training.lossScaleGrowthSteps, "a positive integer");
    if (t.contains("metrics")) {
      if (!t.at("metrics").is_array()) r.fail("training.metrics", "must be an array such as [\"accuracy\"]");
      p.training.metrics.clear();
      for (const auto& mm : t.at("metrics")) {
        if (!mm.is_string()) r.fail("training.metrics", "must hold metric names, got " + shortDump(mm));
        p.training.metrics.push_back(metricSetting(mm.get<std::string>(), source));
      }
    }
    if (t.contains("optimizer")) {
      const json& o = t.at("optimizer");
      auto& os = p.training.optimizer;
      std::string name = toString(os.kind);
      if (o.is_string()) {
        name = o.get<std::string>();
      } else {
        r.onlyKeys(o, "training.optimizer",
                   {"name", "learning_rate", "momentum", "nesterov", "beta_1", "beta_2", "rho", "epsilon"});
        r.get(o, "training.optimizer", "name", name, "sgd, adam or rmsprop");
      }
      os.kind = optimizerSetting(name, source);
      // Keras' defaults per optimizer, then the file's values.
      if (os.kind == OptimizerKind::Sgd) os.learningRate = 0.01;
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
    r.onlyKeys(d, "distribute",
               {"devices", "allreduce", "bucket_bytes", "threads_per_device", "hang_seconds", "straggler_factor", "faults",
                "shard_optimizer", "workers", "allreduce_dtype", "tf32"});
    r.get(d, "distribute", "hang_seconds", p.distribute.hangSeconds, "a number of seconds");
    r.get(d, "distribute", "straggler_factor", p.distribute.stragglerFactor, "a positive number");
    if (d.contains("faults")) {
      const json& f = d.at("faults");
      if (!f.is_array()) r.fail("distribute.faults", "must be a list of faults such as [\"slow:cpu:1=3x\"]");
      if (f.size() > 16) r.fail("distribute.faults", "has more than 16 entries");
      for (const auto& x : f) {
        if (!x.is_string()) r.fail("distribute.faults", "must hold texts such as \"hang:cpu:2@step=50\", got " + shortDump(x));
        p.distribute.faults.push_back(faultSetting(x.get<std::string>(), source));
      }
    }
    std::string devices = p.distribute.devices.spec, allreduce = toString(p.distribute.allreduce),
                dtype = toString(p.distribute.allreduceDtype);
    r.get(d, "distribute", "devices", devices, "a device list such as \"cpu:2\"");
    p.distribute.devices = devicesSetting(devices, source);
    r.get(d, "distribute", "allreduce", allreduce, "ring or reduce-to-one");
    p.distribute.allreduce = allReduceSetting(allreduce, source);
    r.get(d, "distribute", "allreduce_dtype", dtype, "float32 or bfloat16");
    p.distribute.allreduceDtype = allReduceDtypeSetting(dtype, source);
    r.get(d, "distribute", "bucket_bytes", p.distribute.bucketBytes, "a positive integer");
    r.get(d, "distribute", "threads_per_device", p.distribute.threadsPerDevice, "a non-negative integer");
    r.get(d, "distribute", "shard_optimizer", p.distribute.shardOptimizer, "true or false");
    r.get(d, "distribute", "tf32", p.distribute.tf32, "true or false");
    r.get(d, "distribute", "workers", p.distribute.workers, "a whole number of workers (processes), 1 or more");
  }
  validate(p, source);
  return p;
}

namespace {}  // namespace

// Every numeric field against its real range (Keras' for the optimizer's arguments): a NaN, an
// infinity or an impossible value is refused here, before anything is allocated or trained.
// Long: a flat list of one check per numeric field; splitting it would only scatter the ranges.
void validate(const Project& p, const std::string& source) {
  auto fail = [&](const std::string& field, const std::string& msg) {
    throw UserError(source + ": " + fieldInWords(field) + " " + msg, field);
  };
  auto range = [&](const std::string& field, double v, double lo, double hi, bool hiOpen, const char* why) {
    if (!(v >= lo && (hiOpen ? v < hi : v <= hi)))
      fail(field,
           "must be in [" + shortNumber(lo) + ", " + shortNumber(hi) + (hiOpen ? ")" : "]") + why + ", got " + shortNumber(v));
  };
  auto positive = [&](const std::string& field, double v, const char* why) {
    if (!(v > 0 && std::isfinite(v)))
      fail(field, std::string("must be a positive finite number") + why + ", got " + shortNumber(v));
  };
  auto count = [&](const std::string& field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) fail(field, countRangeText(lo, hi) + ", got " + std::to_string(v));
  };
  auto counted = [&](const std::string& field, int64_t v) {
    const CountRange& r = countRanges().at(field);
    count(field, v, r.lo, r.hi);
  };
  const auto& t = p.training;
  counted("training.epochs", t.epochs);
  counted("training.batch_size", t.batchSize);
  counted("training.accumulate", t.accumulate);
  const auto& o = t.optimizer;
  positive("training.optimizer.learning_rate", o.learningRate, "");
  range("training.optimizer.momentum", o.momentum, 0, 1, true, " (0 turns momentum off)");
  range("training.optimizer.beta_1", o.beta1, 0, 1, true, " (Keras: the decay of the first moment, default 0.9)");
  range("training.optimizer.beta_2", o.beta2, 0, 1, true, " (Keras: the decay of the second moment, default 0.999)");
  range("training.optimizer.rho", o.rho, 0, 1, true, " (Keras: the decay of the squared-gradient average, default 0.9)");
  positive("training.optimizer.epsilon", o.epsilon, " (Keras' default is 1e-07; 0 divides by zero)");
  range("training.warmup_epochs", t.warmupEpochs, 0, 1e6, false, " epochs (0: no warm-up)");
  for (size_t i = 0; i < t.lrDecayEpochs.size(); ++i)
    if (t.lrDecayEpochs[i] < 1 || (i > 0 && t.lrDecayEpochs[i] <= t.lrDecayEpochs[i - 1]))
      fail("training.lr_decay_epochs", "must be epoch numbers from 1 in increasing order, such as [3, 7]");
  if (!(t.lrDecayFactor > 0 && t.lrDecayFactor <= 1))
    fail("training.lr_decay_factor", "must be above 0 and at most 1 (the rate is multiplied by it; 0.1 lowers it tenfold), got " +
                                         shortNumber(t.lrDecayFactor));
  if (t.lossScaling)
    positive("training.loss_scale", t.lossScale,
             " (the initial loss scale of mixed_float16, 32768 by default; \"none\" turns loss scaling off)");
  counted("training.loss_scale_growth_steps", t.lossScaleGrowthSteps);
  if (t.lrReferenceBatch < 0) fail("training.lr_reference_batch", "must be 0 (the batch_size field) or a global batch size");
  for (size_t i = 0; i < p.model.inputShape.size(); ++i)
    count("model.input_shape[" + std::to_string(i) + "]", p.model.inputShape[i], 1, kMaxFeatures);
  int64_t features = 1;
  for (int64_t d : p.model.inputShape) {
    const auto f = mulChecked(features, d);
    if (!f || *f > kMaxFeatures)
      fail("model.input_shape", shapeToString(p.model.inputShape, false) + " has more than " + std::to_string(kMaxFeatures) +
                                    " values per sample: give the shape of one sample, e.g. [28, 28]");
    features = *f;
  }
  const DataKind k = p.data.kind;
  range("data.validation_split", p.data.validationSplit, 0, 1, true, " (the share held out for validation)");
  if (generated(k)) {
    counted("data.samples", p.data.samples);
    counted("data.classes", p.data.classes);
    if (k == DataKind::Blobs) counted("data.features", p.data.features);
    range("data.noise", p.data.noise, 0, 1e6, false, "");
  }
  counted("distribute.bucket_bytes", p.distribute.bucketBytes);
  counted("distribute.threads_per_device", p.distribute.threadsPerDevice);
  counted("distribute.workers", p.distribute.workers);
  counted("training.checkpoint_every", t.checkpointEvery);
  counted("training.checkpoint_keep", t.checkpointKeep);
  range("distribute.hang_seconds", p.distribute.hangSeconds, 0.05, 1e6, false,
        " (no replica progress for this long stops the run)");
  range("distribute.straggler_factor", p.distribute.stragglerFactor, 0.01, 1e6, false,
        " (times a replica's typical compute time)");
}

void parseCheckpointEvery(const std::string& text, int64_t& every, bool& inSteps) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  const bool steps = unit == "step" || unit == "steps";
  const bool epochs = unit.empty() || unit == "epoch" || unit == "epochs";
  if (i == 0 || i > 12 || (!steps && !epochs) || std::stoll(text.substr(0, i)) < 1)
    throw UserError("checkpoint interval '" + clipText(text, 40) +
                    "': write a whole number of steps or epochs, such as \"500steps\" or \"1epoch\"");
  every = std::stoll(text.substr(0, i));
  inSteps = steps;
}

std::string lossText(const TrainingSpec& t) {
  return t.lossSpelledMse && t.loss == LossKind::MeanSquaredError ? "mse" : toString(t.loss);
}

void setLoss(TrainingSpec& t, const std::string& name, const std::string& source) {
  t.loss = lossSetting(name, source);
  t.lossSpelledMse = name == "mse";
}

std::string checkpointEveryText(int64_t every, bool inSteps) {
  return std::to_string(every) + (inSteps ? (every == 1 ? " step" : " steps") : (every == 1 ? " epoch" : " epochs"));
}

Project Project::load(const std::string& path) {
  return fromJson(readJsonFile(path, "project file", "check the path (example projects are in projects/)",
                               "fix the file or start from projects/fashion-mlp.json"),
                  path);
}

void Project::save(const std::string& path) const { writeFileAtomically(path, toJson().dump(2) + "\n", "project file"); }

}  // namespace ml
