// Cold load of a model: compiled from its ONNX (packing every constant GEMM /
// Conv operand) vs compiled with its packed weights read back from a segment
// file (storage/segment_store.h: io_uring, O_DIRECT, CRC32C verified) and
// imported (runtime/packed_weights.h). Both end with the model ready to
// serve its signature's shapes (the plan specialised), and both are checked
// to give the same output on the model's test input when one is given.
//
//   model_load_bench MODEL.onnx [--input FILE.pb] [--reps N] [--dir DIR]
//
// Each rep: the repack path (Compile; for a model with dynamic dims, the
// specialisation that export forces, so both paths pack / import everything),
// then the segment path with the file evicted from the page cache first
// (fsync + posix_fadvise DONTNEED; O_DIRECT bypasses it anyway). Prints
// median / min per path, the segment read alone, the segment's size and its
// write time. Single-threaded; absolute numbers depend on the machine.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/model.h"
#include "runtime/packed_weights.h"
#include "runtime/tensor_proto.h"
#include "storage/segment_store.h"

namespace orrery {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Evict(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  fsync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

struct Stats {
  double median = 0, min = 0;
};
Stats Summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front()};
}

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: model_load_bench MODEL.onnx [--input FILE.pb] [--reps N] [--dir DIR]\n");
    return 2;
  }
  const std::string model_path = argv[1];
  std::string input_path, dir = std::filesystem::temp_directory_path().string();
  int reps = 5;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--input") input_path = argv[i + 1];
    if (flag == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
    if (flag == "--dir") dir = argv[i + 1];
  }
  const std::string bytes = ReadAll(model_path);
  if (bytes.empty()) return Fail("read " + model_path, Status::NotFound("empty or missing"));
  std::string tmpl = dir + "/model-load-bench-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Fail("mkdtemp", Status::Unavailable(std::strerror(errno)));
  const std::string data_dir = tmpl;

  // The segment, written once from a compiled model.
  auto first = CompiledModel::Compile(bytes);
  if (!first.ok()) return Fail("compile", first.status());
  auto blob = ExportPackedWeights(**first);
  if (!blob.ok()) return Fail("export", blob.status());
  auto store = SegmentStore::Open(data_dir);
  if (!store.ok()) return Fail("segment store", store.status());
  const std::string name = SegmentStore::NewName();
  const auto w0 = Clock::now();
  auto info = (*store)->Write(name, kPackedWeightsVersion, 1, *blob);
  const auto w1 = Clock::now();
  if (!info.ok()) return Fail("write segment", info.status());
  const std::string seg_path = (*store)->dir() + "/" + name;

  std::vector<NamedTensor> inputs;
  if (!input_path.empty()) {
    auto t = ParseTensorProto(ReadAll(input_path));
    if (!t.ok()) return Fail("input", t.status());
    inputs.push_back(std::move(t).value());
  }
  std::vector<double> repack, segment, read_only, import_only;
  size_t imported = 0;
  bool same = true;
  for (int r = 0; r < reps; ++r) {
    const auto a0 = Clock::now();
    auto plain = CompiledModel::Compile(bytes);
    if (!plain.ok()) return Fail("compile", plain.status());
    if (auto e = ExportPackedWeights(**plain); !e.ok()) return Fail("specialise", e.status());
    const auto a1 = Clock::now();
    repack.push_back(Ms(a0, a1));

    Evict(seg_path);
    const auto b0 = Clock::now();
    AlignedBuffer buffer;
    auto payload = (*store)->Read(name, {.layout_version = kPackedWeightsVersion, .content_id = 1}, &buffer);
    if (!payload.ok()) return Fail("read segment", payload.status());
    const auto b1 = Clock::now();
    Status import_status;
    auto loaded = CompiledModel::Compile(
        bytes, {.packed_weights = *payload, .imported = &imported, .import_status = &import_status});
    if (!loaded.ok()) return Fail("compile with segment", loaded.status());
    if (!import_status.ok()) return Fail("import", import_status);
    // The same specialisation as the repack path (a plan-cache hit for static models).
    if (auto e = ExportPackedWeights(**loaded); !e.ok()) return Fail("specialise", e.status());
    const auto b2 = Clock::now();
    segment.push_back(Ms(b0, b2));
    read_only.push_back(Ms(b0, b1));
    import_only.push_back(Ms(b1, b2));

    if (r == 0 && !inputs.empty()) {
      auto x = (*plain)->Run(inputs);
      auto y = (*loaded)->Run(inputs);
      if (!x.ok() || !y.ok()) return Fail("run", x.ok() ? y.status() : x.status());
      const Tensor& tx = (*x)[0].tensor;
      const Tensor& ty = (*y)[0].tensor;
      same = tx.byte_size() == ty.byte_size() &&
             std::memcmp(tx.data<float>(), ty.data<float>(), tx.byte_size()) == 0;
    }
  }
  const Stats a = Summarise(repack), b = Summarise(segment), c = Summarise(read_only),
              d = Summarise(import_only);
  std::printf("model %s (%.1f MB ONNX), %d reps\n", model_path.c_str(), bytes.size() / 1e6, reps);
  std::printf("segment: %.1f MB, %zu packed entries imported, written in %.1f ms (fdatasync + rename + dir fsync)\n",
              info->bytes / 1e6, imported, Ms(w0, w1));
  std::printf("compile from ONNX (repack):   median %8.1f ms  min %8.1f ms\n", a.median, a.min);
  std::printf("segment read + import:        median %8.1f ms  min %8.1f ms\n", b.median, b.min);
  std::printf("  of which cold segment read: median %8.1f ms  min %8.1f ms (%.0f MB/s)\n", c.median, c.min,
              info->bytes / 1e6 / (c.median / 1e3));
  std::printf("  of which compile + import:   median %8.1f ms  min %8.1f ms\n", d.median, d.min);
  std::printf("speed-up (median): %.2fx; outputs %s\n", a.median / b.median,
              inputs.empty() ? "not compared" : same ? "bit-identical" : "DIFFER");
  std::filesystem::remove_all(data_dir);
  return same ? 0 : 1;
}

}  // namespace
}  // namespace orrery

int main(int argc, char** argv) { return orrery::Main(argc, argv); }
