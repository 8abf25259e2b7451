#include "runtime/tensor_proto.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <limits>

namespace orrery {
namespace {

TEST(TensorProtoTest, Float32RoundTripViaRawData) {
  Tensor t(DType::kFloat32, {2, 3});
  for (int i = 0; i < 6; ++i) t.data<float>()[i] = 0.25f * static_cast<float>(i) - 1.0f;
  const std::string bytes = SerializeTensorProto(NamedTensor{"x", t});
  onnx::TensorProto proto;
  ASSERT_TRUE(proto.ParseFromString(bytes));
  EXPECT_TRUE(proto.has_raw_data());
  EXPECT_EQ(proto.data_type(), onnx::TensorProto::FLOAT);
  auto back = ParseTensorProto(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->name, "x");
  EXPECT_EQ(back->tensor.dtype(), DType::kFloat32);
  EXPECT_EQ(back->tensor.shape(), (Shape{2, 3}));
  EXPECT_EQ(back->tensor.bytes(), t.bytes());
}

TEST(TensorProtoTest, Int64RoundTripViaRawData) {
  Tensor t(DType::kInt64, {3});
  t.data<int64_t>()[0] = std::numeric_limits<int64_t>::min();
  t.data<int64_t>()[1] = -1;
  t.data<int64_t>()[2] = int64_t{1} << 40;
  auto back = ParseTensorProto(SerializeTensorProto(NamedTensor{"ids", t}));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->tensor.dtype(), DType::kInt64);
  EXPECT_EQ(back->tensor.bytes(), t.bytes());
}

TEST(TensorProtoTest, TypedFields) {
  onnx::TensorProto f;
  f.set_data_type(onnx::TensorProto::FLOAT);
  f.add_dims(2);
  f.add_float_data(1.5f);
  f.add_float_data(-3.0f);
  auto ft = TensorFromProto(f);
  ASSERT_TRUE(ft.ok()) << ft.status().ToString();
  EXPECT_EQ(ft->data<float>()[0], 1.5f);
  EXPECT_EQ(ft->data<float>()[1], -3.0f);

  onnx::TensorProto i;
  i.set_data_type(onnx::TensorProto::INT64);
  i.add_dims(1);
  i.add_dims(2);
  i.add_int64_data(7);
  i.add_int64_data(-9);
  auto it = TensorFromProto(i);
  ASSERT_TRUE(it.ok()) << it.status().ToString();
  EXPECT_EQ(it->shape(), (Shape{1, 2}));
  EXPECT_EQ(it->data<int64_t>()[0], 7);
  EXPECT_EQ(it->data<int64_t>()[1], -9);
  // Typed -> Tensor -> raw_data -> Tensor keeps the values.
  auto again = ParseTensorProto(SerializeTensorProto(NamedTensor{"i", *it}));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->tensor.bytes(), it->bytes());

  onnx::TensorProto b;
  b.set_data_type(onnx::TensorProto::BOOL);
  b.add_dims(3);
  for (int v : {0, 1, 5}) b.add_int32_data(v);
  auto bt = TensorFromProto(b);
  ASSERT_TRUE(bt.ok());
  EXPECT_EQ(bt->data<uint8_t>()[2], 1);

  onnx::TensorProto scalar;  // no dims: a scalar
  scalar.set_data_type(onnx::TensorProto::DOUBLE);
  scalar.add_double_data(2.5);
  auto st = TensorFromProto(scalar);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->shape(), Shape{});
  EXPECT_EQ(st->data<double>()[0], 2.5);
}

TEST(TensorProtoTest, Rejects) {
  onnx::TensorProto count;
  count.set_name("w");
  count.set_data_type(onnx::TensorProto::FLOAT);
  count.add_dims(3);
  count.add_float_data(1);
  auto r = TensorFromProto(count);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'w'"), std::string::npos);

  onnx::TensorProto raw;
  raw.set_data_type(onnx::TensorProto::INT64);
  raw.add_dims(2);
  raw.set_raw_data(std::string(15, '\0'));
  EXPECT_EQ(TensorFromProto(raw).status().code(), StatusCode::kInvalidArgument);

  onnx::TensorProto ext;
  ext.set_data_type(onnx::TensorProto::FLOAT);
  ext.add_dims(1);
  ext.set_data_location(onnx::TensorProto::EXTERNAL);
  auto e = TensorFromProto(ext);
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("external"), std::string::npos);

  onnx::TensorProto neg;
  neg.set_data_type(onnx::TensorProto::FLOAT);
  neg.add_dims(-2);
  EXPECT_EQ(TensorFromProto(neg).status().code(), StatusCode::kInvalidArgument);

  onnx::TensorProto huge;
  huge.set_data_type(onnx::TensorProto::FLOAT);
  huge.add_dims(int64_t{1} << 31);
  huge.add_dims(int64_t{1} << 31);
  EXPECT_EQ(TensorFromProto(huge).status().code(), StatusCode::kInvalidArgument);  // a malformed file

  onnx::TensorProto str;
  str.set_data_type(onnx::TensorProto::STRING);
  str.add_dims(1);
  str.add_string_data("x");
  EXPECT_EQ(TensorFromProto(str).status().code(), StatusCode::kInvalidArgument);

  onnx::TensorProto bad_type;
  bad_type.set_data_type(1234);
  EXPECT_EQ(TensorFromProto(bad_type).status().code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(ParseTensorProto("\xff\xff\xff garbage").status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orrery
