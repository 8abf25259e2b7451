#include "storage/segment_store.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "storage/file_util.h"
#include "storage/segment_writer.h"

namespace orrery {

Result<std::unique_ptr<SegmentStore>> SegmentStore::Open(const std::string& data_dir,
                                                         SegmentReader::Options reader_options) {
  const std::string dir = (std::filesystem::path(data_dir) / "segments").string();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoStatus("create", dir, ec.value());
  // Make the new directory's entry durable in the data dir.
  ORRERY_RETURN_IF_ERROR(FsyncDir(data_dir));
  // Reject bad options now rather than on the first read.
  ORRERY_RETURN_IF_ERROR(SegmentReader::Create(reader_options).status());
  return std::unique_ptr<SegmentStore>(new SegmentStore(dir, reader_options));
}

std::string SegmentStore::NewName() {
  std::array<unsigned char, 16> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
    // EINTR: retry. getrandom cannot otherwise fail for 16 bytes on Linux >= 3.17.
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name;
  for (unsigned char b : bytes) {
    name += kHex[b >> 4];
    name += kHex[b & 15];
  }
  return name + std::string(kSegmentSuffix);
}

uint32_t SegmentStore::HeaderCrc(const SegmentHeader& header) {
  std::array<std::byte, kSegmentPageSize> page{};
  EncodeSegmentHeader(header, page);
  uint32_t crc = 0;
  for (int i = 0; i < 4; ++i) crc |= static_cast<uint32_t>(page[kSegmentPageSize - 4 + i]) << (8 * i);
  return crc;
}

Result<SegmentFileInfo> SegmentStore::Write(std::string_view name, uint32_t layout_version,
                                            uint64_t content_id, std::span<const std::byte> payload) {
  const SegmentSectionData section{kPackedWeightsSection, payload};
  return WriteSections(name, layout_version, content_id, {&section, 1});
}

Result<SegmentFileInfo> SegmentStore::WriteSections(std::string_view name, uint32_t layout_version,
                                                    uint64_t content_id,
                                                    std::span<const SegmentSectionData> sections) {
  // The key is the file name without its suffix: a segment renamed to
  // another record's name fails the read.
  const std::string_view key = name.substr(0, name.size() - std::min(name.size(), kSegmentSuffix.size()));
  ORRERY_ASSIGN_OR_RETURN(SegmentHeader header,
                          WriteSegment(dir_, name,
                                       SegmentContents{.layout_version = layout_version,
                                                       .content_id = content_id,
                                                       .key = key,
                                                       .sections = sections}));
  return SegmentFileInfo{.name = std::string(name),
                         .bytes = header.file_size(),
                         .header_crc32c = HeaderCrc(header),
                         .format_version = header.format_version};
}

Result<std::unique_ptr<SegmentReader>> SegmentStore::AcquireReader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_readers_.empty()) {
      std::unique_ptr<SegmentReader> r = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return r;
    }
  }
  return SegmentReader::Create(reader_options_);
}

void SegmentStore::ReleaseReader(std::unique_ptr<SegmentReader> reader) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_readers_.push_back(std::move(reader));
}

Result<SegmentHeader> SegmentStore::ReadVerified(std::string_view name,
                                                 const SegmentExpectation& expected,
                                                 AlignedBuffer* buffer) {
  if (!IsValidSegmentName(name)) {
    return Status::InvalidArgument("bad segment file name '" + std::string(name) + "'");
  }
  const std::string path = dir_ + "/" + std::string(name);
  ORRERY_ASSIGN_OR_RETURN(std::unique_ptr<SegmentReader> reader, AcquireReader());
  Result<SegmentHeader> header = reader->Read(path, buffer);
  ReleaseReader(std::move(reader));
  if (!header.ok()) return header.status();
  const std::string_view key = name.substr(0, name.size() - kSegmentSuffix.size());
  if (header->key != key ||
      (expected.layout_version != 0 && header->layout_version != expected.layout_version) ||
      header->content_id != expected.content_id ||
      (expected.header_crc32c != 0 && HeaderCrc(*header) != expected.header_crc32c)) {
    return Status::DataLoss("segment " + path + " is not the one its model record expects (key '" +
                            header->key + "', layout " + std::to_string(header->layout_version) +
                            ", content id " + std::to_string(header->content_id) + ")");
  }
  return header;
}

Result<std::span<const std::byte>> SegmentStore::Section(const SegmentHeader& header,
                                                         const AlignedBuffer& buffer,
                                                         std::string_view section_name) {
  const SegmentSectionInfo* section = header.Find(section_name);
  if (section == nullptr) {
    return Status::DataLoss("segment '" + header.key + "' has no '" + std::string(section_name) +
                            "' section");
  }
  return SectionBytes(buffer, *section);
}

Result<std::span<const std::byte>> SegmentStore::Read(std::string_view name,
                                                      const SegmentExpectation& expected,
                                                      AlignedBuffer* buffer) {
  ORRERY_ASSIGN_OR_RETURN(SegmentHeader header, ReadVerified(name, expected, buffer));
  return Section(header, *buffer, kPackedWeightsSection);
}

Status SegmentStore::Remove(std::string_view name) {
  Status s = RemoveSegmentFile(dir_, name);
  return s.code() == StatusCode::kNotFound ? Status::Ok() : s;
}

Result<std::vector<std::string>> SegmentStore::Recover(const std::set<std::string>& live,
                                                       size_t* temps_removed) {
  ORRERY_ASSIGN_OR_RETURN(size_t temps, RemoveStaleSegmentTempFiles(dir_));
  if (temps_removed != nullptr) *temps_removed = temps;
  ORRERY_ASSIGN_OR_RETURN(std::vector<std::string> files, ListSegmentFiles(dir_));
  std::vector<std::string> removed;
  for (const std::string& f : files) {
    if (live.count(f) != 0) continue;
    ORRERY_RETURN_IF_ERROR(Remove(f));
    removed.push_back(f);
  }
  return removed;
}

}  // namespace orrery
