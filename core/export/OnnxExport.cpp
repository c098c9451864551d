// The ONNX model, built with the ONNX library's own protobuf classes (onnx-ml.pb.h): opset 13,
// a dynamic batch dimension named "batch", each layer's nodes written by its kind's hook
// (nn/LayerKind.h: Dense as Gemm, Dropout left out...), and the project, run and Mirrorlab version
// in the model's metadata. Images stay channels-last at the input and output as in Keras; ONNX's
// Conv, pooling and BatchNormalization work channels-first, so a run of them is wrapped in
// Transposes (NHWC -> NCHW before, back before anything that sees the layout: Flatten, Reshape,
// Dense, a softmax over the sample, the output), as tf2onnx converts Keras models. The library's
// checker and shape inference run on the result before it is written, so a malformed graph never
// reaches a file.
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

// The graph the layers' hooks (nn/LayerKind.h) write into: one running tensor, starting at the
// input, that each node takes and replaces, and its layout (channels-first after a Transpose).
class Graph : public OnnxGraph {
 public:
  explicit Graph(onnx::GraphProto* g) : g_(g) {}
  void channelsFirst(const std::string& at) override {
    if (channelsFirst_) return;
    node("Transpose", at + "/ToNCHW", {}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
    channelsFirst_ = true;
  }
  void channelsLast(const std::string& at) override {
    if (!channelsFirst_) return;
    node("Transpose", at + "/ToNHWC", {}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
    channelsFirst_ = false;
  }
  void layoutGone() override { channelsFirst_ = false; }
  void node(const std::string& op, const std::string& name, const std::vector<std::string>& extraInputs,
            const std::vector<OnnxAttr>& attrs) override {
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    n->add_input(current_);
    for (const auto& in : extraInputs) n->add_input(in);
    current_ = name + ":0";
    n->add_output(current_);
    for (const auto& a : attrs) setAttr(n, a);
    last_ = n;
  }
  void floats(const std::string& name, const std::vector<int64_t>& dims, const float* data) override {
    addFloats(g_, name, dims, data);
  }
  void ints(const std::string& name, const std::vector<int64_t>& values) override { addInts(g_, name, values); }
  // The last node's output becomes the graph's "output", channels-last (an Identity when no layer
  // added a node: a model of Dropout layers only).
  void finish() {
    channelsLast("output");
    if (!last_) node("Identity", "identity", {}, {});
    last_->set_output(0, "output");
  }

 private:
  static void setAttr(onnx::NodeProto* n, const OnnxAttr& attr) {
    auto* a = n->add_attribute();
    a->set_name(attr.name);
    if (const auto* i = std::get_if<int64_t>(&attr.value)) {
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(*i);
    } else if (const auto* f = std::get_if<float>(&attr.value)) {
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(*f);
    } else {
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t x : std::get<std::vector<int64_t>>(attr.value)) a->add_ints(x);
    }
  }

  onnx::GraphProto* g_;
  std::string current_ = "input";
  onnx::NodeProto* last_ = nullptr;
  bool channelsFirst_ = false;  // the running tensor is (batch, c, h, w) where Keras has (batch, h, w, c)
};

void addMetadata(onnx::ModelProto& m, const std::string& key, const std::string& value) {
  auto* p = m.add_metadata_props();
  p->set_key(key);
  p->set_value(value);
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
  Graph graph(g);
  if (!info.inputMean.empty()) {  // the training set's standardization, before the first layer
    const std::vector<int64_t> dims{static_cast<int64_t>(info.inputMean.size())};
    graph.floats("standardize/mean", dims, info.inputMean.data());
    graph.floats("standardize/scale", dims, info.inputScale.data());
    graph.node("Sub", "standardize/center", {"standardize/mean"}, {});
    graph.node("Mul", "standardize/scale_by", {"standardize/scale"}, {});
  }
  for (const auto& l : layers) l.kind->onnx(*l.layer, graph);
  graph.finish();
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
