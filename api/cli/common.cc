#include "api/cli/common.h"

#include <iostream>

#include <google/protobuf/util/json_util.h>

#include "base/status.h"

namespace orrery::cli {

std::shared_ptr<grpc::Channel> Connect(const GlobalOptions& g) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(g.server, grpc::InsecureChannelCredentials(), args);
}

void Authorize(grpc::ClientContext* ctx, const std::string& secret) {
  ctx->AddMetadata("authorization", "Bearer " + secret);
}

int Fail(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return 1;
}

int Fail(const grpc::Status& s, const GlobalOptions& g) {
  // Every gRPC code by its name (codes share numbering with StatusCode).
  const std::string code(StatusCodeName(static_cast<StatusCode>(s.error_code())));
  std::string hint;
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) hint = " (is orreryd running at " + g.server + "?)";
  return Fail(code + ": " + s.error_message() + hint);
}

static bool RequireSecret(const std::string& secret, const char* what, const char* how) {
  if (!secret.empty()) return true;
  std::cerr << "error: no " << what << ": " << how << "\n";
  return false;
}

bool NeedKey(const GlobalOptions& g) {
  return RequireSecret(g.api_key, "API key", "pass --api-key or set ORRERY_API_KEY");
}
bool NeedAdmin(const GlobalOptions& g) {
  return RequireSecret(g.admin_token, "admin token",
                       "pass --admin-token, set ORRERY_ADMIN_TOKEN, or run where orrery-data/admin.token is readable");
}

std::string ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  return out;
}

}  // namespace orrery::cli
