// The screens' words for project file fields: the screen and field of each key (see the header).
#include "ScreenWords.h"

#include <map>

namespace ml {

namespace {

struct Place {
  const char* screen;
  const char* field;
};

// Section.key -> where the studio shows it. Kept next to the screens' labels.
// Long: a table, one line per project key.
const std::map<std::string, Place>& places() {
  static const std::map<std::string, Place> m = {
      {"name", {"Model screen", "Project name"}},
      {"description", {"Model screen", "Description"}},
      {"schema_version", {"", "File format version"}},
      {"model", {"Model screen", "Model"}},
      {"model.input_shape", {"Model screen", "Input shape"}},
      {"model.layers", {"Model screen", "Layers"}},
      {"data", {"Data screen", "Data"}},
      {"data.kind", {"Data screen", "Data set"}},
      {"data.path", {"Data screen", "Folder / Training file"}},
      {"data.train_images", {"Data screen", "Train images"}},
      {"data.train_labels", {"Data screen", "Train labels"}},
      {"data.test_images", {"Data screen", "Test images"}},
      {"data.test_labels", {"Data screen", "Test labels"}},
      {"data.label_column", {"Data screen", "Label column"}},
      {"data.standardize", {"Data screen", "Standardize"}},
      {"data.test_path", {"Data screen", "Test file"}},
      {"data.samples", {"Data screen", "Samples"}},
      {"data.classes", {"Data screen", "Classes"}},
      {"data.features", {"Data screen", "Features"}},
      {"data.noise", {"Data screen", "Noise"}},
      {"data.validation_split", {"Data screen", "Validation split"}},
      {"data.seed", {"Data screen", "Seed"}},
      {"training", {"Training screen", "Training"}},
      {"training.epochs", {"Training screen", "Epochs"}},
      {"training.batch_size", {"Training screen", "Batch size"}},
      {"training.per_device_batch", {"Training screen", "Batch size"}},
      {"training.loss", {"Training screen", "Loss"}},
      {"training.from_logits", {"Training screen", "Loss from logits"}},
      {"training.metrics", {"Training screen", "Metrics"}},
      {"training.seed", {"Training screen", "Seed"}},
      {"training.lr_scaling", {"Training screen", "Scaling rule"}},
      {"training.lr_reference_batch", {"Training screen", "Rate set for"}},
      {"training.warmup_epochs", {"Training screen", "Warm-up"}},
      {"training.lr_decay_epochs", {"Training screen", "Decay after"}},
      {"training.lr_decay_factor", {"Training screen", "Decay factor"}},
      {"training.accumulate", {"Training screen", "Accumulation"}},
      {"training.checkpoint_every", {"Training screen", "Checkpoint every"}},
      {"training.checkpoint_keep", {"Training screen", "Checkpoints kept"}},
      {"training.precision", {"Training screen", "Precision"}},
      {"training.loss_scale", {"Training screen", "Loss scale"}},
      {"training.loss_scale_growth_steps", {"Training screen", "Loss scale growth"}},
      {"training.optimizer", {"Training screen", "Optimizer"}},
      {"training.optimizer.name", {"Training screen", "Optimizer"}},
      {"training.optimizer.learning_rate", {"Training screen", "Base rate"}},
      {"training.optimizer.momentum", {"Training screen", "Momentum"}},
      {"training.optimizer.nesterov", {"Training screen", "Nesterov momentum"}},
      {"training.optimizer.beta_1", {"Training screen", "β₁"}},
      {"training.optimizer.beta_2", {"Training screen", "β₂"}},
      {"training.optimizer.rho", {"Training screen", "ρ"}},
      {"training.optimizer.epsilon", {"Training screen", "ε"}},
      {"distribute", {"Devices screen", "Devices"}},
      {"distribute.devices", {"Devices screen", "Devices"}},
      {"distribute.allreduce", {"Devices screen", "All-reduce"}},
      {"distribute.bucket_bytes", {"Devices screen", "Gradient bucket"}},
      {"distribute.threads_per_device", {"Devices screen", "Threads per device"}},
      {"distribute.shard_optimizer", {"Devices screen", "Shard the optimizer update"}},
      {"distribute.tf32", {"Devices screen", "TF32 on GPUs"}},
      {"distribute.allreduce_dtype", {"Devices screen", "Gradients on the wire"}},
      {"distribute.workers", {"Devices screen", "Workers"}},
      {"distribute.faults", {"Run menu", "Inject a Fault"}},
      // Fields the file and the command line set but no screen shows.
      {"distribute.hang_seconds", {"", "Hang timeout"}},
      {"distribute.straggler_factor", {"", "Straggler factor"}},
  };
  return m;
}

// "training.optimizer" -> "the file's training › optimizer section".
std::string sectionInWords(const std::string& section) {
  if (section.empty()) return "at the top of the file";
  std::string words = section;
  for (size_t at = 0; (at = words.find('.', at)) != std::string::npos;) words.replace(at, 1, " › ");
  return "in the file's " + words + " section";
}

const Place* placeOf(const std::string& path) {
  const auto it = places().find(path);
  return it == places().end() ? nullptr : &it->second;
}

}  // namespace

std::string ScreenWords::field(const std::string& path) const {
  // A layer: "model.layers[2]" or "model.layers[2].units".
  if (path.rfind("model.layers[", 0) == 0) {
    const size_t close = path.find(']');
    if (close != std::string::npos) {
      size_t index = 0;
      try {
        index = static_cast<size_t>(std::stoul(path.substr(13, close - 13)));
      } catch (...) {
      }
      const std::string rest = close + 2 < path.size() ? path.substr(close + 2) : "";
      return rest.empty() ? layer(index, "", "") : layerArg(index, "", "", rest);
    }
  }
  // One value of the input shape: "model.input_shape[1]".
  if (path.rfind("model.input_shape[", 0) == 0) {
    const std::string index = path.substr(18, path.find(']') - 18);
    int n = 0;
    try {
      n = std::stoi(index) + 1;
    } catch (...) {
    }
    return "Model screen › Input shape, value " + std::to_string(n) + " (input_shape in the file's model section)";
  }
  const size_t dot = path.rfind('.');
  const std::string section = dot == std::string::npos ? "" : path.substr(0, dot);
  const std::string key = dot == std::string::npos ? path : path.substr(dot + 1);
  const Place* place = placeOf(path);
  std::string out;
  if (place) out = std::string(place->screen) + (*place->screen ? " › " : "") + place->field + " ";
  if (key.empty()) return out + "(the file's top level)";
  // A section itself ("training") is named as the section; a key as the key in its section.
  if (dot == std::string::npos && place && *place->screen && path != "name" && path != "description")
    return out + "(the file's " + path + " section)";
  return out + "(" + key + " " + sectionInWords(section) + ")";
}

std::string ScreenWords::fieldPlace(const std::string& path) const {
  const Place* place = placeOf(path);
  if (!place || !*place->screen) return field(path);
  return std::string(place->screen) + " › " + place->field;
}

std::string ScreenWords::fieldHeading(const std::string& path) const {
  const Place* place = placeOf(path);
  if (!place || !*place->screen) return field(path);
  return std::string(place->screen) + ", " + place->field;
}

std::string ScreenWords::fieldLabel(const std::string& path) const {
  const Place* place = placeOf(path);
  return place ? std::string(place->field) : FieldWords::fieldLabel(path);
}

std::string ScreenWords::argLabel(const std::string& key) const {
  std::string label = key;
  for (char& c : label)
    if (c == '_') c = ' ';
  if (!label.empty() && label[0] >= 'a' && label[0] <= 'z') label[0] = static_cast<char>(label[0] - 'a' + 'A');
  return label;
}

std::string ScreenWords::layerBrief(size_t index, const std::string& name, const std::string& type) const {
  std::string out = "Model screen › layer " + std::to_string(index + 1);
  if (!name.empty()) out += " '" + name + "'";
  if (!type.empty()) out += " (" + type + ")";
  return out;
}

std::string ScreenWords::layer(size_t index, const std::string& name, const std::string& type) const {
  return layerBrief(index, name, type) + " (entry " + std::to_string(index + 1) + " of layers in the file's model section)";
}

std::string ScreenWords::layerArg(size_t index, const std::string& name, const std::string& type, const std::string& key) const {
  return layerBrief(index, name, type) + " › " + argLabel(key) + " (" + key + " of entry " + std::to_string(index + 1) +
         " of layers in the file's model section)";
}

std::string ScreenWords::lastLayerHeading(const std::string& name) const { return "Model screen, last layer '" + name + "'"; }

// The button sits on the Model screen: a message about a field elsewhere says so.
std::string ScreenWords::fitToData(const std::string& fromPath) const {
  return fromPath.rfind("model", 0) == 0 ? "Fit to data" : "Fit to data on the Model screen";
}

const ScreenWords& screenWords() {
  static const ScreenWords words;
  return words;
}

}  // namespace ml
