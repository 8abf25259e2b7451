#include "api/oip_tensor.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

inference::ModelInferRequest::InferInputTensor* AddInput(inference::ModelInferRequest* req, const std::string& name,
                                                         const std::string& datatype, Shape shape) {
  auto* in = req->add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  for (int64_t d : shape) in->add_shape(d);
  return in;
}

TEST(OipTensorTest, DecodesRawContents) {
  inference::ModelInferRequest req;
  AddInput(&req, "x", "FP32", {2, 2});
  float v[4] = {1, 2, 3, 4};
  req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(v), sizeof(v)));
  Result<std::vector<NamedTensor>> out = DecodeInferInputs(req);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "x");
  EXPECT_EQ((*out)[0].tensor.dtype(), DType::kFloat32);
  EXPECT_EQ((*out)[0].tensor.shape(), (Shape{2, 2}));
  EXPECT_EQ((*out)[0].tensor.data<float>()[3], 4.0f);
}

TEST(OipTensorTest, DecodesTypedContents) {
  inference::ModelInferRequest req;
  auto* a = AddInput(&req, "a", "INT64", {3});
  for (int64_t v : {7, -8, 9}) a->mutable_contents()->add_int64_contents(v);
  auto* b = AddInput(&req, "b", "BOOL", {2});
  b->mutable_contents()->add_bool_contents(true);
  b->mutable_contents()->add_bool_contents(false);
  auto* c = AddInput(&req, "c", "INT8", {1});
  c->mutable_contents()->add_int_contents(-5);
  Result<std::vector<NamedTensor>> out = DecodeInferInputs(req);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].tensor.data<int64_t>()[1], -8);
  EXPECT_TRUE((*out)[1].tensor.data<bool>()[0]);
  EXPECT_FALSE((*out)[1].tensor.data<bool>()[1]);
  EXPECT_EQ((*out)[2].tensor.data<int8_t>()[0], -5);
}

TEST(OipTensorTest, RejectsBadInputsWithTheInputNamed) {
  {
    inference::ModelInferRequest req;  // raw size mismatch
    AddInput(&req, "x", "FP32", {2, 2});
    req.add_raw_input_contents(std::string(15, '\0'));
    Result<std::vector<NamedTensor>> out = DecodeInferInputs(req);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find("'x'"), std::string::npos) << out.status().message();
  }
  {
    inference::ModelInferRequest req;  // typed element count mismatch
    auto* in = AddInput(&req, "y", "FP32", {3});
    in->mutable_contents()->add_fp32_contents(1.0f);
    Result<std::vector<NamedTensor>> out = DecodeInferInputs(req);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("'y'"), std::string::npos);
  }
  {
    inference::ModelInferRequest req;  // unknown datatype
    AddInput(&req, "z", "COMPLEX64", {1});
    EXPECT_EQ(DecodeInferInputs(req).status().code(), StatusCode::kInvalidArgument);
  }
  {
    inference::ModelInferRequest req;  // negative dim
    AddInput(&req, "n", "FP32", {-1, 2});
    req.add_raw_input_contents("");
    EXPECT_EQ(DecodeInferInputs(req).status().code(), StatusCode::kInvalidArgument);
  }
  {
    inference::ModelInferRequest req;  // overflowing shape
    AddInput(&req, "big", "FP32", {int64_t{1} << 40, int64_t{1} << 40});
    req.add_raw_input_contents("");
    EXPECT_EQ(DecodeInferInputs(req).status().code(), StatusCode::kInvalidArgument);
  }
  {
    inference::ModelInferRequest req;  // raw count differs from inputs count
    AddInput(&req, "a", "FP32", {1});
    AddInput(&req, "b", "FP32", {1});
    req.add_raw_input_contents(std::string(4, '\0'));
    EXPECT_EQ(DecodeInferInputs(req).status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(OipTensorTest, EncodesRawOutputs) {
  Tensor t(DType::kInt64, {2});
  t.data<int64_t>()[0] = 5;
  t.data<int64_t>()[1] = 6;
  inference::ModelInferResponse resp;
  EncodeInferOutputs({NamedTensor{"out", t}}, &resp);
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).datatype(), "INT64");
  EXPECT_EQ(resp.outputs(0).shape(0), 2);
  ASSERT_EQ(resp.raw_output_contents(0).size(), 16u);
  EXPECT_EQ(reinterpret_cast<const int64_t*>(resp.raw_output_contents(0).data())[1], 6);
}

TEST(OipTensorTest, InputsOverTheByteLimitAreRefusedBeforeDecoding) {
  inference::ModelInferRequest req;
  AddInput(&req, "a", "FP32", {2});  // 8 bytes
  AddInput(&req, "b", "FP32", {3});  // 12 more: 20 in all
  float v[3] = {1, 2, 3};
  req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(v), 8));
  req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(v), 12));
  EXPECT_TRUE(DecodeInferInputs(req, 20).ok());
  EXPECT_TRUE(DecodeInferInputs(req, 0).ok());  // no limit
  Result<std::vector<NamedTensor>> out = DecodeInferInputs(req, 19);
  ASSERT_EQ(out.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(out.status().message().find("input 'b'"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("19"), std::string::npos) << out.status().message();
  // A huge declared shape with tiny contents is refused by size, not by a
  // failed allocation.
  inference::ModelInferRequest huge;
  AddInput(&huge, "x", "FP32", {1 << 20, 1 << 10});
  huge.add_raw_input_contents("abcd");
  EXPECT_EQ(DecodeInferInputs(huge, 64 << 20).status().code(), StatusCode::kResourceExhausted);
  // Zero elements, but dims whose product overflows: refused, not decoded.
  inference::ModelInferRequest empty;
  AddInput(&empty, "e", "FP32", {0, int64_t{1} << 62, int64_t{1} << 62});
  empty.add_raw_input_contents("");
  EXPECT_EQ(DecodeInferInputs(empty).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orrery
