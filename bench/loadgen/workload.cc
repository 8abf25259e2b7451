#include "bench/loadgen/workload.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <tuple>

namespace orrery::loadgen {

namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(*out);
}

}  // namespace

Result<StreamSpec> ParseStream(const std::string& text) {
  std::vector<std::string> parts = Split(text, ':');
  if (parts.size() < 3 || parts.size() > 4 || parts[0].empty() || parts[1].empty()) {
    return Status::InvalidArgument("stream '" + text + "': expected TENANT:MODEL:RATE[:DEADLINE_MS]");
  }
  StreamSpec s;
  s.tenant = parts[0];
  s.model = parts[1];
  double v = 0;
  if (!parts[2].empty() && parts[2][0] == 'c') {
    if (!ParseDouble(parts[2].substr(1), &v) || v < 1 || v > 100000 || v != std::floor(v)) {
      return Status::InvalidArgument("stream '" + text + "': closed loop 'cN' needs an integer N in 1..100000");
    }
    s.closed = static_cast<int>(v);
  } else if (!ParseDouble(parts[2], &v) || v <= 0) {
    return Status::InvalidArgument("stream '" + text + "': rate '" + parts[2] + "' is not a positive number");
  } else {
    s.rate = v;
  }
  if (parts.size() == 4) {
    if (!ParseDouble(parts[3], &v) || v <= 0) {
      return Status::InvalidArgument("stream '" + text + "': deadline '" + parts[3] + "' is not a positive number");
    }
    s.deadline_us = static_cast<int64_t>(std::llround(v * 1000));
  }
  return s;
}

Result<TenantSpec> ParseTenant(const std::string& text) {
  std::vector<std::string> parts = Split(text, ':');
  if (parts.size() > 2 || parts[0].empty()) {
    return Status::InvalidArgument("tenant '" + text + "': expected NAME[:WEIGHT]");
  }
  TenantSpec t;
  t.name = parts[0];
  if (parts.size() == 2) {
    double w = 0;
    if (!ParseDouble(parts[1], &w) || w < 1 || w > 1e6 || w != std::floor(w)) {
      return Status::InvalidArgument("tenant '" + text + "': weight must be a positive integer");
    }
    t.weight = static_cast<uint32_t>(w);
  }
  return t;
}

std::vector<Arrival> PoissonSchedule(const std::vector<StreamSpec>& streams, int64_t duration_ns, uint64_t seed) {
  std::vector<Arrival> out;
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < streams.size(); ++i) {
    if (streams[i].rate <= 0) continue;
    std::exponential_distribution<double> gap(streams[i].rate);
    double t = gap(rng);
    while (t * 1e9 < static_cast<double>(duration_ns)) {
      out.push_back({static_cast<int64_t>(t * 1e9), static_cast<int>(i)});
      t += gap(rng);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Arrival& a, const Arrival& b) { return a.at_ns < b.at_ns; });
  return out;
}

Result<std::vector<Arrival>> ParseTrace(const std::string& text, std::vector<StreamSpec>* streams) {
  std::map<std::tuple<std::string, std::string, int64_t>, int> index;
  for (size_t i = 0; i < streams->size(); ++i) {
    const StreamSpec& s = (*streams)[i];
    if (s.rate == 0 && s.closed == 0) index[{s.tenant, s.model, s.deadline_us}] = static_cast<int>(i);
  }
  std::vector<Arrival> out;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = Split(line, ',');
    for (std::string& x : f) x = Trim(x);
    double t = 0;
    if (!ParseDouble(f[0], &t)) {
      if (lineno == 1) continue;  // header
      return Status::InvalidArgument("trace line " + std::to_string(lineno) + ": time '" + f[0] +
                                     "' is not a number of seconds");
    }
    if (f.size() < 3 || f.size() > 4 || f[1].empty() || f[2].empty() || t < 0) {
      return Status::InvalidArgument("trace line " + std::to_string(lineno) +
                                     ": expected time_s,tenant,model[,deadline_ms] with time_s >= 0");
    }
    int64_t deadline_us = 0;
    if (f.size() == 4 && !f[3].empty()) {
      double d = 0;
      if (!ParseDouble(f[3], &d) || d <= 0) {
        return Status::InvalidArgument("trace line " + std::to_string(lineno) + ": deadline '" + f[3] +
                                       "' is not a positive number of milliseconds");
      }
      deadline_us = static_cast<int64_t>(std::llround(d * 1000));
    }
    auto key = std::make_tuple(f[1], f[2], deadline_us);
    auto it = index.find(key);
    if (it == index.end()) {
      streams->push_back({f[1], f[2], 0, 0, deadline_us});
      it = index.emplace(key, static_cast<int>(streams->size() - 1)).first;
    }
    out.push_back({static_cast<int64_t>(std::llround(t * 1e9)), it->second});
  }
  std::stable_sort(out.begin(), out.end(), [](const Arrival& a, const Arrival& b) { return a.at_ns < b.at_ns; });
  return out;
}

Result<std::vector<Arrival>> ReadTrace(const std::string& path, std::vector<StreamSpec>* streams) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("trace file '" + path + "' cannot be read");
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseTrace(buf.str(), streams);
}

}  // namespace orrery::loadgen
