// Helpers shared by the CLI's command files: connection, auth metadata,
// error reporting, JSON output.
#pragma once

#include <memory>
#include <string>

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include "api/cli/commands.h"

namespace orrery::cli {

std::shared_ptr<grpc::Channel> Connect(const GlobalOptions& g);
void Authorize(grpc::ClientContext* ctx, const std::string& secret);
// Print "error: ..." to stderr; return the exit code 1.
int Fail(const std::string& message);
int Fail(const grpc::Status& s, const GlobalOptions& g);
bool NeedKey(const GlobalOptions& g);
bool NeedAdmin(const GlobalOptions& g);
// Proto field names, every primitive field printed.
std::string ToJson(const google::protobuf::Message& m);

}  // namespace orrery::cli
