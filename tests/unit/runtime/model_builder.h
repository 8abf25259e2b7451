// Builds small ONNX models in C++ for runtime tests (no Python).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstring>
#include <string>
#include <vector>

namespace orrery::testing {

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 13, int64_t ir_version = 8) {
    model_.set_ir_version(ir_version);
    model_.set_producer_name("orrery-test");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("g");
  }

  onnx::ModelProto& model() { return model_; }
  onnx::GraphProto* graph() { return model_.mutable_graph(); }

  // dims: -1 becomes a dim_param ("N").
  void Input(const std::string& name, int elem, const std::vector<int64_t>& dims) {
    SetInfo(graph()->add_input(), name, elem, &dims);
  }
  void Output(const std::string& name, int elem, const std::vector<int64_t>& dims) {
    SetInfo(graph()->add_output(), name, elem, &dims);
  }
  void OutputNoShape(const std::string& name, int elem) {
    SetInfo(graph()->add_output(), name, elem, nullptr);
  }

  onnx::TensorProto* FloatInit(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<float>& v) {
    onnx::TensorProto* t = graph()->add_initializer();
    FillFloat(t, name, dims, v);
    return t;
  }
  onnx::TensorProto* Int64Init(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& v) {
    onnx::TensorProto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
    return t;
  }

  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    onnx::NodeProto* n = graph()->add_node();
    n->set_op_type(op);
    if (!name.empty()) n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }

  std::string Bytes() const { return model_.SerializeAsString(); }

  static void FillFloat(onnx::TensorProto* t, const std::string& name,
                        const std::vector<int64_t>& dims, const std::vector<float>& v) {
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    std::string raw(v.size() * sizeof(float), '\0');
    if (!v.empty()) std::memcpy(raw.data(), v.data(), raw.size());
    t->set_raw_data(raw);
  }

  static void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void AttrFloat(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void AttrInts(onnx::NodeProto* n, const std::string& name,
                       const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static onnx::TensorProto* AttrTensor(onnx::NodeProto* n, const std::string& name) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::TENSOR);
    return a->mutable_t();
  }

 private:
  static void SetInfo(onnx::ValueInfoProto* info, const std::string& name, int elem,
                      const std::vector<int64_t>* dims) {
    info->set_name(name);
    auto* tt = info->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    if (dims == nullptr) return;
    auto* shape = tt->mutable_shape();
    for (int64_t d : *dims) {
      auto* dim = shape->add_dim();
      if (d < 0) {
        dim->set_dim_param("N");
      } else {
        dim->set_dim_value(d);
      }
    }
  }

  onnx::ModelProto model_;
};

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;

// X[N,2] -> Gemm(W1,b1) -> Relu -> Gemm(W2^T,b2, transB) -> Softmax -> Y[N,2]
inline ModelBuilder TinyMlp() {
  ModelBuilder b(13);
  b.Input("X", kFloat, {-1, 2});
  b.FloatInit("W1", {2, 3}, {1, -1, 0.5f, 2, 0, -1});
  b.FloatInit("b1", {3}, {0, 1, 0.5f});
  b.FloatInit("W2T", {2, 3}, {1, 0, 1, 0, 1, 1});
  b.FloatInit("b2", {2}, {0, -1});
  b.Node("Gemm", {"X", "W1", "b1"}, {"h"}, "fc1");
  b.Node("Relu", {"h"}, {"r"}, "relu");
  ModelBuilder::AttrInt(b.Node("Gemm", {"r", "W2T", "b2"}, {"logits"}, "fc2"), "transB", 1);
  b.Node("Softmax", {"logits"}, {"Y"}, "softmax");
  b.Output("Y", kFloat, {-1, 2});
  return b;
}

}  // namespace orrery::testing
