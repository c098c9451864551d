// Format names, the model's layers in inference form, the output-path checks, and the dispatch to
// one writer per format, each writing through a temporary file that is renamed when complete.
#include "export/ModelExport.h"

#include <filesystem>

#include "AtomicFile.h"
#include "Error.h"
#include "export/ExportWriters.h"
#include "nn/BatchNorm.h"
#include "nn/Conv2D.h"
#include "nn/Dense.h"
#include "nn/Pooling.h"
#include "nn/SimpleLayers.h"
#include "nn/WeightsFile.h"

namespace ml {

ExportFormat parseExportFormat(const std::string& name) {
  if (name == "onnx") return ExportFormat::Onnx;
  if (name == "torch" || name == "pytorch") return ExportFormat::Torch;
  if (name == "keras" || name == "tf" || name == "tensorflow") return ExportFormat::Keras;
  if (name == "keras-weights") return ExportFormat::KerasWeights;
  throw UserError("unknown export format '" + name + "' (allowed: onnx, torch, keras, keras-weights)");
}

const char* toString(ExportFormat f) {
  switch (f) {
    case ExportFormat::Onnx: return "onnx";
    case ExportFormat::Torch: return "torch";
    case ExportFormat::Keras: return "keras";
    case ExportFormat::KerasWeights: return "keras-weights";
  }
  return "?";
}

const char* formatTitle(ExportFormat f) {
  switch (f) {
    case ExportFormat::Onnx: return "ONNX model";
    case ExportFormat::Torch: return "PyTorch weights";
    case ExportFormat::Keras: return "Keras model";
    case ExportFormat::KerasWeights: return "Keras weights";
  }
  return "?";
}

const char* defaultSuffix(ExportFormat f) {
  switch (f) {
    case ExportFormat::Onnx: return ".onnx";
    case ExportFormat::Torch: return ".npz";
    case ExportFormat::Keras: return ".keras";
    case ExportFormat::KerasWeights: return ".weights.h5";
  }
  return "";
}

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ExportFormat resolveFormat(ExportFormat f, const std::string& path) {
  return f == ExportFormat::Keras && endsWith(path, ".weights.h5") ? ExportFormat::KerasWeights : f;
}

std::optional<ExportFormat> formatOfPath(const std::string& path) {
  for (ExportFormat f : {ExportFormat::Onnx, ExportFormat::Torch, ExportFormat::Keras, ExportFormat::KerasWeights})
    if (endsWith(path, defaultSuffix(f))) return f;
  return std::nullopt;
}

bool formatBuilt(ExportFormat f) {
  switch (f) {
    case ExportFormat::Onnx: return MIRRORLAB_HAVE_ONNX;
    case ExportFormat::Keras:
    case ExportFormat::KerasWeights: return MIRRORLAB_HAVE_HDF5;
    case ExportFormat::Torch: return true;
  }
  return false;
}

namespace {

ExportLayer describe(const Layer& layer, ExportFormat f) {
  ExportLayer e;
  e.name = layer.name;
  e.type = layer.type();
  e.inputShape = layer.inputShape;
  e.outputShape = layer.outputShape;
  e.args = layer.args();
  if (const auto* d = dynamic_cast<const Dense*>(&layer)) {
    e.kind = ExportLayer::Kind::Dense;
    e.activation = d->activation();
    e.in = d->inFeatures();
    e.out = d->outFeatures();
    e.kernel = d->kernel();
    e.bias = d->bias();
  } else if (const auto* a = dynamic_cast<const ActivationLayer*>(&layer)) {
    e.kind = ExportLayer::Kind::Activation;
    e.activation = a->activation();
  } else if (dynamic_cast<const Flatten*>(&layer)) {
    e.kind = ExportLayer::Kind::Flatten;
  } else if (dynamic_cast<const Dropout*>(&layer)) {
    e.kind = ExportLayer::Kind::Dropout;
  } else if (const auto* c = dynamic_cast<const Conv2D*>(&layer)) {
    e.kind = ExportLayer::Kind::Conv2D;
    e.activation = c->activation();
    e.in = c->geometry().c;
    e.out = c->filters();
    e.kernel = c->kernel();
    e.bias = c->bias();
    e.window = c->window();
    e.geometry = c->geometry();
  } else if (const auto* p = dynamic_cast<const Pool2D*>(&layer)) {
    e.kind = p->isMax() ? ExportLayer::Kind::MaxPooling2D : ExportLayer::Kind::AveragePooling2D;
    e.window = p->window();
    e.geometry = p->geometry();
  } else if (dynamic_cast<const GlobalAveragePooling2D*>(&layer)) {
    e.kind = ExportLayer::Kind::GlobalAveragePooling2D;
  } else if (const auto* b = dynamic_cast<const BatchNorm*>(&layer)) {
    e.kind = ExportLayer::Kind::BatchNormalization;
    e.in = e.out = b->channels();
    e.gamma = b->gamma();
    e.beta = b->beta();
    e.movingMean = b->movingMean();
    e.movingVariance = b->movingVariance();
    e.epsilon = b->epsilon();
  } else if (dynamic_cast<const Reshape*>(&layer)) {
    e.kind = ExportLayer::Kind::Reshape;
  } else {
    const char* name = f == ExportFormat::Onnx ? "ONNX" : f == ExportFormat::Torch ? "PyTorch" : "Keras";  // both Keras forms
    throw UserError("layer '" + layer.name + "' (" + layer.type() + ") cannot be exported to " + name + " (--format " +
                    toString(f) + "): remove the layer or keep the model in Mirrorlab's .mlw weights");
  }
  return e;
}

}  // namespace

std::vector<ExportLayer> exportLayers(std::span<const Layer* const> layers, ExportFormat f) {
  std::vector<ExportLayer> out;
  out.reserve(layers.size());
  for (const Layer* l : layers) out.push_back(describe(*l, f));
  return out;
}

std::vector<ExportLayer> exportLayers(const Sequential& model, ExportFormat f) {
  std::vector<const Layer*> layers;
  for (size_t i = 0; i < model.layerCount(); ++i) layers.push_back(&model.layer(i));
  return exportLayers(layers, f);
}

void checkExportPath(ExportFormat f, const std::string& path) {
  checkCanWrite(path, formatTitle(f));
  f = resolveFormat(f, path);
  // Keras 3 refuses other endings (load_model wants .keras, load_weights .weights.h5); for the
  // other formats a mismatched ending is a mistake that would only surface in another program.
  if (endsWith(path, defaultSuffix(f))) return;
  std::string fix = "name it '*" + std::string(defaultSuffix(f)) + "'";
  if (f == ExportFormat::Keras) fix += " (the whole model) or '*.weights.h5' (the weights alone)";
  if (const auto other = formatOfPath(path))
    fix += ", or pass --format " + std::string(toString(*other)) + " (" + formatTitle(*other) + ") for that name";
  throw UserError("--format " + std::string(toString(f)) + " (" + formatTitle(f) + ") needs an output ending in '" +
                  defaultSuffix(f) + "', got '" + path + "': " + fix);
}

ExportResult exportModel(const Sequential& model, ExportFormat f, const std::string& path, const ExportInfo& info) {
  checkExportPath(f, path);
  // The weights however they came (a file, the studio's run): a model holding NaN is never written.
  requireFiniteParameters(model, model.params(), "the model to export to '" + path + "'",
                          "nothing was written; these weights come from a diverged run");
  f = resolveFormat(f, path);
  const auto layers = exportLayers(model, f);
  ExportResult r;
  r.path = path;
  std::string bytes;
  switch (f) {
    case ExportFormat::Onnx:
      bytes = onnxModelBytes(layers, model.inputShape(), model.outputShape(), info);
      r.description =
          "ONNX model, opset " + std::to_string(kOnnxOpset) + ", input 'input' and output 'output' with a dynamic batch";
      break;
    case ExportFormat::Keras:
      bytes = kerasArchiveBytes(layers, model.inputShape(), info, path);
      r.description = "Keras 3 model (configuration and weights): open with keras.saving.load_model()";
      break;
    case ExportFormat::KerasWeights:
      bytes = kerasWeightsBytes(layers, path);
      r.description = "Keras 3 weights for a Sequential model: load with model.load_weights()";
      break;
    case ExportFormat::Torch:
      bytes = torchWeightsBytes(model);
      r.description =
          "PyTorch weights as .npz (<layer>/kernel (in, out), <layer>/bias): the generated PyTorch program loads them with "
          "--weights";
      break;
  }
  AtomicFile file(path, formatTitle(f));
  file.write(bytes);
  file.commit();
  std::error_code ec;
  r.bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  return r;
}

}  // namespace ml
