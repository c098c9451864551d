// The ONNX model, built with the ONNX library's own protobuf classes (onnx-ml.pb.h): opset 13,
// a dynamic batch dimension named "batch", Dense as Gemm (MatMul without a bias), activations as
// their ONNX ops, Flatten as Flatten(axis=1), Dropout left out (inference), and the project, run
// and Mirrorlab version in the model's metadata. The library's checker and shape inference run
// on the result before it is written, so a malformed graph never reaches a file.
#include "export/ExportWriters.h"

#if MIRRORLAB_HAVE_ONNX
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#endif

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

void addMetadata(onnx::ModelProto& m, const std::string& key, const std::string& value) {
  auto* p = m.add_metadata_props();
  p->set_key(key);
  p->set_value(value);
}

void buildGraph(onnx::GraphProto* g, const std::vector<ExportLayer>& layers) {
  GraphBuilder b(g);
  for (const auto& l : layers) {
    switch (l.kind) {
      case ExportLayer::Kind::Flatten: setIntAttr(b.add("Flatten", l.name + "/Flatten"), "axis", 1); break;
      case ExportLayer::Kind::Dropout:  // the identity at inference: nothing to run
        break;
      case ExportLayer::Kind::Activation: addActivation(b, g, l.activation, l.name, l.outputShape); break;
      case ExportLayer::Kind::Dense:
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
  buildGraph(g, layers);
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
