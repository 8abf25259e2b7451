#include "api/cli/common.h"

#include <cstdio>
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
  if (secret.empty()) {
    std::cerr << "error: no " << what << ": " << how << "\n";
    return false;
  }
  // gRPC aborts the process on a header value outside printable ASCII (a
  // newline from `$(ls ...)`, a pasted tab): say which byte instead.
  for (size_t i = 0; i < secret.size(); ++i) {
    const auto c = static_cast<unsigned char>(secret[i]);
    if (c < 0x21 || c > 0x7e) {
      char byte[8];
      std::snprintf(byte, sizeof(byte), "0x%02x", c);
      std::cerr << "error: the " << what << " has byte " << byte << " at position " << i
                << ", which no " << what << " contains (only printable ASCII without spaces); check how it was passed\n";
      return false;
    }
  }
  return true;
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
