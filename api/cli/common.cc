#include "api/cli/common.h"

#include <iostream>

#include <google/protobuf/util/json_util.h>

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
  std::string code;
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE: code = "UNAVAILABLE"; break;
    case grpc::StatusCode::INVALID_ARGUMENT: code = "INVALID_ARGUMENT"; break;
    case grpc::StatusCode::NOT_FOUND: code = "NOT_FOUND"; break;
    case grpc::StatusCode::ALREADY_EXISTS: code = "ALREADY_EXISTS"; break;
    case grpc::StatusCode::PERMISSION_DENIED: code = "PERMISSION_DENIED"; break;
    case grpc::StatusCode::UNAUTHENTICATED: code = "UNAUTHENTICATED"; break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: code = "RESOURCE_EXHAUSTED"; break;
    case grpc::StatusCode::DEADLINE_EXCEEDED: code = "DEADLINE_EXCEEDED"; break;
    default: code = "code " + std::to_string(static_cast<int>(s.error_code())); break;
  }
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
