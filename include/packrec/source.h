// Record sources: the containers other tools write (WebDataset tars, TFRecords, RecordIO, MDS,
// Caffe LMDBs, packrec datasets), streamed record by record for `packrec convert` to import.
//
// Threading: one thread per source. Memory: a source holds at most one of its files' framing and
// one record (an MDS source one shard) at a time, so sources larger than memory stream through.
#ifndef PACKREC_SOURCE_H_
#define PACKREC_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "packrec/record.h"
#include "packrec/status.h"

namespace packrec {

enum class SourceFormat {
  kAuto,
  kImageFolder,  // root/<class>/.../<file>: a listing (ingest.h), not a RecordSource
  kListFile,     // Caffe or MXNet list file: a listing too
  kWebDataset,
  kTfRecord,
  kRecordIo,
  kMds,
  kCaffeLmdb,
  kPackrec,  // shard, LMDB or HDF5 written by packrec
};

// "auto", "folder", "list", "wds", "tfrecord", "recordio", "mds", "caffe-lmdb", "packrec".
std::string_view SourceFormatName(SourceFormat format);
Result<SourceFormat> ParseSourceFormat(std::string_view name);
// Every name ParseSourceFormat takes, in the order above (what --from and from_= offer).
std::vector<std::string> SourceFormatNames();

// Raw Caffe Datums (pixels, not an encoded image) become PNGs (lossless) or raw RGB records.
enum class RawPixels { kPng, kRaw };

struct SourceOptions {
  // Which fields a record keeps beside image, label and key (--fields, --drop-fields): when
  // keep_fields is non-empty, only those; never those in drop_fields. Names are the source's
  // (member suffixes, feature names, column names). Empty: every field the source holds.
  std::vector<std::string> keep_fields;
  std::vector<std::string> drop_fields;
  // Whether the field `name` is kept (sources skip reading what is not).
  bool KeepsField(std::string_view name) const {
    const auto listed = [&](const std::vector<std::string>& names) {
      for (const std::string& entry : names) {
        if (entry == name) return true;
      }
      return false;
    };
    return !listed(drop_fields) && (keep_fields.empty() || listed(keep_fields));
  }
  // Field or column names; empty picks the format's usual ones (docs/interop.md):
  // tfrecord: image/encoded, image/class/label, image/filename; mds: the first of image, img,
  // jpg, jpeg, png, x / label, cls, y, target / key, filename, __key__, id; wds: the image member
  // by extension (jpg jpeg png webp), the label from cls, cls.txt or json["label"].
  std::string image_field;
  std::string label_field;
  std::string key_field;
  RawPixels raw_pixels = RawPixels::kPng;
  // wds: the json member holds packrec's own per-sample metadata (key, label, class name), not a
  // field: set for the tars of a packrec export whose dataset had no json field (its
  // packrec-export.json says so). Otherwise json, like every member beside image and label, is
  // kept as a field (and read for a label, key and class name all the same).
  bool wds_json_is_metadata = false;
  // The source is a packrec export (packrec-export.json): what packrec writes beside each
  // record's fields (tfrecord: image/format, image/height, image/width, image/channels) is not
  // kept as fields unless known_fields names it.
  bool packrec_export = false;
  // The fields a packrec export's packrec-export.json lists: a member (wds) or feature
  // (tfrecord) whose suffix or name is one of theirs is read back as that field, with its name
  // and type. Empty: fields are named and typed by the source's own rules (docs/interop.md).
  std::vector<FieldSpec> known_fields;
  // The source asks the kernel to read its files ahead of where it reads (POSIX_FADV_WILLNEED,
  // 32 MiB at a time). Imports turn it off: their own prefetch thread reads further ahead, and
  // the same requests made again on the reading thread cost it time (docs/benchmarks.md).
  // Caffe LMDBs keep theirs: their pages need not lie in file order, as that thread assumes.
  bool read_ahead = true;
  // Files at URLs (OpenRecordSource sets it; callers leave it empty): called with the index of
  // the file the source is about to open, it returns the local copy to read, downloaded ahead
  // and removed once a later file is asked for; errors name the URL. Record origins and keys
  // still name the URL. Empty: the files are local paths, read where they are.
  std::function<Result<std::filesystem::path>(std::size_t file_index)> local_copy;
};

// One record of a source. A record the source could not read (bad CRC, truncated member, a
// protobuf that does not parse) comes back with `status` not OK and `origin` naming the file,
// byte offset and record number; the source goes on with the next record it can find.
struct SourceRecord {
  std::string key;
  std::uint32_t label = 0;
  std::vector<std::byte> bytes;
  // Sources that hand out decoded pixels (raw Caffe Datums with RawPixels::kRaw) describe them
  // here (Encoding::kRawRgb); for encoded images it stays kUnknown and convert probes the bytes.
  ImageInfo image;
  std::string origin;  // "FILE record N at byte B"
  Status status;
  // One value per field of the source's schema so far (nullopt: absent; fewer: the rest
  // absent), each one its field's type takes (ValidateFieldValue): the source checks them. The
  // schema so far is fields() as the source was opened, then every record's added_fields in the
  // order the records came.
  std::vector<std::optional<std::vector<std::byte>>> fields = {};
  // The fields the source met first in this record (a WebDataset member suffix, a tf.Example
  // feature no record before had), appended to its schema. A damaged record may carry some too.
  std::vector<FieldSpec> added_fields = {};
  // Values that name and type their field themselves (a tf.Example's features, parsed on several
  // threads by FinishRecord, where no order tells which record met a name first). The caller
  // places them into the source's schema in source order: a new name joins it, the first value
  // fixing its type. A value of another type rejects its record, except text where the field
  // is bytes (kept as bytes) and one text where it is a JSON list of strings (kept as a list of
  // one). A source uses these or `fields`, not both.
  std::vector<std::pair<FieldSpec, std::vector<std::byte>>> typed_fields = {};
  // What Next left for the source's own FinishRecord (RecordSource::DeferChecks), in the
  // source's terms; callers pass it along untouched. WebDataset: a sample's json member (bytes,
  // or where among `fields` it lies) and whether its label is taken already.
  struct Deferred {
    std::vector<std::byte> bytes;
    std::uint64_t tag = 0;
  };
  Deferred deferred = {};
};

class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // Fills `record` with the next record; false at the end. A damaged record, or a data file that
  // cannot be opened, comes back as a record whose status says so. An error: the source cannot go
  // on (an index or list file that cannot be read); everything before it was delivered.
  virtual Result<bool> Next(SourceRecord& record) = 0;
  // Label i is classes()[i] when the source carries class names (may grow while reading: a
  // WebDataset's names are known only once read); empty otherwise.
  virtual std::vector<std::string> classes() const = 0;
  virtual SourceFormat format() const = 0;
  // The files read, in order (what `cat` would read to get the same bytes).
  virtual const std::vector<std::filesystem::path>& files() const = 0;
  // Records in the source when the format says so up front (index files, MDS, LMDB); else 0.
  virtual std::uint64_t size_hint() const { return 0; }
  // The fields its records carry beside image and label, as far as the source knows them when
  // opened (MDS columns, a packrec dataset's schema); sources that meet them while reading
  // (WebDataset members, tf.Example features) announce them in SourceRecord::added_fields.
  virtual std::vector<FieldSpec> fields() const { return {}; }
  // How far the source has read into files(), as bytes of those files taken in order (a file
  // left behind counts whole), so a caller can keep the kernel reading ahead of it; skipped
  // bytes count too (a WebDataset member no record needs, an MDS column). 0 where the source
  // does not read its files in order (LMDB).
  virtual std::uint64_t bytes_read() const { return 0; }
  // A record's own checks and parsing (TFRecord's data CRC32C and tf.Example) need nothing from
  // the records before it, so a caller with threads to spare may take them off the thread that
  // calls Next: once DeferChecks() has returned true, Next hands out records only framed, and
  // FinishRecord (thread-safe, any number at once) must run on each before it is used. False,
  // the default, for sources with nothing worth deferring; Next then does everything.
  virtual bool DeferChecks() { return false; }
  virtual void FinishRecord(SourceRecord& /*record*/) const {}
};

// The files a spec names: a path, a glob (`train-*.tar`), or brace notation
// (`train-{000000..000127}.tar`, `{a,b}.tar`), sorted within each glob. NotFound when nothing
// matches or a named file is missing.
Result<std::vector<std::filesystem::path>> ExpandSourceSpec(const std::string& spec);

// What `spec` holds, from its names and first bytes: a packrec dataset, an MDS directory
// (index.json), an LMDB directory or file that is not packrec's (Caffe), .tar/.tar.gz/.tgz
// (WebDataset), .tfrecord/.tfrecords/.tfr, .rec, a directory (image folder), else a list file.
Result<SourceFormat> DetectSourceFormat(const std::string& spec);

// Opens a container source. InvalidArgument for kImageFolder/kListFile/kAuto (resolve first).
Result<std::unique_ptr<RecordSource>> OpenRecordSource(const std::string& spec, SourceFormat format,
                                                       const SourceOptions& options = {});

}  // namespace packrec

#endif  // PACKREC_SOURCE_H_
