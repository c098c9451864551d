// The ONNX model, built with the ONNX library's own protobuf classes (onnx-ml.pb.h): opset 13,
// a dynamic batch dimension named "batch", Dense as Gemm (MatMul without a bias), activations as
// their ONNX ops, Flatten as Flatten(axis=1), Dropout left out (inference), and the project, run
// and Mirrorlab version in the model's metadata. Images stay channels-last at the input and output
// as in Keras; ONNX's Conv, pooling and BatchNormalization work channels-first, so a run of them
// is wrapped in Transposes (NHWC -> NCHW before, back before anything that sees the layout: Flatten,
// Reshape, Dense, a softmax over the sample, the output), as tf2onnx converts Keras models. The library's checker and shape
// inference run on the result before it is written, so a malformed graph never reaches a file.
#include "export/ExportWriters.h"

#if MIRRORLAB_HAVE_ONNX
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#endif

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "Error.h"

namespace ml {

#if MIRRORLAB_HAVE_ONNX

namespace {

static_assert(std::endian::native == std::endian::little, "ONNX raw_data is little-endian");

void setShape(onnx::ValueInfoProto* v, const std::string& name, const Shape& perSample) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  auto* s = t->mutable_shape();
  s->add_dim()->set_dim_param("batch");
  for (int64_t d : perSample) s->add_dim()->set_dim_value(d);
}

void addFloats(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims, const float* data) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  t->set_raw_data(std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(n) * sizeof(float)));
}

void addInts(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

// Appends nodes to a graph, each taking the previous node's output.
class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto* g) : g_(g) {}
  onnx::NodeProto* add(const std::string& op, const std::string& nodeName, std::vector<std::string> extraInputs = {}) {
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(nodeName);
    n->add_input(current_);
    for (const auto& in : extraInputs) n->add_input(in);
    current_ = nodeName + ":0";
    n->add_output(current_);
    last_ = n;
    return n;
  }
  onnx::NodeProto* last() const { return last_; }

 private:
  onnx::GraphProto* g_;
  std::string current_ = "input";
  onnx::NodeProto* last_ = nullptr;
};

void setIntAttr(onnx::NodeProto* n, const char* name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// Mirrorlab's softmax runs over a sample's numel(shape) values; ONNX's over one axis. Over a rank-1
// sample they agree; over a larger one the sample is flattened, softmaxed and reshaped back.
void addActivation(GraphBuilder& b, onnx::GraphProto* g, Act act, const std::string& prefix, const Shape& shape) {
  switch (act) {
    case Act::Linear: return;
    case Act::Relu: b.add("Relu", prefix + "/Relu"); return;
    case Act::Sigmoid: b.add("Sigmoid", prefix + "/Sigmoid"); return;
    case Act::Tanh: b.add("Tanh", prefix + "/Tanh"); return;
    case Act::Softmax:
      if (shape.size() == 1) {
        setIntAttr(b.add("Softmax", prefix + "/Softmax"), "axis", 1);
        return;
      }
      setIntAttr(b.add("Flatten", prefix + "/SoftmaxFlatten"), "axis", 1);
      setIntAttr(b.add("Softmax", prefix + "/Softmax"), "axis", 1);
      std::vector<int64_t> dims{-1};
      dims.insert(dims.end(), shape.begin(), shape.end());
      addInts(g, prefix + "/shape", dims);
      b.add("Reshape", prefix + "/SoftmaxReshape", {prefix + "/shape"});
      return;
  }
}

void setIntsAttr(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void setFloatAttr(onnx::NodeProto* n, const char* name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

// Conv and pooling windows as ONNX attributes: TensorFlow's "same" puts the odd padding row or
// column at the bottom and right, so pads are [top, left, bottom, right].
void setWindow(onnx::NodeProto* n, const ExportLayer& l) {
  const Window& w = l.window;
  const Geometry& g = l.geometry;
  const int64_t padH = std::max<int64_t>((g.oh - 1) * w.sh + w.kh - g.h, 0);
  const int64_t padW = std::max<int64_t>((g.ow - 1) * w.sw + w.kw - g.w, 0);
  setIntsAttr(n, "kernel_shape", {w.kh, w.kw});
  setIntsAttr(n, "strides", {w.sh, w.sw});
  if (w.same) setIntsAttr(n, "pads", {g.padTop, g.padLeft, padH - g.padTop, padW - g.padLeft});
}

void addMetadata(onnx::ModelProto& m, const std::string& key, const std::string& value) {
  auto* p = m.add_metadata_props();
  p->set_key(key);
  p->set_value(value);
}

// Long: one switch case per layer kind, each a few ONNX nodes; the channels-first state they
// share is why they stay in one function.
void buildGraph(onnx::GraphProto* g, const std::vector<ExportLayer>& layers, const ExportInfo& info) {
  GraphBuilder b(g);
  if (!info.inputMean.empty()) {  // the training set's standardization, before the first layer
    const std::vector<int64_t> dims{static_cast<int64_t>(info.inputMean.size())};
    addFloats(g, "standardize/mean", dims, info.inputMean.data());
    addFloats(g, "standardize/scale", dims, info.inputScale.data());
    b.add("Sub", "standardize/center", {"standardize/mean"});
    b.add("Mul", "standardize/scale_by", {"standardize/scale"});
  }
  bool channelsFirst = false;  // the current tensor is (batch, c, h, w) where Keras has (batch, h, w, c)
  auto toChannelsFirst = [&](const ExportLayer& l) {
    if (channelsFirst) return;
    setIntsAttr(b.add("Transpose", l.name + "/ToNCHW"), "perm", {0, 3, 1, 2});
    channelsFirst = true;
  };
  auto toChannelsLast = [&](const std::string& at) {
    if (!channelsFirst) return;
    setIntsAttr(b.add("Transpose", at + "/ToNHWC"), "perm", {0, 2, 3, 1});
    channelsFirst = false;
  };
  for (const auto& l : layers) {
    switch (l.kind) {
      case ExportLayer::Kind::Conv2D: {
        toChannelsFirst(l);
        // ONNX's weight is (filters, in channels, kh, kw); Keras' kernel is (kh, kw, in, filters).
        const int64_t kh = l.window.kh, kw = l.window.kw, c = l.in, f = l.out;
        std::vector<float> w(static_cast<size_t>(kh * kw * c * f));
        for (int64_t y = 0; y < kh; ++y)
          for (int64_t x = 0; x < kw; ++x)
            for (int64_t i = 0; i < c; ++i)
              for (int64_t o = 0; o < f; ++o)
                w[static_cast<size_t>(((o * c + i) * kh + y) * kw + x)] = l.kernel[((y * kw + x) * c + i) * f + o];
        addFloats(g, l.name + "/kernel", {f, c, kh, kw}, w.data());
        std::vector<std::string> inputs{l.name + "/kernel"};
        if (l.bias) {
          addFloats(g, l.name + "/bias", {f}, l.bias);
          inputs.push_back(l.name + "/bias");
        }
        setWindow(b.add("Conv", l.name + "/Conv", inputs), l);
        if (l.activation == Act::Softmax) toChannelsLast(l.name);
        addActivation(b, g, l.activation, l.name, l.outputShape);
        break;
      }
      case ExportLayer::Kind::MaxPooling2D:
      case ExportLayer::Kind::AveragePooling2D: {
        toChannelsFirst(l);
        const bool max = l.kind == ExportLayer::Kind::MaxPooling2D;
        auto* n = b.add(max ? "MaxPool" : "AveragePool", l.name + (max ? "/MaxPool" : "/AveragePool"));
        setWindow(n, l);  // AveragePool's count_include_pad 0: "same" windows average the positions inside
        break;
      }
      case ExportLayer::Kind::GlobalAveragePooling2D:
        toChannelsFirst(l);
        b.add("GlobalAveragePool", l.name + "/GlobalAveragePool");  // (batch, c, 1, 1)
        setIntAttr(b.add("Flatten", l.name + "/Flatten"), "axis", 1);
        channelsFirst = false;  // (batch, c): no layout left
        break;
      case ExportLayer::Kind::BatchNormalization: {
        if (l.inputShape.size() == 3)
          toChannelsFirst(l);
        else if (l.inputShape.size() != 1)
          throw UserError("layer '" + l.name + "' (BatchNormalization) over a sample of shape " + shapeToString(l.inputShape) +
                          " cannot be exported to ONNX: ONNX normalises over axis 1, so give it features or images");
        const auto c = static_cast<size_t>(l.in);
        std::vector<float> ones(c, 1.0f), zeros(c, 0.0f);
        addFloats(g, l.name + "/gamma", {l.in}, l.gamma ? l.gamma : ones.data());
        addFloats(g, l.name + "/beta", {l.in}, l.beta ? l.beta : zeros.data());
        addFloats(g, l.name + "/moving_mean", {l.in}, l.movingMean);
        addFloats(g, l.name + "/moving_variance", {l.in}, l.movingVariance);
        auto* n = b.add("BatchNormalization", l.name + "/BatchNormalization",
                        {l.name + "/gamma", l.name + "/beta", l.name + "/moving_mean", l.name + "/moving_variance"});
        setFloatAttr(n, "epsilon", static_cast<float>(l.epsilon));
        break;
      }
      case ExportLayer::Kind::Reshape: {
        toChannelsLast(l.name);
        std::vector<int64_t> dims{-1};
        dims.insert(dims.end(), l.outputShape.begin(), l.outputShape.end());
        addInts(g, l.name + "/shape", dims);
        b.add("Reshape", l.name + "/Reshape", {l.name + "/shape"});
        break;
      }
      case ExportLayer::Kind::Flatten:
        toChannelsLast(l.name);
        setIntAttr(b.add("Flatten", l.name + "/Flatten"), "axis", 1);
        break;
      case ExportLayer::Kind::Dropout:  // the identity at inference: nothing to run
        break;
      case ExportLayer::Kind::Activation:
        if (l.activation == Act::Softmax) toChannelsLast(l.name);  // Mirrorlab's softmax spans the sample
        addActivation(b, g, l.activation, l.name, l.outputShape);
        break;
      case ExportLayer::Kind::Dense:
        toChannelsLast(l.name);
        addFloats(g, l.name + "/kernel", {l.in, l.out}, l.kernel);
        if (l.bias) {
          addFloats(g, l.name + "/bias", {l.out}, l.bias);
          b.add("Gemm", l.name + "/Gemm", {l.name + "/kernel", l.name + "/bias"});
        } else {
          b.add("MatMul", l.name + "/MatMul", {l.name + "/kernel"});
        }
        addActivation(b, g, l.activation, l.name, l.outputShape);
        break;
    }
  }
  toChannelsLast("output");
  if (!b.last()) b.add("Identity", "identity");  // a model of Dropout layers only
  b.last()->set_output(0, "output");
}

}  // namespace

std::string onnxModelBytes(const std::vector<ExportLayer>& layers, const Shape& input, const Shape& output,
                           const ExportInfo& info) {
  onnx::ModelProto m;
  m.set_ir_version(kOnnxIrVersion);
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  m.set_producer_name("Mirrorlab");
  m.set_producer_version(info.version);
  m.set_model_version(info.runId.value_or(0));
  std::string dims = "batch";
  for (int64_t d : input) dims += ", " + std::to_string(d);
  m.set_doc_string("Mirrorlab project \"" + info.projectName + "\"" +
                   (info.runId ? ", run " + std::to_string(*info.runId) : std::string()) +
                   ": the inference graph (Dropout left out), input float32 (" + dims + ")");
  addMetadata(m, "project", info.projectName);
  addMetadata(m, "run_id", info.runId ? std::to_string(*info.runId) : "");
  addMetadata(m, "mirrorlab_version", info.version);
  if (!info.weightsFile.empty()) addMetadata(m, "weights_file", info.weightsFile);
  if (!info.inputNote.empty()) addMetadata(m, "input", info.inputNote);

  auto* g = m.mutable_graph();
  g->set_name("mirrorlab_sequential");
  setShape(g->add_input(), "input", input);
  buildGraph(g, layers, info);
  setShape(g->add_output(), "output", output);

  try {
    onnx::checker::check_model(m);
    onnx::ModelProto inferred = m;
    onnx::ShapeInferenceOptions options{true, 1, false};  // check types, fail on any error
    onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    throw std::logic_error(std::string("the exported ONNX graph fails the ONNX checker: ") + e.what());
  }
  std::string bytes;
  if (!m.SerializeToString(&bytes)) throw std::logic_error("the ONNX model could not be serialized");
  return bytes;
}

#else

std::string onnxModelBytes(const std::vector<ExportLayer>&, const Shape&, const Shape&, const ExportInfo&) {
  throw UserError(
      "this Mirrorlab was built without the ONNX library: install libonnx-dev and libprotobuf-dev "
      "(scripts/deps.sh does) and rebuild to export ONNX models");
}

#endif

}  // namespace ml
