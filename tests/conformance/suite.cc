#include "tests/conformance/suite.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ops/registry.h"
#include "runtime/graph.h"
#include "runtime/model.h"
#include "runtime/tensor_proto.h"

namespace orrery::conformance {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kExpandedSuffix = "_expanded";

Result<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return Status::DataLoss("cannot read " + path.string());
  return ss.str();
}

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// Lower case without '_': "test_reduce_sum" and "ReduceSum" meet as "reducesum".
std::string Normalize(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool Contains(const std::string& s, std::string_view what) {
  return s.find(what) != std::string::npos;
}

std::string StripTestPrefix(const std::string& name) {
  return name.rfind("test_", 0) == 0 ? name.substr(5) : name;
}

std::vector<std::string> AllSchemaNames() {
  std::vector<std::string> names;
  for (const auto& s : onnx::OpSchemaRegistry::get_all_schemas()) names.push_back(s.Name());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<fs::path> SortedEntries(const fs::path& dir, std::string_view prefix, bool dirs) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory() != dirs) continue;
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "<dir>/<stem>_0.pb", "<dir>/<stem>_1.pb", ... until one is missing.
std::vector<fs::path> NumberedFiles(const fs::path& dir, const std::string& stem) {
  std::vector<fs::path> out;
  for (int k = 0;; ++k) {
    fs::path p = dir / (stem + "_" + std::to_string(k) + ".pb");
    std::error_code ec;
    if (!fs::exists(p, ec)) break;
    out.push_back(std::move(p));
  }
  return out;
}

std::string LowerDTypeName(int32_t elem) {
  std::string s = onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(elem));
  if (s.empty()) s = "#" + std::to_string(elem);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Skip reason for a graph input/output Orrery cannot represent, or "".
std::string UnrepresentableType(const onnx::ValueInfoProto& vi) {
  const onnx::TypeProto& t = vi.type();
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const int32_t elem = t.tensor_type().elem_type();
      if (elem <= 0 || elem > static_cast<int32_t>(DType::kUint64) ||
          DTypeSize(static_cast<DType>(elem)) == 0) {
        return "unsupported dtype " + LowerDTypeName(elem);
      }
      return "";
    }
    case onnx::TypeProto::kSequenceType:
      return "unsupported type sequence";
    case onnx::TypeProto::kOptionalType:
      return "unsupported type optional";
    case onnx::TypeProto::kMapType:
      return "unsupported type map";
    case onnx::TypeProto::kSparseTensorType:
      return "unsupported type sparse tensor";
    default:
      return "unsupported type (none declared)";
  }
}

// Skip reason when the model uses ops Orrery has no kernel for, or "".
// Control flow (If/Loop/Scan) and other domains land here too.
std::string MissingOps(const onnx::GraphProto& graph) {
  const ops::OpRegistry& registry = ops::OpRegistry::Global();
  std::set<std::string> missing;
  for (const auto& n : graph.node()) {
    if (!IsDefaultDomain(n.domain())) {
      missing.insert(n.domain() + "." + n.op_type());
    } else if (registry.Find(n.op_type(), ops::Backend::kCpu) == nullptr) {
      missing.insert(n.op_type());
    }
  }
  if (missing.empty()) return "";
  std::string s = missing.size() == 1 ? "unsupported op" : "unsupported ops";
  bool first = true;
  for (const auto& op : missing) {
    s += (first ? " " : ", ") + op;
    first = false;
  }
  return s;
}

// Orrery imports opsets kMinOpset..kMaxOpset. Node tests of ops unchanged
// since opset 1 or 6 (Elu, Not, GlobalAveragePool, ...) import that old
// opset; when every node resolves to the same schema version at kMinOpset,
// the model means exactly the same there, so the import is raised. Returns
// a skip reason when that is not possible, "" otherwise.
std::string FitOpset(onnx::ModelProto* model, bool* upgraded) {
  *upgraded = false;
  onnx::OperatorSetIdProto* def = nullptr;
  for (auto& imp : *model->mutable_opset_import()) {
    if (IsDefaultDomain(imp.domain())) def = &imp;
  }
  if (def == nullptr) return "";  // the compiler reports it
  const int64_t v = def->version();
  const std::string range = " (Orrery supports " + std::to_string(runtime::kMinOpset) + " to " +
                            std::to_string(runtime::kMaxOpset) + ")";
  if (v > runtime::kMaxOpset) return "unsupported opset " + std::to_string(v) + range;
  if (v >= runtime::kMinOpset) return "";
  for (const auto& n : model->graph().node()) {
    const auto* old_schema = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(v));
    const auto* new_schema =
        onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(runtime::kMinOpset));
    if (old_schema == nullptr || new_schema == nullptr ||
        old_schema->since_version() != new_schema->since_version()) {
      return "unsupported opset " + std::to_string(v) + range + ": " + n.op_type() +
             " changed before opset " + std::to_string(runtime::kMinOpset);
    }
  }
  def->set_version(runtime::kMinOpset);
  *upgraded = true;
  return "";
}

void Finish(CaseResult* r, Outcome outcome, std::string reason) {
  r->outcome = outcome;
  r->group = GroupKey(reason);
  r->reason = std::move(reason);
}

// Failure, or skip when the message says "unsupported" (the kernel contract).
void FinishError(CaseResult* r, std::string_view stage, const Status& st) {
  if (Contains(st.message(), "unsupported")) {
    Finish(r, Outcome::kSkipped, st.message());
  } else {
    Finish(r, Outcome::kFailed, std::string(stage) + ": " + st.ToString());
  }
}

// One test_data_set_<i>. Sets *r only on a failure or skip.
bool RunDataSet(const CompiledModel& model, const onnx::GraphProto& graph, const fs::path& dir,
                const Tolerance& tol, CaseResult* r) {
  const std::string where = dir.filename().string();
  std::set<std::string> initializers;
  for (const auto& init : graph.initializer()) initializers.insert(init.name());

  const std::vector<fs::path> in_files = NumberedFiles(dir, "input");
  if (in_files.size() != static_cast<size_t>(graph.input_size())) {
    Finish(r, Outcome::kFailed,
           where + ": " + std::to_string(in_files.size()) + " input files for " +
               std::to_string(graph.input_size()) + " graph inputs");
    return false;
  }
  std::vector<NamedTensor> inputs;
  for (size_t k = 0; k < in_files.size(); ++k) {
    // Matched by position: the .pb name may be empty or differ.
    const std::string& name = graph.input(static_cast<int>(k)).name();
    if (initializers.count(name) != 0) continue;  // a constant to Orrery
    Result<std::string> bytes = ReadFile(in_files[k]);
    Result<NamedTensor> t =
        bytes.ok() ? ParseTensorProto(*bytes) : Result<NamedTensor>(bytes.status());
    if (!t.ok()) {
      FinishError(r, where + "/" + in_files[k].filename().string(), t.status());
      return false;
    }
    inputs.push_back(NamedTensor{name, std::move(t->tensor)});
  }
  std::vector<Tensor> want;
  for (const fs::path& p : NumberedFiles(dir, "output")) {
    Result<std::string> bytes = ReadFile(p);
    Result<NamedTensor> t =
        bytes.ok() ? ParseTensorProto(*bytes) : Result<NamedTensor>(bytes.status());
    if (!t.ok()) {
      FinishError(r, where + "/" + p.filename().string(), t.status());
      return false;
    }
    want.push_back(std::move(t->tensor));
  }

  Result<std::vector<NamedTensor>> got = model.Run(inputs);
  if (!got.ok()) {
    FinishError(r, where + ": run", got.status());
    return false;
  }
  if (got->size() != want.size()) {
    Finish(r, Outcome::kFailed,
           where + ": " + std::to_string(got->size()) + " outputs, want " +
               std::to_string(want.size()));
    return false;
  }
  for (size_t k = 0; k < want.size(); ++k) {
    std::optional<Mismatch> m = CompareTensors((*got)[k].tensor, want[k], tol);
    if (m) {
      Finish(
          r, Outcome::kFailed,
          where + ": output " + std::to_string(k) + " '" + (*got)[k].name + "': " + m->ToString());
      return false;
    }
  }
  return true;
}

}  // namespace

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPassed:
      return "passed";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kSkipped:
      return "skipped";
  }
  return "unknown";
}

std::string GroupKey(const std::string& message) {
  // Hand-rolled rather than std::regex, which trips GCC 12's
  // -Wmaybe-uninitialized under the sanitizers.
  const std::string& m = message;
  auto digits_end = [&m](size_t k) {
    while (k < m.size() && std::isdigit(static_cast<unsigned char>(m[k]))) ++k;
    return k;
  };
  std::string out;
  size_t i = 0;
  while (i < m.size()) {
    size_t end = std::string::npos;
    if (m.compare(i, 5, "node ") == 0 && i + 5 < m.size()) {
      const size_t j = i + 5;
      if (m[j] == '#' && digits_end(j + 1) > j + 1) {
        end = digits_end(j + 1);  // "node #3"
      } else if (m[j] == '\'') {  // "node 'conv1' (#3)"
        const size_t q = m.find('\'', j + 1);
        if (q != std::string::npos && m.compare(q + 1, 3, " (#") == 0) {
          const size_t k = digits_end(q + 4);
          if (k > q + 4 && k < m.size() && m[k] == ')') end = k + 1;
        }
      }
    }
    if (end != std::string::npos) {
      out += "node";
      i = end;
    } else {
      out += m[i++];
    }
  }
  return out;
}

std::string CaseOp(const std::string& name, const std::vector<std::string>& op_types,
                   const std::string& base_op, const std::vector<std::string>& known_ops) {
  const bool expanded = name.size() > kExpandedSuffix.size() && name.ends_with(kExpandedSuffix);
  if (!expanded && op_types.size() == 1) return op_types[0];
  std::string stem = StripTestPrefix(name);
  if (expanded) stem.resize(stem.size() - kExpandedSuffix.size());
  std::string op = expanded ? base_op : "";
  if (op.empty()) {
    // Longest op name prefixing the case name: "reduce_sum_square_..." is
    // ReduceSumSquare, not ReduceSum. The case's own ops win ties.
    const std::string norm = Normalize(stem);
    size_t best = 0;
    for (const auto* list : {&op_types, &known_ops}) {
      for (const std::string& k : *list) {
        const std::string nk = Normalize(k);
        if (nk.size() > best && norm.rfind(nk, 0) == 0) {
          best = nk.size();
          op = k;
        }
      }
    }
  }
  if (op.empty()) op = stem.substr(0, stem.find('_'));
  return expanded ? op + " (expanded)" : op;
}

Result<std::vector<CaseInfo>> DiscoverCases(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound(dir.string() + " is not a directory");
  std::vector<CaseInfo> cases;
  for (const fs::path& d : SortedEntries(dir, "", /*dirs=*/true)) {
    if (!fs::exists(d / "model.onnx", ec)) continue;
    CaseInfo c;
    c.name = d.filename().string();
    c.dir = d;
    c.expanded = c.name.ends_with(kExpandedSuffix);
    Result<std::string> bytes = ReadFile(d / "model.onnx");
    onnx::ModelProto model;
    if (bytes.ok() && runtime::ParseModel(*bytes, &model).ok()) {
      for (const auto& n : model.graph().node()) {
        if (std::find(c.op_types.begin(), c.op_types.end(), n.op_type()) == c.op_types.end()) {
          c.op_types.push_back(n.op_type());
        }
      }
    }
    cases.push_back(std::move(c));
  }
  const std::vector<std::string> known = AllSchemaNames();
  std::map<std::string, std::string> op_of;
  for (CaseInfo& c : cases) {
    if (c.expanded) continue;
    c.op = CaseOp(c.name, c.op_types, "", known);
    op_of[c.name] = c.op;
  }
  for (CaseInfo& c : cases) {
    if (!c.expanded) continue;
    auto it = op_of.find(c.name.substr(0, c.name.size() - kExpandedSuffix.size()));
    c.op = CaseOp(c.name, c.op_types, it == op_of.end() ? "" : it->second, known);
  }
  return cases;
}

CaseResult RunCase(const CaseInfo& info, const Tolerance& tol) {
  const auto start = std::chrono::steady_clock::now();
  CaseResult r;
  r.name = info.name;
  r.op = info.op;
  auto done = [&]() {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };

  Result<std::string> bytes = ReadFile(info.dir / "model.onnx");
  if (!bytes.ok()) {
    Finish(&r, Outcome::kFailed, "model: " + bytes.status().ToString());
    return done();
  }
  onnx::ModelProto proto;
  if (Status st = runtime::ParseModel(*bytes, &proto); !st.ok()) {
    Finish(&r, Outcome::kFailed, "model: " + st.ToString());
    return done();
  }
  std::string skip = MissingOps(proto.graph());
  for (const auto* list : {&proto.graph().input(), &proto.graph().output()}) {
    for (const auto& vi : *list) {
      if (skip.empty()) skip = UnrepresentableType(vi);
    }
  }
  if (skip.empty()) skip = FitOpset(&proto, &r.opset_upgraded);
  if (!skip.empty()) {
    Finish(&r, Outcome::kSkipped, std::move(skip));
    return done();
  }
  if (r.opset_upgraded) bytes = proto.SerializeAsString();

  Result<std::unique_ptr<CompiledModel>> model = CompiledModel::Compile(*bytes);
  if (!model.ok()) {
    FinishError(&r, "compile", model.status());
    return done();
  }
  const std::vector<fs::path> sets = SortedEntries(info.dir, "test_data_set_", /*dirs=*/true);
  if (sets.empty()) {
    Finish(&r, Outcome::kFailed, "no test_data_set_* directory");
    return done();
  }
  for (const fs::path& set : sets) {
    if (!RunDataSet(**model, proto.graph(), set, tol, &r)) return done();
  }
  Finish(&r, Outcome::kPassed, "");
  return done();
}

}  // namespace orrery::conformance
