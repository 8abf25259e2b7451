// Mapping from Orrery's Status to grpc::Status (codes share numbering).
#pragma once

#include <grpcpp/support/status.h>

#include "base/status.h"

namespace orrery {

inline grpc::Status ToGrpcStatus(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

}  // namespace orrery
