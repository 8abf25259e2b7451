#include "tests/conformance/report.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace orrery::conformance {
namespace {

double PassRate(const Counts& c) {
  const int ran = c.passed + c.failed;
  return ran == 0 ? 1.0 : static_cast<double>(c.passed) / ran;
}

std::string FormatRate(double r) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f", r);
  return buf;
}

std::string CountsText(const Counts& c) {
  return std::to_string(c.passed) + " passed, " + std::to_string(c.failed) + " failed, " +
         std::to_string(c.skipped) + " skipped";
}

// Skip reason -> case names, most common reason first.
std::vector<std::pair<std::string, std::vector<std::string>>> SkipGroups(
    const std::vector<CaseResult>& results) {
  std::map<std::string, std::vector<std::string>> groups;
  for (const CaseResult& r : results) {
    if (r.outcome == Outcome::kSkipped) groups[r.group].push_back(r.name);
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> out(groups.begin(), groups.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  return out;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

void Counts::Add(Outcome o) {
  switch (o) {
    case Outcome::kPassed:
      ++passed;
      break;
    case Outcome::kFailed:
      ++failed;
      break;
    case Outcome::kSkipped:
      ++skipped;
      break;
  }
}

Counts Total(const std::vector<CaseResult>& results) {
  Counts c;
  for (const CaseResult& r : results) c.Add(r.outcome);
  return c;
}

std::map<std::string, Counts> ByOp(const std::vector<CaseResult>& results) {
  std::map<std::string, Counts> m;
  for (const CaseResult& r : results) m[r.op].Add(r.outcome);
  return m;
}

std::string SummaryLine(const Counts& c) { return CountsText(c); }

GateResult CheckGates(const std::vector<CaseResult>& results,
                      const std::vector<std::string>& registered_ops, const GateOptions& opt) {
  GateResult g;
  const Counts total = Total(results);
  const double rate = PassRate(total);
  if (rate < opt.min_pass_rate) {
    g.ok = false;
    g.errors.push_back("pass rate " + FormatRate(rate) + " (" + std::to_string(total.passed) +
                       " of " + std::to_string(total.passed + total.failed) +
                       " runnable cases) is below --min-pass-rate " +
                       FormatRate(opt.min_pass_rate));
  }
  if (opt.require_op_pass) {
    const std::map<std::string, Counts> by_op = ByOp(results);
    for (const std::string& op : registered_ops) {
      auto it = by_op.find(op);
      if (it == by_op.end()) {
        g.warnings.push_back("registered op " + op +
                             " has no conformance case of its own in this suite");
      } else if (it->second.passed == 0) {
        g.ok = false;
        g.errors.push_back("registered op " + op + " passes none of its cases (" +
                           CountsText(it->second) + ")");
      }
    }
  }
  return g;
}

void PrintText(std::ostream& os, const std::vector<CaseResult>& results) {
  for (const auto& [op, c] : ByOp(results)) os << "op " << op << ": " << CountsText(c) << "\n";

  std::vector<const CaseResult*> failed;
  for (const CaseResult& r : results) {
    if (r.outcome == Outcome::kFailed) failed.push_back(&r);
  }
  os << "\nfailed cases (" << failed.size() << "):\n";
  for (const CaseResult* r : failed)
    os << "  " << r->name << " [" << r->op << "]: " << r->reason << "\n";

  const auto groups = SkipGroups(results);
  os << "\nskipped cases by reason (" << groups.size() << " reasons):\n";
  for (const auto& [reason, names] : groups) {
    os << "  " << reason << " (" << names.size() << "): " << JoinNames(names) << "\n";
  }
}

void PrintMarkdown(std::ostream& os, const std::vector<CaseResult>& results,
                   const std::vector<std::string>& registered_ops) {
  const std::set<std::string> registered(registered_ops.begin(), registered_ops.end());
  std::map<std::string, Counts> by_op = ByOp(results);
  for (const std::string& op : registered_ops) by_op.try_emplace(op);  // ops with no case

  os << "| op | kernel | passed | failed | skipped |\n|---|---|---:|---:|---:|\n";
  for (const auto& [op, c] : by_op) {
    const std::string base = op.substr(0, op.find(" (expanded)"));
    const char* kernel = op != base ? "(decomposed)" : registered.count(op) ? "yes" : "no";
    os << "| " << op << " | " << kernel << " | " << c.passed << " | " << c.failed << " | "
       << c.skipped << " |\n";
  }

  std::vector<const CaseResult*> failed;
  for (const CaseResult& r : results) {
    if (r.outcome == Outcome::kFailed) failed.push_back(&r);
  }
  os << "\nFailed cases: " << (failed.empty() ? "none.\n" : std::to_string(failed.size()) + "\n\n");
  for (const CaseResult* r : failed) {
    os << "- `" << r->name << "` (" << r->op << "): " << r->reason << "\n";
  }
  os << "\nSkip reasons (cases):\n\n";
  for (const auto& [reason, names] : SkipGroups(results)) {
    os << "- " << reason << " (" << names.size() << ")\n";
  }
  os << "\n" << CountsText(Total(results)) << "\n";
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out;
}

void PrintJson(std::ostream& os, const std::vector<CaseResult>& results, const GateResult& gates) {
  // Appends rather than "lit" + string: GCC 12 warns falsely (-Wrestrict) on that.
  auto str = [](std::string_view s) {
    std::string q(1, '"');
    q += JsonEscape(s);
    q += '"';
    return q;
  };
  auto counts = [](const Counts& c) {
    return "{\"passed\": " + std::to_string(c.passed) +
           ", \"failed\": " + std::to_string(c.failed) +
           ", \"skipped\": " + std::to_string(c.skipped) + "}";
  };
  auto list = [&](const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + str(v[i]);
    return s + "]";
  };
  const Counts total = Total(results);
  os << "{\n  \"summary\": " << counts(total) << ",\n";
  os << "  \"pass_rate\": " << FormatRate(PassRate(total)) << ",\n";
  os << "  \"gates\": {\"ok\": " << (gates.ok ? "true" : "false")
     << ", \"errors\": " << list(gates.errors) << ", \"warnings\": " << list(gates.warnings)
     << "},\n";
  os << "  \"ops\": {";
  bool first = true;
  for (const auto& [op, c] : ByOp(results)) {
    os << (first ? "\n    " : ",\n    ") << str(op) << ": " << counts(c);
    first = false;
  }
  os << "\n  },\n  \"cases\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const CaseResult& r = results[i];
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.4f", r.seconds);
    os << (i ? ",\n    " : "\n    ") << "{\"name\": " << str(r.name) << ", \"op\": " << str(r.op)
       << ", \"outcome\": " << str(OutcomeName(r.outcome)) << ", \"reason\": " << str(r.reason)
       << ", \"seconds\": " << secs
       << ", \"opset_upgraded\": " << (r.opset_upgraded ? "true" : "false") << "}";
  }
  os << "\n  ]\n}\n";
}

}  // namespace orrery::conformance
