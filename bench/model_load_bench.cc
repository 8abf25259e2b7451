// Cold load of a model, three ways:
//   compile: from its ONNX (parse, import, fold, fuse, pack every constant
//     GEMM / Conv operand);
//   segment + compile: packed weights read back from a segment file
//     (storage/segment_store.h: io_uring, O_DIRECT, CRC32C verified) and
//     imported while compiling the ONNX (layout 1, runtime/packed_weights.h);
//   segment load: the model image and packed weights read from one segment
//     and rebuilt with CompiledModel::Load, no ONNX (layout 2,
//     runtime/model_image.h), as the server's ModelLoader does.
// All end with the model ready to serve its signature's shapes (the plan
// specialised), and are checked to give the same output on the model's test
// input when one is given. The ratio printed last is the segment load over
// its own cold read (bytes / measured read bandwidth), and the cold start
// (read + load + first inference) over read + one warm inference: issue 7's
// scenario 2 bound.
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

#include "cache/model_loader.h"
#include "runtime/model.h"
#include "runtime/model_image.h"
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
  auto info = (*store)->Write(name, kPackedWeightsSegmentLayoutVersion, 1, *blob);
  const auto w1 = Clock::now();
  if (!info.ok()) return Fail("write segment", info.status());
  const std::string seg_path = (*store)->dir() + "/" + name;

  // The layout-2 segment: model image + packed weights.
  auto image = ExportModelImage(**first, {.packed_only = true});  // as ModelLoader writes it (no GPU)
  if (!image.ok()) return Fail("export image", image.status());
  const std::string image_name = SegmentStore::NewName();
  const SegmentSectionData sections[] = {{kModelImageSection, *image}, {kPackedWeightsSection, *blob}};
  const auto w2 = Clock::now();
  auto image_info = (*store)->WriteSections(image_name, kModelSegmentLayoutVersion, 1, sections);
  const auto w3 = Clock::now();
  if (!image_info.ok()) return Fail("write image segment", image_info.status());
  const std::string image_path = (*store)->dir() + "/" + image_name;

  std::vector<NamedTensor> inputs;
  if (!input_path.empty()) {
    auto t = ParseTensorProto(ReadAll(input_path));
    if (!t.ok()) return Fail("input", t.status());
    inputs.push_back(std::move(t).value());
  } else {
    // Zeros of the signature's shapes (dynamic dims as 1).
    for (const TensorSpec& s : (*first)->signature().inputs) {
      Shape shape = s.shape;
      for (int64_t& d : shape) d = d < 0 ? 1 : d;
      inputs.push_back({s.name, Tensor(s.dtype, shape)});
    }
  }
  std::vector<double> repack, segment, read_only, import_only, image_total, image_read, image_load,
      first_run, warm_run;
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
    auto payload = (*store)->Read(name, {.layout_version = kPackedWeightsSegmentLayoutVersion, .content_id = 1}, &buffer);
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

    // Segment load: what ModelLoader does for a layout-2 segment.
    Evict(image_path);
    const auto c0 = Clock::now();
    auto image_buffer = std::make_shared<AlignedBuffer>();
    auto header = (*store)->ReadVerified(image_name, {.layout_version = kModelSegmentLayoutVersion, .content_id = 1},
                                         image_buffer.get());
    if (!header.ok()) return Fail("read image segment", header.status());
    const auto c1 = Clock::now();
    auto img = SegmentStore::Section(*header, *image_buffer, kModelImageSection);
    auto pw = SegmentStore::Section(*header, *image_buffer, kPackedWeightsSection);
    if (!img.ok() || !pw.ok()) return Fail("sections", img.ok() ? pw.status() : img.status());
    // Borrowing the read buffer, as ModelLoader does.
    auto from_image = CompiledModel::Load({.image = *img, .packed_weights = *pw, .owner = image_buffer});
    if (!from_image.ok()) return Fail("load from segment", from_image.status());
    // No export here: it would copy every packed matrix out again. Load
    // specialises a static model's one plan itself; a dynamic model's first
    // run below pays for it instead.
    const auto c2 = Clock::now();
    auto y = (*from_image)->Run(inputs);
    const auto c3 = Clock::now();
    if (!y.ok()) return Fail("run loaded", y.status());
    image_read.push_back(Ms(c0, c1));
    image_load.push_back(Ms(c1, c2));
    image_total.push_back(Ms(c0, c2));
    first_run.push_back(Ms(c2, c3));
    for (int k = 0; k < 3; ++k) {
      const auto d0 = Clock::now();
      auto z = (*from_image)->Run(inputs);
      if (!z.ok()) return Fail("run", z.status());
      warm_run.push_back(Ms(d0, Clock::now()));
    }

    if (r == 0) {
      auto x = (*plain)->Run(inputs);
      auto v = (*loaded)->Run(inputs);
      if (!x.ok() || !v.ok()) return Fail("run", x.ok() ? v.status() : x.status());
      for (size_t o = 0; o < x->size(); ++o) {
        same = same && (*x)[o].tensor.bytes() == (*v)[o].tensor.bytes() &&
               (*x)[o].tensor.bytes() == (*y)[o].tensor.bytes();
      }
    }
  }
  const Stats a = Summarise(repack), b = Summarise(segment), c = Summarise(read_only),
              d = Summarise(import_only), e = Summarise(image_total), f = Summarise(image_read),
              g = Summarise(image_load), h = Summarise(first_run), k = Summarise(warm_run);
  const double mb = image_info->bytes / 1e6;
  const double mbps = mb / (f.median / 1e3);
  std::printf("model %s (%.1f MB ONNX), %d reps\n", model_path.c_str(), bytes.size() / 1e6, reps);
  std::printf("layout 1 segment: %.1f MB, %zu packed entries imported, written in %.1f ms (fdatasync + rename + dir fsync)\n",
              info->bytes / 1e6, imported, Ms(w0, w1));
  std::printf("layout 2 segment: %.1f MB (model image %.2f MB), written in %.1f ms\n", mb,
              image->size() / 1e6, Ms(w2, w3));
  std::printf("compile from ONNX (repack):     median %8.1f ms  min %8.1f ms\n", a.median, a.min);
  std::printf("segment read + compile ONNX:    median %8.1f ms  min %8.1f ms\n", b.median, b.min);
  std::printf("  of which cold segment read:   median %8.1f ms  min %8.1f ms (%.0f MB/s)\n", c.median, c.min,
              info->bytes / 1e6 / (c.median / 1e3));
  std::printf("  of which compile + import:    median %8.1f ms  min %8.1f ms\n", d.median, d.min);
  std::printf("segment load (no ONNX):         median %8.1f ms  min %8.1f ms\n", e.median, e.min);
  std::printf("  of which cold segment read:   median %8.1f ms  min %8.1f ms (%.0f MB/s)\n", f.median, f.min, mbps);
  std::printf("  of which CompiledModel::Load: median %8.1f ms  min %8.1f ms\n", g.median, g.min);
  std::printf("first inference after load:     median %8.1f ms; warm inference median %.1f ms\n", h.median,
              k.median);
  std::printf("speed-up vs compile (median): segment + compile %.2fx, segment load %.2fx\n", a.median / b.median,
              a.median / e.median);
  std::printf("segment load / (bytes / read bandwidth) = %.2f; cold start (read + load + first run) / "
              "(bytes / bandwidth + warm run) = %.2f\n",
              e.median / f.median, (e.median + h.median) / (f.median + k.median));
  std::printf("outputs %s\n", same ? "bit-identical" : "DIFFER");
  std::filesystem::remove_all(data_dir);
  return same ? 0 : 1;
}

}  // namespace
}  // namespace orrery

int main(int argc, char** argv) { return orrery::Main(argc, argv); }
