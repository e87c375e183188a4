// WebDataset import: tar members grouped into samples the way WebDataset groups them (consecutive
// members sharing the name up to the first dot of the base name), one record per sample.
#include <archive.h>
#include <archive_entry.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/checksum.h"
#include "core/file_io.h"
#include "core/keys.h"
#include "storage/field_block.h"
#include "storage/json_check.h"
#include "storage/source_fields.h"
#include "storage/source_util.h"
#include "wds/wds_format.h"

namespace packrec::wds {
namespace {

namespace fs = std::filesystem;

// A member larger than this is refused rather than read into memory (no image is that large).
constexpr la_int64_t kMaxMemberBytes = 1ll << 31;

struct Member {
  std::string extension;  // after the first dot of the base name, lower-cased
  std::vector<std::byte> bytes;
  la_int64_t refused_size = 0;  // over kMaxMemberBytes: its bytes were skipped, not read
};

struct Sample {
  std::string key;  // the member name up to the first dot of its base name
  std::vector<Member> members;
  std::uint64_t offset = 0;  // of its first member's header
  std::uint64_t number = 0;  // samples before it in this tar
  // Why the sample cannot be one record though its members read well: two members of one suffix
  // (which of them is the image?), or a key an earlier sample of the tar had. WebDataset's own
  // reader keeps the last of two members silently; a converter must not guess.
  std::string ambiguity;
};

// WebDataset's split: the key is everything up to the first dot after the last '/'. A leading
// "./" (GNU tar's names for `tar -cf x.tar .`) is not part of the key: a key component "." is not
// a legal key (core/keys.h), and would reject every sample of such a tar.
void SplitMemberName(std::string_view name, std::string* key, std::string* extension) {
  while (name.starts_with("./")) name.remove_prefix(2);
  const std::size_t slash = name.rfind('/');
  const std::size_t base = slash == std::string_view::npos ? 0 : slash + 1;
  const std::size_t dot = name.find('.', base);
  if (dot == std::string_view::npos) {
    *key = std::string(name);
    extension->clear();
  } else {
    *key = std::string(name.substr(0, dot));
    *extension = AsciiLower(std::string(name.substr(dot + 1)));
  }
}

// The top-level members of a sample's json that a record reads (its label, key and class
// name), through nlohmann's SAX interface: the whole member is checked as JSON, but not built
// into a tree, which cost the reading thread an allocation per value of every sample.
class JsonPicker final : public nlohmann::json_sax<nlohmann::json> {
 public:
  // The names it keeps the values of (three at most: a label, a key and a class name).
  explicit JsonPicker(std::array<std::string_view, 3> wanted) : wanted_(wanted) {}
  // What it read, as ReadJsonMembers gives it: whether each name is there, its value when a
  // string.
  JsonMembers Members() const {
    JsonMembers members;
    members.is_object = is_object_;
    for (std::size_t i = 0; i < found_.size(); ++i) {
      members.present[i] = found_[i].has_value();
      if (found_[i] && found_[i]->is_string()) members.strings[i] = found_[i]->get<std::string>();
    }
    return members;
  }
  // The member `name`, or nullptr when the object has none.
  const nlohmann::json* Find(std::string_view name) const {
    const auto at = std::ranges::find(wanted_, name) - wanted_.begin();
    return at < static_cast<std::ptrdiff_t>(found_.size()) && found_[at] ? &*found_[at] : nullptr;
  }

  // Values are made into json only when wanted: most members of a sample's json are not, and
  // each string made into one was an allocation and a copy on the reading thread.
  bool null() override {
    return Value([] { return nlohmann::json(nullptr); });
  }
  bool boolean(bool value) override {
    return Value([value] { return nlohmann::json(value); });
  }
  bool number_integer(number_integer_t value) override {
    return Value([value] { return nlohmann::json(value); });
  }
  bool number_unsigned(number_unsigned_t value) override {
    return Value([value] { return nlohmann::json(value); });
  }
  bool number_float(number_float_t value, const string_t& /*text*/) override {
    return Value([value] { return nlohmann::json(value); });
  }
  bool string(string_t& value) override {
    return Value([&value] { return nlohmann::json(std::move(value)); });
  }
  bool binary(binary_t& /*value*/) override {
    return Value([] { return nlohmann::json(nullptr); });
  }
  bool start_object(std::size_t /*elements*/) override {
    if (depth_ == 0) is_object_ = true;
    return Open([] { return nlohmann::json::object(); });
  }
  bool start_array(std::size_t /*elements*/) override {
    return Open([] { return nlohmann::json::array(); });
  }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& name) override {
    if (depth_ == 1) current_.swap(name);
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  // Where the value of the member being read is kept, when it is wanted (the last of a name
  // repeated in the object wins, as when nlohmann builds it into a tree).
  std::optional<nlohmann::json>* Slot() {
    if (depth_ != 1 || !is_object_) return nullptr;
    const auto at = std::ranges::find(wanted_, current_) - wanted_.begin();
    return at < static_cast<std::ptrdiff_t>(found_.size()) ? &found_[at] : nullptr;
  }
  template <typename Make>
  bool Value(const Make& make) {
    if (std::optional<nlohmann::json>* slot = Slot()) *slot = make();
    return true;
  }
  // A container as a wanted member's value is kept empty: not a label, key or name.
  template <typename Make>
  bool Open(const Make& make_empty) {
    if (std::optional<nlohmann::json>* slot = Slot()) *slot = make_empty();
    ++depth_;
    return true;
  }
  bool Close() {
    --depth_;
    return true;
  }

  std::array<std::string_view, 3> wanted_;
  std::array<std::optional<nlohmann::json>, 3> found_;
  std::string current_;
  int depth_ = 0;
  bool is_object_ = false;
};

class WdsSource final : public FileListSource {
 public:
  WdsSource(std::vector<fs::path> files, SourceOptions options)
      : FileListSource(std::move(files)), options_(std::move(options)) {
    if (!options_.read_ahead) read_ahead_.Disable();
    if (!options_.image_field.empty()) image_extensions_ = {AsciiLower(options_.image_field)};
    if (!options_.label_field.empty()) label_extensions_ = {AsciiLower(options_.label_field)};
    if (!options_.label_field.empty()) json_names_[0] = AsciiLower(options_.label_field);
    if (!options_.key_field.empty()) json_names_[1] = options_.key_field;
  }
  ~WdsSource() override { CloseArchive(); }

  Result<bool> Next(SourceRecord& record) override {
    while (ready_.empty()) {
      if (archive_ == nullptr) {
        if (file_index_ == files_.size()) return false;
        OpenArchive();
        continue;  // a file that cannot be opened or is not a tar is one reject, archive_ closed
      }
      ReadMember();
    }
    record = std::move(ready_.front());
    ready_.pop_front();
    return true;
  }

  std::vector<std::string> classes() const override {
    std::lock_guard lock(class_names_mutex_);
    return class_names_.Complete();
  }

  // The json member's parse (the label, key and class name it gives) is the one check worth
  // taking off the reading thread: it cost a sample with a 400-byte json as much as reading the
  // sample's tar headers (docs/benchmarks.md).
  bool DeferChecks() override {
    defer_json_ = true;
    return true;
  }
  void FinishRecord(SourceRecord& record) const override {
    const SourceRecord::Deferred deferred = std::move(record.deferred);
    record.deferred = {};
    if (!record.status.ok() || (deferred.tag & kJsonDeferred) == 0) return;
    const std::uint64_t field = deferred.tag >> kJsonFieldShift;
    const std::span<const std::byte> json =
        field > 0 ? std::span<const std::byte>(*record.fields[field - 1]) : deferred.bytes;
    record.status = ApplyJson(json, (deferred.tag & kLabelTaken) != 0, record);
  }
  SourceFormat format() const override { return SourceFormat::kWebDataset; }

 private:
  void OpenArchive() {
    archive_ = archive_read_new();
    archive_read_support_format_tar(archive_);
    // A 0-byte file holds no samples, as GNU tar and the TFRecord and RecordIO importers read one.
    archive_read_support_format_empty(archive_);
    archive_read_support_filter_all(archive_);  // .tar.gz, .tar.zst, ... as well
    // Opened as the TFRecord and RecordIO importers open their files: a FIFO a glob matched is
    // refused, never waited on (a tar is read from a regular file).
    const Result<std::filesystem::path> local = LocalFile(options_);
    Result<std::unique_ptr<RandomAccessFile>> opened =
        local.ok() ? RandomAccessFile::Open(*local)
                   : Result<std::unique_ptr<RandomAccessFile>>(local.status());
    const Result<std::uint64_t> size =
        opened.ok() ? (*opened)->RegularFileSize() : Result<std::uint64_t>(opened.status());
    if (!size.ok()) {
      CloseArchive();
      SourceRecord failed;
      RejectUnopenedFile(failed, size.status());
      ready_.push_back(std::move(failed));
      return;
    }
    file_ = std::move(*opened);
    file_size_ = *size;
    // No bigger than the tar (a small one does not pay for zeroing and mapping 1 MiB), at least
    // one byte so that a read past the size stat'ed here still sees what was added since.
    const auto wanted =
        static_cast<std::size_t>(std::clamp<std::uint64_t>(file_size_, 1, kReadBufferBytes));
    if (read_buffer_.size() < wanted) read_buffer_.resize(wanted);
    read_position_ = 0;
    read_failed_ = false;
    read_ahead_.Reset();
    file_->AdviseSequential(0, file_size_);
    // Our own read callback, so the kernel is kept reading ahead (ReadAhead) on cold storage.
    archive_read_set_skip_callback(archive_, &WdsSource::SkipCallback);
    samples_in_file_ = 0;
    RememberKeysOfFile();
    keys_in_file_.clear();
    if (archive_read_open(archive_, this, nullptr, &WdsSource::ReadCallback, nullptr) !=
        ARCHIVE_OK) {
      // Damaged source data, which follows --on-error like a damaged member (and a file that
      // fails to read, as in the other importers), rather than stopping the import.
      FailArchive(read_failed_ ? "cannot be read" : "not a tar archive", 0, "",
                  "the file is not read");
    }
  }

  // The keys of the tar just read join those of the tars before it, as XXH64 hashes (8 bytes a
  // sample, where the keys themselves would take tens: an import of LAION's size keeps them all;
  // two different keys share a hash once in 2^64 pairs).
  void RememberKeysOfFile() {
    const std::size_t before = keys_of_earlier_files_.size();
    for (const auto& [key, offset] : keys_in_file_) keys_of_earlier_files_.push_back(Xxh64(key));
    const auto middle = keys_of_earlier_files_.begin() + static_cast<std::ptrdiff_t>(before);
    std::sort(middle, keys_of_earlier_files_.end());
    std::inplace_merge(keys_of_earlier_files_.begin(), middle, keys_of_earlier_files_.end());
  }

  // The current tar is done with: the next one is opened on the next call.
  void EndArchive() {
    CloseArchive();
    LeaveFile(file_size_);
  }

  std::uint64_t position_in_file() const override {
    return archive_ != nullptr ? read_position_ : 0;
  }

  void CloseArchive() {
    if (archive_ != nullptr) archive_read_free(archive_);
    archive_ = nullptr;
    file_.reset();
  }

  static la_ssize_t ReadCallback(archive* a, void* self, const void** buffer) {
    auto* source = static_cast<WdsSource*>(self);
    source->read_ahead_.At(*source->file_, source->read_position_, source->file_size_);
    const Result<std::size_t> got =
        source->file_->ReadSome(source->read_position_, source->read_buffer_);
    if (!got.ok()) {
      source->read_failed_ = true;
      archive_set_error(a, EIO, "%s", got.status().message().c_str());
      return -1;
    }
    source->read_position_ += *got;
    *buffer = source->read_buffer_.data();
    return static_cast<la_ssize_t>(*got);
  }

  // Members no record is made from are skipped with a seek rather than read (libarchive reads
  // through them where a compression filter is in the way). Never past the end: a tar cut short
  // inside a skipped member fails at the end, as one read through would.
  static la_int64_t SkipCallback(archive* /*a*/, void* self, la_int64_t request) {
    auto* source = static_cast<WdsSource*>(self);
    const auto left = static_cast<la_int64_t>(source->file_size_) -
                      static_cast<la_int64_t>(source->read_position_);
    const la_int64_t skip = std::clamp<la_int64_t>(request, 0, std::max<la_int64_t>(left, 0));
    if (skip == 0) return 0;
    source->read_position_ += static_cast<std::uint64_t>(skip);
    return skip;
  }

  // The current tar cannot be read further: what came before is delivered, the sample being read
  // and the rest of the tar are one rejected record, and the next tar is opened.
  void FailArchive(const std::string& what, std::uint64_t offset, const std::string& member,
                   const std::string& consequence = "the rest of this tar is not read") {
    const std::string message =
        archive_error_string(archive_) != nullptr ? archive_error_string(archive_) : "";
    SourceRecord failed;
    failed.origin = files_[file_index_].string() + " sample " +
                    std::to_string(pending_ ? pending_->number : samples_in_file_) + " at byte " +
                    std::to_string(offset) + (member.empty() ? "" : " (member " + member + ")");
    failed.key = member;
    failed.status =
        Status::Corruption(what + (message.empty() ? "" : ": " + message) + "; " + consequence);
    pending_.reset();
    ready_.push_back(std::move(failed));
    EndArchive();
  }

  // The tar's end, where the next header would start at `offset`.
  void EndOfTar(std::uint64_t offset) {
    // libarchive takes a tar that ends at a member boundary for a whole one; a tar writer
    // stopped between two members leaves just that, and its last sample may lack members (an
    // image without its cls would import with label 0). A whole tar ends with zero blocks.
    if (pending_ && archive_filter_bytes(archive_, 0) < static_cast<la_int64_t>(offset) + 512) {
      FailArchive("the tar ends at byte " + std::to_string(offset) +
                      " without the zero blocks that end a tar, as one whose writing stopped "
                      "does; its last sample may be missing members",
                  pending_->offset, "", "the samples before it are kept");
      return;
    }
    Flush();
    EndArchive();
  }

  // A new sample of key `key` at byte `offset`; a key this tar or an earlier one of the source
  // had already makes it a reject.
  void StartSample(const std::string& key, std::uint64_t offset) {
    pending_ = Sample{key, {}, offset, samples_in_file_++, {}};
    pending_->members.reserve(4);  // an image, a label and a few more, mostly
    const auto [earlier, added] = keys_in_file_.emplace(key, offset);
    if (!added) {
      pending_->ambiguity = "its key was the key of the sample at byte " +
                            std::to_string(earlier->second) +
                            " of this tar already (a second sample of one key is not kept)";
    } else if (std::binary_search(keys_of_earlier_files_.begin(), keys_of_earlier_files_.end(),
                                  Xxh64(key))) {
      pending_->ambiguity =
          "its key was the key of a sample of an earlier tar of this source already (a second "
          "sample of one key is not kept)";
    }
  }

  // The bytes of the member `entry` (`size` as its header says, -1 unknown) into member.bytes;
  // false after FailArchive when they cannot all be read.
  bool CopyMemberBytes(archive_entry* entry, la_int64_t size, std::uint64_t offset,
                       const std::string& name, Member& member) {
    // The member's blocks are copied out of libarchive's buffer as they lie: reading through
    // archive_read_data needed a zero-filled vector first, a second pass over every byte on the
    // reading thread, the import's busiest.
    if (size > 0) member.bytes.reserve(static_cast<std::size_t>(size));
    for (;;) {
      const void* block = nullptr;
      std::size_t block_size = 0;
      la_int64_t block_offset = 0;
      const int got = archive_read_data_block(archive_, &block, &block_size, &block_offset);
      if (got == ARCHIVE_EOF) break;
      if (got < ARCHIVE_OK || block_offset < static_cast<la_int64_t>(member.bytes.size()) ||
          block_offset + static_cast<la_int64_t>(block_size) > kMaxMemberBytes) {
        FailArchive("truncated or damaged member", offset, name);
        return false;
      }
      // A sparse member's holes read as zeros, as archive_read_data gives them.
      member.bytes.resize(static_cast<std::size_t>(block_offset));
      const auto* bytes = static_cast<const std::byte*>(block);
      member.bytes.insert(member.bytes.end(), bytes, bytes + block_size);
    }
    // A sparse member that ends in a hole has no block for it: its last bytes are zeros.
    if (size >= 0 && member.bytes.size() < static_cast<std::uint64_t>(size) &&
        archive_entry_sparse_count(entry) > 0) {
      member.bytes.resize(static_cast<std::size_t>(size));
    }
    if (size >= 0 && member.bytes.size() != static_cast<std::uint64_t>(size)) {
      FailArchive("member is " + std::to_string(member.bytes.size()) + " bytes, its header says " +
                      std::to_string(size),
                  offset, name);
      return false;
    }
    return true;
  }

  void ReadMember() {
    archive_entry* entry = nullptr;
    const int header = archive_read_next_header(archive_, &entry);
    const la_int64_t header_at = archive_read_header_position(archive_);
    // After a fatal error libarchive answers ARCHIVE_FATAL (a negative offset) there; it stopped
    // reading where the bad header starts.
    const auto offset = static_cast<std::uint64_t>(
        header_at >= 0 ? header_at : std::max<la_int64_t>(archive_filter_bytes(archive_, 0), 0));
    if (header == ARCHIVE_EOF) {
      EndOfTar(offset);
      return;
    }
    // The sample being read may have had members after this header: it is rejected with the rest.
    if (header != ARCHIVE_OK && header != ARCHIVE_WARN) {
      FailArchive("bad tar header", offset, "");
      return;
    }
    const char* raw_name = archive_entry_pathname(entry);
    const std::string name = raw_name != nullptr ? raw_name : "";
    const char* hard_link = archive_entry_hardlink(entry);
    const char* symlink = archive_entry_symlink(entry);
    if (hard_link == nullptr && symlink == nullptr && archive_entry_filetype(entry) != AE_IFREG) {
      return;  // directories, devices: never a sample's member
    }
    std::string key, extension;
    SplitMemberName(name, &key, &extension);
    // WebDataset skips members whose base name starts with "__" (its own metadata).
    if (name.empty() || key.substr(key.rfind('/') + 1).starts_with("__")) {
      archive_read_data_skip(archive_);
      return;
    }
    if (pending_ && pending_->key != key) Flush();
    if (!pending_) StartSample(key, offset);
    if (hard_link != nullptr || symlink != nullptr) {
      // A link holds no bytes of its own; WebDataset's reader skips it, which would drop the
      // member without a word.
      if (pending_->ambiguity.empty()) {
        pending_->ambiguity = "its member " + name + " is a " +
                              (hard_link != nullptr ? "hard" : "symbolic") + " link to " +
                              (hard_link != nullptr ? hard_link : symlink) +
                              " in the tar, not a file: its bytes are not there to keep";
      }
      pending_->members.push_back(Member{extension, {}});
      archive_read_data_skip(archive_);
      return;
    }
    if (pending_->ambiguity.empty() && Find(extension) != nullptr) {
      pending_->ambiguity = "it has two members named " + name +
                            " (or with that suffix): which one is meant cannot be told";
    }
    Member member{extension, {}};
    const la_int64_t size = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : -1;
    // Members of fields --fields / --drop-fields leave out are skipped, never read. A member too
    // large to read rejects its sample.
    const auto among = [&](const std::vector<std::string>& list) {
      return std::ranges::find(list, extension) != list.end();
    };
    const bool wanted = extension == "json" || among(image_extensions_) ||
                        among(label_extensions_) || options_.KeepsField(FieldName(extension));
    if (!wanted || size > kMaxMemberBytes) {
      if (archive_read_data_skip(archive_) != ARCHIVE_OK) {
        FailArchive("truncated or damaged member", offset, name);
        return;
      }
      if (wanted) member.refused_size = size;
      pending_->members.push_back(std::move(member));
      return;
    }
    if (!CopyMemberBytes(entry, size, offset, name, member)) return;
    pending_->members.push_back(std::move(member));
  }

  Member* Find(std::string_view extension) {
    for (Member& member : pending_->members) {
      if (member.extension == extension) return &member;
    }
    return nullptr;
  }

  // The member a record needs, or why it cannot have it.
  Result<Member*> FindReadable(std::string_view extension) {
    Member* member = Find(extension);
    if (member != nullptr && member->refused_size > 0) {
      return Status::InvalidInput("its " + member->extension + " member is " +
                                  std::to_string(member->refused_size) +
                                  " bytes, over the 2 GiB a member may have");
    }
    return member;
  }

  void Flush() {
    if (!pending_) return;
    SourceRecord record;
    record.origin = files_[file_index_].string() + " sample " + std::to_string(pending_->number) +
                    " (" + pending_->key + ") at byte " + std::to_string(pending_->offset);
    record.status = Assemble(record);
    pending_.reset();
    ready_.push_back(std::move(record));
  }

  Status Assemble(SourceRecord& record) {
    if (!pending_->ambiguity.empty()) {
      record.key = pending_->key;
      return Status::InvalidInput(pending_->ambiguity);
    }
    Member* image = nullptr;
    for (const std::string& extension : image_extensions_) {
      PACKREC_ASSIGN_OR_RETURN(image, FindReadable(extension));
      if (image != nullptr) break;
    }
    record.key = pending_->key;
    if (image == nullptr) {
      std::string present;
      for (const Member& member : pending_->members) {
        present += (present.empty() ? "" : ", ") + member.extension;
      }
      return Status::InvalidInput("no image member (" +
                                  (options_.image_field.empty()
                                       ? std::string("jpg, jpeg, png, webp")
                                       : options_.image_field) +
                                  ") among its members: " + present);
    }
    record.key = pending_->key + "." + image->extension;
    PACKREC_ASSIGN_OR_RETURN(Member * json_member, FindReadable("json"));
    bool labelled = false;
    const Member* label_member = nullptr;
    for (const std::string& extension : label_extensions_) {
      PACKREC_ASSIGN_OR_RETURN(Member * member, FindReadable(extension));
      if (member != nullptr) {
        if (!ParseLabelText(AsText(member->bytes), &record.label)) {
          return Status::InvalidInput("its " + extension +
                                      " member is not a non-negative integer label");
        }
        labelled = true;
        label_member = member;
        break;
      }
    }
    if (json_member != nullptr && !defer_json_) {
      PACKREC_RETURN_IF_ERROR(ApplyJson(json_member->bytes, labelled, record));
    }
    record.bytes = std::move(image->bytes);
    std::optional<std::size_t> json_field;
    PACKREC_RETURN_IF_ERROR(KeepFields(record, image, label_member, json_field));
    if (json_member != nullptr && defer_json_) {
      // Parsed by FinishRecord, on a worker: where KeepFields stored it as a field, or as read.
      record.deferred.tag = kJsonDeferred | (labelled ? kLabelTaken : 0);
      if (json_field) {
        record.deferred.tag |= (*json_field + 1) << kJsonFieldShift;
      } else {
        record.deferred.bytes = std::move(json_member->bytes);
      }
    }
    return Status::OK();
  }

  // SourceRecord::Deferred::tag of a sample whose json member FinishRecord parses: these bits,
  // and above kJsonFieldShift the index + 1 of the field holding it (0: Deferred::bytes holds it).
  static constexpr std::uint64_t kJsonDeferred = 1;
  static constexpr std::uint64_t kLabelTaken = 2;  // a cls member gave the label
  static constexpr int kJsonFieldShift = 2;

  // Checks a sample's json member is JSON and takes from it the label (unless `labelled`), the
  // key and the class name, which packrec's own exports keep there. Thread-safe: FinishRecord
  // runs it on the workers.
  Status ApplyJson(std::span<const std::byte> bytes, bool labelled, SourceRecord& record) const {
    const std::array<std::string_view, 3> names = {json_names_[0], json_names_[1], json_names_[2]};
    const std::string_view text = AsText(bytes);
    // simdjson's reading, unless it refuses the document or the label is to be read from it
    // (nlohmann tells a "-0" from a 0, as the label's rule needs): nlohmann's rules hold.
    std::optional<JsonMembers> members = ReadJsonMembers(text, names);
    JsonPicker picker(names);
    if (!members || (!labelled && members->present[0])) {
      if (!nlohmann::json::sax_parse(text.begin(), text.end(), &picker)) {
        return Status::InvalidInput("its json member is not valid JSON");
      }
      members = picker.Members();
    }
    // Only an object can hold a label, key or class name; any JSON is kept as a field.
    if (!members->is_object) {
      return options_.wds_json_is_metadata
                 ? Status::InvalidInput("its json member is not a JSON object")
                 : Status::OK();
    }
    // Found only where nlohmann read the document, which it did when the label is wanted.
    if (const nlohmann::json* label = picker.Find(names[0]); !labelled && label != nullptr) {
      if (!label->is_number_unsigned() || label->get<std::uint64_t>() > UINT32_MAX) {
        return Status::InvalidInput("json[\"" + json_names_[0] +
                                    "\"] is not a non-negative integer label");
      }
      record.label = label->get<std::uint32_t>();
    }
    if (members->strings[1]) record.key = std::move(*members->strings[1]);
    if (members->strings[2]) {
      std::lock_guard lock(class_names_mutex_);
      class_names_.Note(record.label, *members->strings[2]);
    }
    return Status::OK();
  }

  // The field a member of suffix `extension` is stored as: the suffix itself, unless that names
  // a part every record has (image, label, key).
  static std::string FieldName(const std::string& extension) {
    return extension == "image" || extension == "label" || extension == "key" ? "wds_" + extension
                                                                              : extension;
  }

  // Every member beside the image and the label becomes a field named by its suffix (FieldName),
  // typed by its last part: txt text (when the first one is UTF-8), json JSON, npy an int64 or
  // float32 array (when the first one is such a plain array), anything else bytes.
  // `json_field`: where the json member is stored as it was read, when it is.
  Status KeepFields(SourceRecord& record, const Member* image, const Member* label,
                    std::optional<std::size_t>& json_field) {
    for (Member& member : pending_->members) {
      if (&member == image || &member == label) continue;
      if (member.extension == "json" && options_.wds_json_is_metadata) continue;
      const FieldSpec* exported = ExportedField(member.extension);
      const std::string name = exported != nullptr ? exported->name : FieldName(member.extension);
      if (!options_.KeepsField(name)) continue;
      if (member.extension.empty()) {
        return Status::InvalidInput(
            "a member has no suffix (WebDataset names them KEY.SUFFIX), "
            "so no field can hold it");
      }
      if (member.refused_size > 0) {
        return Status::InvalidInput("its " + member.extension + " member is " +
                                    std::to_string(member.refused_size) +
                                    " bytes, over the 2 GiB a member may have");
      }
      FieldSpec spec{name, FieldType::kBytes, member.extension, {}};
      std::vector<std::byte> value = std::move(member.bytes);
      bool checked = false;
      if (exported != nullptr) {
        spec = *exported;
        if (IsNumericField(spec.type) && !NpyOfField(spec, value)) {
          return Status::InvalidInput("its " + member.extension + " member is not a .npy array " +
                                      "of field '" + spec.name + "' (" +
                                      std::string(FieldTypeName(spec.type)) + ")");
        }
        PACKREC_RETURN_IF_ERROR(
            schema_.Set(record, spec, std::move(value), "member " + member.extension));
        if (member.extension == "json" && !IsNumericField(spec.type)) {
          json_field = schema_.IndexOf(spec.name);
        }
        continue;
      }
      const std::string_view kind = LastPart(member.extension);
      const FieldSpec* known = schema_.Find(name);
      if (kind == "txt") {
        const bool text =
            known != nullptr ? known->type == FieldType::kText : IsValidUtf8(AsText(value));
        if (text) spec.type = FieldType::kText;
      } else if (kind == "json") {
        spec.type = FieldType::kJson;
        checked = member.extension == "json";  // parsed for its label and key already
      } else if (kind == "npy") {
        if (!NpyField(spec, value, known)) {
          if (known != nullptr && known->type != FieldType::kBytes) {
            return Status::InvalidInput("its " + member.extension + " member is not a " +
                                        std::string(FieldTypeName(known->type)) +
                                        " array of the field's shape, as the first sample's was");
          }
        }
      }
      PACKREC_RETURN_IF_ERROR(
          schema_.Set(record, spec, std::move(value), "member " + member.extension, checked));
      if (member.extension == "json") json_field = schema_.IndexOf(spec.name);
    }
    return Status::OK();
  }

  // The field of a packrec export's schema (SourceOptions::known_fields) whose member has this
  // suffix: its own, or with .npy after it for an array (as the wds export writes them).
  const FieldSpec* ExportedField(const std::string& extension) const {
    for (const FieldSpec& spec : options_.known_fields) {
      if (extension == FieldFileSuffix(spec) || extension == MemberSuffix(spec)) return &spec;
    }
    return nullptr;
  }

  // Replaces a .npy member by its elements when it is an array of `spec`'s type and inner shape.
  static bool NpyOfField(const FieldSpec& spec, std::vector<std::byte>& value) {
    const std::optional<NpyArray> array = ParseNpy(value);
    if (!array || array->type != spec.type) return false;
    if (array->shape.size() != spec.inner_shape.size() + 1) return false;
    for (std::size_t d = 0; d < spec.inner_shape.size(); ++d) {
      if (array->shape[d + 1] != spec.inner_shape[d]) return false;
    }
    value = std::vector<std::byte>(array->data.begin(), array->data.end());
    return true;
  }

  static std::string_view LastPart(std::string_view extension) {
    const std::size_t dot = extension.rfind('.');
    return dot == std::string_view::npos ? extension : extension.substr(dot + 1);
  }

  // Makes `spec` the array field of a plain .npy member (its value the array's elements), with
  // its inner shape (the extents after the first); false, leaving both alone, for anything else
  // or when the field is bytes already.
  static bool NpyField(FieldSpec& spec, std::vector<std::byte>& value, const FieldSpec* known) {
    if (known != nullptr && known->type == FieldType::kBytes) return false;
    const std::optional<NpyArray> array = ParseNpy(value);
    if (!array) return false;
    std::vector<std::uint32_t> inner;
    for (std::size_t d = 1; d < array->shape.size(); ++d) {
      if (array->shape[d] == 0 || array->shape[d] > UINT32_MAX) return false;
      inner.push_back(static_cast<std::uint32_t>(array->shape[d]));
    }
    spec.type = array->type;
    spec.inner_shape = std::move(inner);
    value = std::vector<std::byte>(array->data.begin(), array->data.end());
    return true;
  }

  SourceOptions options_;
  archive* archive_ = nullptr;
  std::unique_ptr<RandomAccessFile> file_;  // the tar read now
  std::uint64_t file_size_ = 0;
  std::uint64_t read_position_ = 0;  // the next read starts here
  bool read_failed_ = false;         // a read of this tar failed (not a tar's damage)
  static constexpr std::uint64_t kReadBufferBytes = 1 << 20;
  std::vector<std::byte> read_buffer_;  // grown to the largest tar read, up to kReadBufferBytes
  ReadAhead read_ahead_;
  std::uint64_t samples_in_file_ = 0;
  // Each key seen in the current tar, with the byte its first sample starts at.
  std::unordered_map<std::string, std::uint64_t> keys_in_file_;
  // The keys of every tar read before the current one (RememberKeysOfFile), sorted.
  std::vector<std::uint64_t> keys_of_earlier_files_;
  std::optional<Sample> pending_;
  std::deque<SourceRecord> ready_;
  mutable std::mutex class_names_mutex_;  // FinishRecord notes names on the workers
  mutable ClassNameCollector class_names_;
  bool defer_json_ = false;  // DeferChecks: FinishRecord parses the json member
  GrowingSchema schema_;     // the fields met so far
  // The members a record is made from (and json): the image is the first of image_extensions_
  // present, the label the first of label_extensions_.
  std::vector<std::string> image_extensions_ = {"jpg", "jpeg", "png", "webp"};
  std::vector<std::string> label_extensions_ = {"cls", "cls.txt"};
  // What a sample's json member is read for: its label, key and class name (ApplyJson).
  std::array<std::string, 3> json_names_ = {"label", "key", "class"};
};

}  // namespace

Result<std::unique_ptr<RecordSource>> OpenWdsSource(std::vector<fs::path> files,
                                                    const SourceOptions& options) {
  return std::unique_ptr<RecordSource>(new WdsSource(std::move(files), options));
}

}  // namespace packrec::wds
