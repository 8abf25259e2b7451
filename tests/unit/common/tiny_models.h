// Tiny ONNX models built in C++ for unit tests (no Python needed).
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

namespace orrery::testing {

// y = Relu(x), x: float32 [N, 4] (N dynamic), opset 13.
inline std::string ReluModelBytes() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("orrery-unit-tests");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  auto* graph = model.mutable_graph();
  graph->set_name("relu");
  auto* node = graph->add_node();
  node->set_op_type(std::string("Relu"));
  node->set_name(std::string("relu0"));
  node->add_input(std::string("x"));
  node->add_output(std::string("y"));
  for (auto [info, name] : {std::pair{graph->add_input(), std::string("x")}, std::pair{graph->add_output(), std::string("y")}}) {
    info->set_name(name);
    auto* tt = info->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("N");
    tt->mutable_shape()->add_dim()->set_dim_value(4);
  }
  return model.SerializeAsString();
}

}  // namespace orrery::testing
