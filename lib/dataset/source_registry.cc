// Where lib/ reaches the import sources of formats/: spec expansion, detection and the factory,
// plus the source that reads packrec's own datasets through their readers.
#include <glob.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/crc32c.h"
#include "core/endian.h"
#include "lmdb/lmdb_format.h"
#include "mds/mds_format.h"
#include "packrec/reader.h"
#include "packrec/source.h"
#include "recordio/recordio_format.h"
#include "storage/field_block.h"
#include "storage/json_util.h"
#include "storage/object_store.h"
#include "storage/remote_files.h"
#include "storage/source_util.h"
#include "tfrecord/tfrecord_format.h"
#include "wds/wds_format.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

constexpr std::array<std::pair<SourceFormat, const char*>, 9> kNames = {{
    {SourceFormat::kAuto, "auto"},
    {SourceFormat::kImageFolder, "folder"},
    {SourceFormat::kListFile, "list"},
    {SourceFormat::kWebDataset, "wds"},
    {SourceFormat::kTfRecord, "tfrecord"},
    {SourceFormat::kRecordIo, "recordio"},
    {SourceFormat::kMds, "mds"},
    {SourceFormat::kCaffeLmdb, "caffe-lmdb"},
    {SourceFormat::kPackrec, "packrec"},
}};

// Brace notation, as WebDataset and the shell take it: {000..127} (zero-padded like its first
// bound) and {a,b,c}, several groups multiplying out. InvalidArgument for an unclosed group or a
// range that is too large.
Status ExpandBraces(const std::string& spec, std::vector<std::string>& out) {
  const std::size_t open = spec.find('{');
  if (open == std::string::npos) {
    out.push_back(spec);
    return Status::OK();
  }
  const std::size_t close = spec.find('}', open);
  if (close == std::string::npos) {
    return Status::InvalidArgument("source '" + spec + "': '{' without its '}'");
  }
  const std::string prefix = spec.substr(0, open), suffix = spec.substr(close + 1);
  const std::string body = spec.substr(open + 1, close - open - 1);
  std::vector<std::string> choices;
  const std::size_t dots = body.find("..");
  if (dots != std::string::npos) {
    const std::string first = body.substr(0, dots), last = body.substr(dots + 2);
    const auto digits = [](const std::string& text) {
      return !text.empty() && text.size() <= 18 &&
             std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!digits(first) || !digits(last)) {
      return Status::InvalidArgument("source '" + spec + "': {" + body +
                                     "} is not a range of non-negative integers");
    }
    const std::uint64_t from = std::stoull(first), to = std::stoull(last);
    if (to < from || to - from >= 10'000'000) {
      return Status::InvalidArgument("source '" + spec + "': range {" + body +
                                     "} is empty or over 10 million");
    }
    for (std::uint64_t n = from; n <= to; ++n) {
      std::string number = std::to_string(n);
      if (number.size() < first.size()) number.insert(0, first.size() - number.size(), '0');
      choices.push_back(std::move(number));
    }
  } else {
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = body.find(',', start);
      choices.push_back(body.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  for (const std::string& choice : choices) {
    PACKREC_RETURN_IF_ERROR(ExpandBraces(prefix + choice + suffix, out));
  }
  return Status::OK();
}

bool HasGlob(const std::string& text) { return text.find_first_of("*?[") != std::string::npos; }

// The first bytes of a file (up to `size`), for sniffing. A file that cannot be opened or read is
// an error naming it, never sniffed as empty and taken for another format.
Result<std::vector<std::byte>> Head(const fs::path& file, std::size_t size) {
  PACKREC_ASSIGN_OR_RETURN(const auto in, RandomAccessFile::Open(file));
  PACKREC_ASSIGN_OR_RETURN(const std::uint64_t file_size, in->RegularFileSize());
  std::vector<std::byte> head(std::min<std::uint64_t>(size, file_size));
  PACKREC_RETURN_IF_ERROR(in->ReadExact(0, head));
  return head;
}

class PackrecSource final : public RecordSource {
 public:
  PackrecSource(fs::path path, std::unique_ptr<Reader> reader)
      : reader_(std::move(reader)), files_{std::move(path)} {}

  Result<bool> Next(SourceRecord& record) override {
    if (next_ == reader_->size()) return false;
    record = SourceRecord{};
    record.origin = files_.front().string() + " record " + std::to_string(next_);
    Result<RecordView> view = reader_->Read(next_++, scratch_);
    if (!view.ok()) {
      record.status = view.status();
      return true;
    }
    record.key = std::string(view->key);
    record.label = view->label;
    record.bytes.assign(view->bytes.begin(), view->bytes.end());
    if (view->encoding == Encoding::kRawRgb) {
      record.image =
          ImageInfo{Encoding::kRawRgb, view->width, view->height, 3, Subsampling::kNone, false};
    }
    for (const FieldView& field : view->fields) {
      record.fields.emplace_back();
      if (field.present) record.fields.back().emplace(field.bytes.begin(), field.bytes.end());
    }
    return true;
  }

  std::vector<FieldSpec> fields() const override { return reader_->info().fields; }

  std::vector<std::string> classes() const override { return reader_->info().classes; }
  SourceFormat format() const override { return SourceFormat::kPackrec; }
  const std::vector<fs::path>& files() const override { return files_; }
  std::uint64_t size_hint() const override { return reader_->size(); }

 private:
  std::unique_ptr<Reader> reader_;
  std::vector<fs::path> files_;
  ReadScratch scratch_;
  std::uint64_t next_ = 0;
};

// A directory packrec exported to (packrec-export.json): its format and data files in order.
// False when `dir` holds no such manifest, or one that is not packrec's; an error when it cannot
// be read.
Result<bool> ReadExportManifest(const fs::path& dir, SourceFormat* format,
                                std::vector<fs::path>* files,
                                std::vector<FieldSpec>* fields = nullptr) {
  const fs::path path = dir / "packrec-export.json";
  PACKREC_ASSIGN_OR_RETURN(const bool present, IsRegularFile(path));
  if (!present) return false;
  // Read whole before parsing: json::parse on a stream lets the stream's exception for a failed
  // read (EIO) escape, which ended the process.
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> text, ReadWholeFile(path));
  const nlohmann::json manifest = nlohmann::json::parse(AsText(text), nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object() || !manifest.contains("files") ||
      !manifest["files"].is_array()) {
    return false;
  }
  const nlohmann::json& format_field = FieldOrNull(manifest, "format");
  const std::string name = format_field.is_string() ? format_field.get<std::string>() : "";
  const char* data_extension = name == "wds"        ? ".tar"
                               : name == "tfrecord" ? ".tfrecord"
                               : name == "recordio" ? ".rec"
                                                    : nullptr;
  if (data_extension == nullptr) return false;
  *format = name == "wds"        ? SourceFormat::kWebDataset
            : name == "tfrecord" ? SourceFormat::kTfRecord
                                 : SourceFormat::kRecordIo;
  if (fields != nullptr && manifest.contains("fields")) {
    PACKREC_ASSIGN_OR_RETURN(*fields, SchemaFromJson(manifest["fields"], path.string()));
  }
  files->clear();
  for (const nlohmann::json& group : manifest["files"]) {
    if (!group.is_object() || !group.contains("files") || !group["files"].is_array()) return false;
    for (const nlohmann::json& file : group["files"]) {
      if (!file.is_string()) return false;
      const std::string file_name = file.get<std::string>();
      if (file_name.ends_with(data_extension) && file_name.find('/') == std::string::npos) {
        files->push_back(dir / file_name);
      }
    }
  }
  return true;
}

// The names each container format's files have, the usual one first.
struct ContainerNames {
  SourceFormat format;
  std::vector<std::string_view> suffixes;
};
const std::vector<ContainerNames>& ContainerSuffixes() {
  // Never destroyed, as FormatDescriptors(): read by threads that may outlive exit().
  static const std::vector<ContainerNames>& table = *new std::vector<ContainerNames>{
      {SourceFormat::kWebDataset, {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".tar.bz2"}},
      {SourceFormat::kTfRecord, {".tfrecord", ".tfrecords", ".tfr"}},
      {SourceFormat::kRecordIo, {".rec"}},
  };
  return table;
}

// The container format a file's name says, kAuto for none.
SourceFormat FormatOfName(std::string name) {
  name = AsciiLower(std::move(name));
  for (const ContainerNames& names : ContainerSuffixes()) {
    for (const std::string_view suffix : names.suffixes) {
      if (name.ends_with(suffix)) return names.format;
    }
  }
  return SourceFormat::kAuto;
}

// The file names a container format's files have, for messages: "*.tfrecord (.tfrecords, .tfr)";
// empty for formats that are not read from a list of files.
std::string ContainerFileNames(SourceFormat format) {
  for (const ContainerNames& names : ContainerSuffixes()) {
    if (names.format != format) continue;
    std::string text = "*" + std::string(names.suffixes.front());
    for (std::size_t i = 1; i < names.suffixes.size(); ++i) {
      text += (i == 1 ? " (" : ", ") + std::string(names.suffixes[i]);
    }
    return names.suffixes.size() > 1 ? text + ")" : text;
  }
  return "";
}

// A directory of container files and nothing else that could be data (no sub-directories, so
// not an image folder): its files of that format, sorted. Companions (.idx, .lst, .json, ...)
// are left aside. Empty when `dir` is not such a directory.
std::vector<fs::path> ContainerFilesIn(const fs::path& dir, SourceFormat* format) {
  std::vector<fs::path> files;
  SourceFormat found = SourceFormat::kAuto;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_directory(error)) return {};
    const SourceFormat kind = FormatOfName(entry.path().filename().string());
    if (kind == SourceFormat::kAuto) continue;
    if (found != SourceFormat::kAuto && kind != found) return {};  // mixed: say nothing
    found = kind;
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  *format = found;
  return files;
}

}  // namespace

std::string_view SourceFormatName(SourceFormat format) {
  for (const auto& [value, name] : kNames) {
    if (value == format) return name;
  }
  return "unknown";
}

std::vector<std::string> SourceFormatNames() {
  std::vector<std::string> names;
  for (const auto& entry : kNames) names.emplace_back(entry.second);
  return names;
}

Result<SourceFormat> ParseSourceFormat(std::string_view name) {
  std::string known;
  for (const auto& [value, text] : kNames) {
    if (name == text) return value;
    known += (known.empty() ? "" : ", ") + std::string(text);
  }
  return Status::InvalidArgument("--from '" + std::string(name) + "' is not one of: " + known);
}

Result<std::vector<fs::path>> ExpandSourceSpec(const std::string& spec) {
  std::vector<std::string> patterns;
  if (IsRemoteUrl(spec)) {
    // A dataset's URL, or container files at URLs: braces, and globs over an S3 prefix.
    PACKREC_RETURN_IF_ERROR(ExpandBraces(spec, patterns));
    PACKREC_ASSIGN_OR_RETURN(const std::vector<std::string> urls,
                             ExpandUrlPattern(patterns, RemoteOptions{}));
    return std::vector<fs::path>(urls.begin(), urls.end());
  }
  std::error_code error;
  // A path that exists is taken as it is, braces and all.
  if (fs::exists(spec, error)) {
    patterns.push_back(spec);
  } else {
    PACKREC_RETURN_IF_ERROR(ExpandBraces(spec, patterns));
  }
  std::vector<fs::path> files;
  for (const std::string& pattern : patterns) {
    if (!HasGlob(pattern) || fs::exists(pattern, error)) {
      if (!fs::exists(pattern, error)) {
        return Status::NotFound("source " + pattern + " does not exist" +
                                (patterns.size() > 1 ? " (from " + spec + ")" : ""));
      }
      files.emplace_back(pattern);
      continue;
    }
    glob_t matches{};
    const int rc = glob(pattern.c_str(), 0, nullptr, &matches);
    if (rc == 0) {
      for (std::size_t i = 0; i < matches.gl_pathc; ++i) files.emplace_back(matches.gl_pathv[i]);
    }
    globfree(&matches);
    if (rc == GLOB_NOMATCH) return Status::NotFound("no file matches " + pattern);
    if (rc != 0) return Status::IOError("cannot expand " + pattern);
  }
  return files;
}

Result<SourceFormat> DetectSourceFormat(const std::string& spec) {
  PACKREC_ASSIGN_OR_RETURN(const std::vector<fs::path> files, ExpandSourceSpec(spec));
  const fs::path& first = files.front();
  // At URLs: WebDataset, TFRecord and RecordIO files by their names, else a shard dataset.
  if (IsRemoteUrl(first.string())) {
    const SourceFormat by_name = FormatOfName(first.filename().string());
    if (by_name == SourceFormat::kWebDataset || by_name == SourceFormat::kTfRecord ||
        by_name == SourceFormat::kRecordIo) {
      return by_name;
    }
    if (files.size() > 1) {
      return Status::InvalidArgument("cannot tell what " + spec + " holds from " + first.string() +
                                     "; pass --from");
    }
    return SourceFormat::kPackrec;
  }
  std::error_code error;
  if (files.size() == 1) {
    if (fs::is_directory(first, error)) {
      SourceFormat exported = SourceFormat::kAuto;
      std::vector<fs::path> ignored;
      PACKREC_ASSIGN_OR_RETURN(const bool was_exported,
                               ReadExportManifest(first, &exported, &ignored));
      if (was_exported) return exported;
      if (fs::exists(first / "manifest.json", error) ||
          fs::exists(first / "packrec-manifest.json", error)) {
        return SourceFormat::kPackrec;
      }
      if (fs::exists(first / "index.json", error)) return SourceFormat::kMds;
      SourceFormat contained = SourceFormat::kAuto;
      if (!ContainerFilesIn(first, &contained).empty()) return contained;
      if (fs::exists(first / "data.mdb", error)) {
        // An LMDB without packrec's manifest: a Caffe database, or a packrec one (manifest key).
        if (OpenDataset(first).ok()) return SourceFormat::kPackrec;
        return SourceFormat::kCaffeLmdb;
      }
      return SourceFormat::kImageFolder;
    }
    if (!fs::is_regular_file(first, error)) {
      return Status::InvalidInput("source " + first.string() +
                                  " is not a directory or a regular file");
    }
  }
  const std::string name = AsciiLower(first.filename().string());
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> head, Head(first, 512));
  if (name.ends_with(".h5") || name.ends_with(".hdf5")) {
    if (OpenDataset(first).ok()) return SourceFormat::kPackrec;
  }
  if (head.size() >= 262 && std::memcmp(head.data() + 257, "ustar", 5) == 0) {
    return SourceFormat::kWebDataset;
  }
  const SourceFormat by_name = FormatOfName(name);
  if (by_name == SourceFormat::kWebDataset) return by_name;
  if (head.size() >= 8 && LoadLE<std::uint32_t>(head.data()) == recordio::kMagic) {
    return SourceFormat::kRecordIo;
  }
  if (tfrecord::LooksLikeFrameHeader(head)) return SourceFormat::kTfRecord;
  if (by_name != SourceFormat::kAuto) return by_name;
  if (files.size() > 1) {
    return Status::InvalidArgument("cannot tell what " + spec + " holds from " + first.string() +
                                   "; pass --from");
  }
  return SourceFormat::kListFile;
}

namespace {

// Container files at URLs stream through a spool of local copies (storage/remote_files.h); a
// shard dataset's URL is read in place.
Result<std::unique_ptr<RecordSource>> OpenUrlSource(std::vector<fs::path> files,
                                                    SourceFormat format, SourceOptions options) {
  if (format == SourceFormat::kPackrec && files.size() == 1) {
    PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, OpenDataset(files.front()));
    return std::unique_ptr<RecordSource>(new PackrecSource(files.front(), std::move(reader)));
  }
  if (format != SourceFormat::kWebDataset && format != SourceFormat::kTfRecord &&
      format != SourceFormat::kRecordIo) {
    return Status::NotSupported("--from " + std::string(SourceFormatName(format)) +
                                " is not read from URLs (WebDataset, TFRecord and RecordIO " +
                                "files and shard datasets are): copy it to local disk first");
  }
  std::vector<std::string> urls(files.begin(), files.end());
  PACKREC_ASSIGN_OR_RETURN(std::shared_ptr<RemoteFileSpool> spool,
                           RemoteFileSpool::Create(std::move(urls), RemoteOptions{}));
  options.local_copy = [spool](std::size_t index) { return spool->Acquire(index); };
  if (format == SourceFormat::kWebDataset) return wds::OpenWdsSource(std::move(files), options);
  if (format == SourceFormat::kTfRecord) {
    return tfrecord::OpenTfRecordSource(std::move(files), options);
  }
  return recordio::OpenRecordIoSource(std::move(files), options);
}

}  // namespace

Result<std::unique_ptr<RecordSource>> OpenRecordSource(const std::string& spec, SourceFormat format,
                                                       const SourceOptions& given_options) {
  PACKREC_ASSIGN_OR_RETURN(std::vector<fs::path> files, ExpandSourceSpec(spec));
  SourceFormat exported = SourceFormat::kAuto;
  std::vector<fs::path> exported_files;
  std::vector<FieldSpec> exported_fields;
  std::error_code error;
  bool was_exported = false;
  if (files.size() == 1 && fs::is_directory(files.front(), error)) {
    PACKREC_ASSIGN_OR_RETURN(was_exported, ReadExportManifest(files.front(), &exported,
                                                              &exported_files, &exported_fields));
  }
  SourceOptions options = given_options;
  if (IsRemoteUrl(files.front().string())) {
    return OpenUrlSource(std::move(files), format, std::move(options));
  }
  if (was_exported && exported == format) {
    if (exported_files.empty()) {
      return Status::NotFound(files.front().string() + " lists no data files");
    }
    files = std::move(exported_files);
    // The export's own fields keep their names and types; its tars' json members are packrec's
    // metadata unless a field is json.
    options.known_fields = std::move(exported_fields);
    options.packrec_export = true;
    options.wds_json_is_metadata = std::ranges::none_of(
        options.known_fields,
        [](const FieldSpec& field) { return FieldFileSuffix(field) == "json"; });
  } else if (files.size() == 1 && fs::is_directory(files.front(), error)) {
    SourceFormat contained = SourceFormat::kAuto;
    std::vector<fs::path> inside = ContainerFilesIn(files.front(), &contained);
    if (!inside.empty() && contained == format) {
      files = std::move(inside);
    } else if (const std::string names = ContainerFileNames(format); !names.empty()) {
      // Left as it is, the directory would fail as a file that cannot be read.
      const std::string holds =
          inside.empty() ? ""
                         : " (it holds " + std::string(SourceFormatName(contained)) + " files)";
      return Status::InvalidInput("--from " + std::string(SourceFormatName(format)) + ": " +
                                  files.front().string() + " is a directory without " + names +
                                  " files" + holds +
                                  "; name the files (a glob or a brace range), or leave out "
                                  "--from to detect the format");
    }
  }
  const auto one = [&]() -> Result<fs::path> {
    if (files.size() != 1) {
      return Status::InvalidArgument("--from " + std::string(SourceFormatName(format)) +
                                     " takes one path, " + spec + " names " +
                                     std::to_string(files.size()));
    }
    return files.front();
  };
  switch (format) {
    case SourceFormat::kWebDataset:
      return wds::OpenWdsSource(std::move(files), options);
    case SourceFormat::kTfRecord:
      return tfrecord::OpenTfRecordSource(std::move(files), options);
    case SourceFormat::kRecordIo:
      return recordio::OpenRecordIoSource(std::move(files), options);
    case SourceFormat::kMds: {
      PACKREC_ASSIGN_OR_RETURN(const fs::path dir, one());
      return mds::OpenMdsSource(dir, options);
    }
    case SourceFormat::kCaffeLmdb: {
      PACKREC_ASSIGN_OR_RETURN(const fs::path path, one());
      return lmdb::OpenCaffeLmdbSource(path, options);
    }
    case SourceFormat::kPackrec: {
      PACKREC_ASSIGN_OR_RETURN(const fs::path path, one());
      PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, OpenDataset(path));
      return std::unique_ptr<RecordSource>(new PackrecSource(path, std::move(reader)));
    }
    default:
      return Status::InvalidArgument(std::string(SourceFormatName(format)) +
                                     " is a listing of files, not a record source");
  }
}

}  // namespace packrec
