// packrec.open: a Reader as a Python sequence of (bytes, label, key).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>

#include <mutex>
#include <string>
#include <vector>

#include "bindings.h"
#include "packrec/dataset_ops.h"
#include "packrec/reader.h"

namespace packrec::python {
namespace {

// Keys are the source's relative paths: usually UTF-8, but a filesystem may hold any bytes, which
// come back as surrogate escapes like os.fsdecode's.
py::str KeyToStr(std::string_view key) {
  PyObject* text =
      PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), "surrogateescape");
  if (text == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(text);
}

// A field's value as Python has it: str (text), the parsed object or str (json), bytes, a numpy
// array of shape (N, *inner_shape) (numbers); None when the record lacks it. The readers check a
// value against its declared type before handing it out; what Python still refuses (text that
// is not UTF-8, JSON nested deeper than Python recurses, numbers that are not whole elements) is
// a packrec CorruptionError naming `where` and the record, never a bare ValueError, a
// RecursionError or an array filled past its end.
py::object FieldToPython(const FieldSpec& spec, const FieldView& value, bool parse_json,
                         const std::string& where, std::uint64_t index) {
  if (!value.present) return py::none();
  const auto* data = reinterpret_cast<const char*>(value.bytes.data());
  const std::size_t size = value.bytes.size();
  const auto refused = [&](const std::string& why) {
    return Status::Corruption(where + ": record " + std::to_string(index) + ", field '" +
                              spec.name + "': " + why)
        .WithRecordIndex(index)
        .WithPath(where);
  };
  if (spec.type == FieldType::kText || spec.type == FieldType::kJson) {
    py::object text;
    try {
      text = py::str(data, size);
      if (spec.type == FieldType::kJson && parse_json) {
        return py::module_::import("json").attr("loads")(text);
      }
    } catch (py::error_already_set& error) {
      ThrowStatus(refused(std::string("Python cannot read it as ") +
                          std::string(FieldTypeName(spec.type)) + " (" + error.what() + ")"));
    }
    return text;
  }
  if (spec.type == FieldType::kBytes) return py::bytes(data, size);
  const std::size_t item = spec.type == FieldType::kInt64 ? 8 : 4;
  std::size_t inner = 1;
  for (const std::uint32_t extent : spec.inner_shape) inner *= extent;
  if (size % (item * inner) != 0) {
    ThrowStatus(refused(std::to_string(size) + " bytes is not a whole number of " +
                        std::string(FieldTypeName(spec.type)) + " elements"));
  }
  std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(size / item / inner)};
  for (const std::uint32_t extent : spec.inner_shape) shape.push_back(extent);
  py::array array = spec.type == FieldType::kInt64 ? py::array(py::dtype::of<std::int64_t>(), shape)
                                                   : py::array(py::dtype::of<float>(), shape);
  if (size > 0) std::memcpy(array.mutable_data(), data, size);  // stored little-endian
  return array;
}

py::dict FieldSpecToPython(const FieldSpec& spec) {
  py::dict out;
  out["name"] = spec.name;
  out["type"] = std::string(FieldTypeName(spec.type));
  out["suffix"] = spec.suffix;
  out["shape"] = spec.inner_shape;
  return out;
}

// What packrec.open takes for datasets at URLs (packrec/reader.h RemoteOptions); zero or empty:
// the default (or the PACKREC_* variable). Pickled with the dataset, so DataLoader workers share
// the parent's cache.
struct RemoteSettings {
  std::string cache_dir;
  std::uint64_t cache_size_bytes = 0;
  double timeout_seconds = 0;

  static RemoteSettings FromState(const py::tuple& state, std::size_t first) {
    RemoteSettings settings;
    if (state.size() >= first + 3) {
      settings.cache_dir = state[first].cast<std::string>();
      settings.cache_size_bytes = state[first + 1].cast<std::uint64_t>();
      settings.timeout_seconds = state[first + 2].cast<double>();
    }
    return settings;
  }
};

class Dataset {
 public:
  Dataset(std::string path, bool verify_checksums, RemoteSettings remote = {})
      : Dataset(std::vector{path}, verify_checksums, std::move(remote)) {}

  // Several paths: the datasets concatenated (ConcatenateDatasets), in this order.
  Dataset(std::vector<std::string> paths, bool verify_checksums, RemoteSettings remote = {})
      : paths_(std::move(paths)), verify_checksums_(verify_checksums), remote_(std::move(remote)) {
    if (paths_.empty()) ThrowStatus(Status::InvalidArgument("open: no dataset path given"));
    OpenOptions options;
    options.verify_checksums = verify_checksums;
    options.remote.cache_dir = remote_.cache_dir;
    if (remote_.cache_size_bytes > 0) options.remote.cache_size_bytes = remote_.cache_size_bytes;
    if (remote_.timeout_seconds > 0) options.remote.timeout_seconds = remote_.timeout_seconds;
    std::vector<std::shared_ptr<const Reader>> parts;
    for (const std::string& path : paths_) {
      Result<std::unique_ptr<Reader>> opened = [&] {
        ReleasedGil release;
        return OpenDataset(path, options);
      }();
      parts.push_back(ValueOrThrow(std::move(opened)));
      part_sizes_.push_back(parts.back()->size());
      path_ += (path_.empty() ? "" : " + ") + path;
    }
    reader_ =
        parts.size() == 1
            ? std::move(parts.front())
            : std::shared_ptr<const Reader>(ValueOrThrow(ConcatenateDatasets(std::move(parts))));
  }

  std::uint64_t size() const { return reader_->size(); }
  // The path; for a concatenation, the paths joined by " + " (`paths` has them apart).
  const std::string& path() const { return path_; }
  const std::vector<std::string>& paths() const { return paths_; }
  const std::vector<std::uint64_t>& part_sizes() const { return part_sizes_; }
  bool verify_checksums() const { return verify_checksums_; }
  const RemoteSettings& remote() const { return remote_; }
  const std::shared_ptr<const Reader>& reader() const { return reader_; }

  // (bytes, label, key) of record `index` (negative counts from the end, as in a list).
  // With fields, a packrec.Record: still that tuple, with each field by name and as an attribute.
  py::object Get(std::int64_t index) const {
    const std::uint64_t at = Resolve(index);
    if (!reader_->info().fields.empty()) {
      py::dict sample = Sample(static_cast<std::int64_t>(at));
      py::tuple values = py::make_tuple(sample["image"], sample["label"], sample["key"]);
      py::dict fields;
      for (const FieldSpec& spec : reader_->info().fields) {
        fields[py::str(spec.name)] = sample[py::str(spec.name)];
      }
      return py::module_::import("packrec").attr("Record")(values, fields);
    }
    return Item(static_cast<std::int64_t>(at));
  }

  // (bytes, label, key) of record `index`, whether or not the dataset has fields: what
  // packrec.torch.Dataset reads per item when its target is the label, without converting every
  // field to Python objects.
  py::tuple Item(std::int64_t index) const {
    Record record = ReadCopy(Resolve(index));
    return py::make_tuple(Bytes(record.bytes), record.label, KeyToStr(record.key));
  }

  // Record `index` whole: image bytes, label, key and every field, by name.
  py::dict Sample(std::int64_t index) const {
    const std::uint64_t at = Resolve(index);
    ReadScratch scratch;
    Result<RecordView> view = [&] {
      ReleasedGil release;
      return reader_->Read(at, scratch);
    }();
    if (!view.ok()) ThrowStatus(view.status().WithContext(path_));
    py::dict out;
    out["image"] = py::bytes(reinterpret_cast<const char*>(view->bytes.data()), view->bytes.size());
    out["label"] = view->label;
    out["key"] = KeyToStr(view->key);
    const std::vector<FieldSpec>& fields = reader_->info().fields;
    for (std::size_t f = 0; f < fields.size(); ++f) {
      const FieldView value = f < view->fields.size() ? view->fields[f] : FieldView{};
      out[py::str(fields[f].name)] =
          FieldToPython(fields[f], value, /*parse_json=*/true, path_, at);
    }
    return out;
  }

  // Every record's label, from the index where the format keeps one (no image bytes read).
  py::array_t<std::int64_t> Labels() const {
    Result<std::vector<std::uint32_t>> labels = [&] {
      ReleasedGil release;
      return reader_->ReadLabels();
    }();
    if (!labels.ok()) ThrowStatus(labels.status().WithContext(path_));
    py::array_t<std::int64_t> out(static_cast<py::ssize_t>(labels->size()));
    std::int64_t* data = out.mutable_data();
    for (std::size_t i = 0; i < labels->size(); ++i) data[i] = (*labels)[i];
    return out;
  }

  // One field of every record (projection: no image bytes read on shard datasets): a list with
  // one value per record, None where a record lacks it; JSON as text (json.loads it as needed).
  py::list Field(const std::string& name) const {
    const std::vector<FieldSpec>& fields = reader_->info().fields;
    std::size_t field = 0;
    while (field < fields.size() && fields[field].name != name) ++field;
    if (field == fields.size()) {
      std::string known;
      for (const FieldSpec& spec : fields) known += (known.empty() ? "" : ", ") + spec.name;
      throw py::key_error("no field '" + name + "' in " + path_ +
                          " (its fields: " + (known.empty() ? std::string("none") : known) + ")");
    }
    py::list out;
    ReadScratch scratch;
    for (std::uint64_t i = 0; i < reader_->size(); ++i) {
      // Without the GIL: over a URL each read waits on the network.
      Result<FieldView> value = [&] {
        ReleasedGil release;
        return reader_->ReadField(i, field, scratch);
      }();
      if (!value.ok()) ThrowStatus(value.status().WithContext(path_));
      out.append(FieldToPython(fields[field], *value, /*parse_json=*/false, path_, i));
    }
    return out;
  }

  py::list Fields() const {
    py::list out;
    for (const FieldSpec& spec : reader_->info().fields) out.append(FieldSpecToPython(spec));
    return out;
  }

  // Everything a reader knows of record `index`, without decoding it.
  py::dict Describe(std::int64_t index) const {
    const std::uint64_t at = Resolve(index);
    Record record = ReadCopy(at);
    py::dict out;
    out["index"] = at;
    out["key"] = KeyToStr(record.key);
    out["label"] = record.label;
    out["size"] = record.bytes.size();
    out["width"] = record.width;
    out["height"] = record.height;
    out["channels"] = record.channels;
    out["encoding"] = std::string(EncodingName(record.encoding));
    return out;
  }

  py::dict Info() const {
    const DatasetInfo& info = reader_->info();
    py::dict out;
    out["path"] = path_;
    out["format"] = info.format;
    out["format_version"] = info.format_version;
    out["record_count"] = info.record_count;
    out["rejected_count"] = info.rejected_count;
    out["classes"] = info.classes;
    out["label_count"] = info.label_count;
    out["listing_hash"] = info.listing_hash;
    out["source_kind"] = info.source_kind;
    out["payload_bytes"] = info.payload_bytes;
    py::list files;
    for (const DatasetFileInfo& file : info.files) {
      py::dict entry;
      entry["file"] = file.file;
      entry["first_record"] = file.first_record;
      entry["record_count"] = file.record_count;
      entry["size_bytes"] = file.size_bytes;
      files.append(entry);
    }
    out["files"] = files;
    out["options"] = py::module_::import("json").attr("loads")(info.options_json);
    out["created_by"] = info.created_by;
    out["fields"] = Fields();
    return out;
  }

  // Every checksum (and with `deep`, every decode); the problems as dicts, none raised.
  py::dict Verify(bool deep) const {
    Collector collector;
    VerifyStats stats;
    {
      ReleasedGil release;
      stats = VerifyDataset(*reader_, VerifyOptions{deep}, collector);
    }
    py::list problems;
    for (const VerifyProblem& problem : collector.problems) {
      py::dict entry;
      entry["file"] = MessageToStr(problem.file);
      entry["record_index"] = problem.record_index ? py::cast(*problem.record_index) : py::none();
      entry["key"] = KeyToStr(problem.key);
      entry["byte_offset"] = problem.byte_offset ? py::cast(*problem.byte_offset) : py::none();
      entry["code"] = std::string(StatusCodeName(problem.status.code()));
      entry["message"] = MessageToStr(problem.status.message());
      problems.append(entry);
    }
    py::dict out;
    out["ok"] = stats.problems == 0;
    out["records_checked"] = stats.records_checked;
    out["bytes_checked"] = stats.bytes_checked;
    out["problems"] = problems;
    return out;
  }

 private:
  struct Record {
    std::vector<std::byte> bytes;
    std::string key;
    std::uint32_t label = 0;
    std::uint32_t width = 0;
    std::uint32_t height = 0;
    std::uint8_t channels = 0;
    Encoding encoding = Encoding::kUnknown;
  };

  struct Collector final : VerifyReporter {
    std::mutex mutex;
    std::vector<VerifyProblem> problems;
    void Report(const VerifyProblem& problem) override {
      std::lock_guard lock(mutex);
      problems.push_back(problem);
    }
  };

  std::uint64_t Resolve(std::int64_t index) const {
    const auto count = static_cast<std::int64_t>(reader_->size());
    const std::int64_t at = index < 0 ? index + count : index;
    if (at < 0 || at >= count) {
      ThrowStatus(Status::OutOfRange("record " + std::to_string(index) + " of " + path_ +
                                     ", which holds " + std::to_string(count) + " records")
                      .WithRecordIndex(static_cast<std::uint64_t>(std::max<std::int64_t>(index, 0)))
                      .WithPath(path_));
    }
    return static_cast<std::uint64_t>(at);
  }

  // Copies while the GIL is released: the first touch of a mapped record is where a cold read
  // waits for the disk, and other Python threads should run meanwhile.
  Record ReadCopy(std::uint64_t index) const {
    Record record;
    Status status;
    {
      ReleasedGil release;
      ReadScratch scratch;
      Result<RecordView> view = reader_->Read(index, scratch);
      if (view.ok()) {
        record.bytes.assign(view->bytes.begin(), view->bytes.end());
        record.key = view->key;
        record.label = view->label;
        record.width = view->width;
        record.height = view->height;
        record.channels = view->channels;
        record.encoding = view->encoding;
      } else {
        status = view.status();
      }
    }
    if (!status.ok()) ThrowStatus(status.WithContext(path_));
    return record;
  }

  static py::bytes Bytes(const std::vector<std::byte>& bytes) {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }

  std::vector<std::string> paths_;
  std::vector<std::uint64_t> part_sizes_;  // each path's records, in order
  std::string path_;
  bool verify_checksums_ = true;
  RemoteSettings remote_;
  std::shared_ptr<const Reader> reader_;
};

}  // namespace

std::shared_ptr<const Reader> ReaderOf(const py::object& dataset) {
  return dataset.cast<const Dataset&>().reader();
}

namespace {

using DatasetClass = py::class_<Dataset>;

// Opening and reading records: the sequence protocol, samples, fields, labels.
void AddReadMethods(DatasetClass& cls) {
  cls.def(py::init([](std::vector<std::string> paths, bool verify_checksums, std::string cache_dir,
                      std::uint64_t cache_size_bytes, double timeout_seconds) {
            return Dataset(std::move(paths), verify_checksums,
                           {std::move(cache_dir), cache_size_bytes, timeout_seconds});
          }),
          py::arg("paths"), py::arg("verify_checksums") = true, py::arg("cache_dir") = "",
          py::arg("cache_size_bytes") = 0, py::arg("timeout_seconds") = 0.0)
      .def(py::init<std::string, bool>(), py::arg("path"), py::arg("verify_checksums") = true)
      .def("__len__", &Dataset::size)
      .def("__getitem__", &Dataset::Get, py::arg("index"),
           "(encoded image bytes, label, key) of record `index` (the bytes a copy, owned by "
           "Python); with fields, a packrec.Record (that tuple, with each field as rec['name'] "
           "and rec.name)")
      .def(
          "__getitem__",
          [](const Dataset& dataset, const py::slice& slice) {
            std::size_t start = 0, stop = 0, step = 0, length = 0;
            if (!slice.compute(dataset.size(), &start, &stop, &step, &length)) {
              throw py::error_already_set();
            }
            py::list records;
            for (std::size_t i = 0; i < length; ++i) {
              records.append(dataset.Get(static_cast<std::int64_t>(start + i * step)));
            }
            return records;
          },
          py::arg("index"), "ds[a:b:c]: a list of the records, as a list's slice")
      .def("__repr__",
           [](const Dataset& dataset) {
             const DatasetInfo& info = dataset.reader()->info();
             std::string fields;
             for (const FieldSpec& field : info.fields) {
               fields += (fields.empty() ? "" : ", ") + field.name;
             }
             return "packrec.Dataset(" + py::repr(py::str(dataset.path())).cast<std::string>() +
                    ", format='" + info.format + "', records=" + std::to_string(info.record_count) +
                    ", classes=" + std::to_string(info.classes.size()) +
                    (fields.empty() ? "" : ", fields=[" + fields + "]") + ")";
           })
      .def("_item", &Dataset::Item, py::arg("index"),
           "(encoded image bytes, label, key) of record `index`, without its fields")
      .def("sample", &Dataset::Sample, py::arg("index"),
           "Record `index` whole, as a dict: image (bytes), label, key and each field by name "
           "(text: str, json: parsed, bytes: bytes, numbers: numpy array of shape (N, *shape); "
           "None where the record lacks it)")
      .def("field", &Dataset::Field, py::arg("name"),
           "Field `name` of every record, as a list (None where absent; json as text), read "
           "without touching image bytes on shard datasets")
      .def_property_readonly("labels", &Dataset::Labels,
                             "Every record's label as an int64 numpy array, read from the index "
                             "(no image bytes) on shard datasets")
      .def_property_readonly("fields", &Dataset::Fields,
                             "The schema: one dict (name, type, suffix, shape) per field");
}

// What the dataset is: its records' places, manifest, remote counters, verify, pickling.
void AddDescriptions(DatasetClass& cls) {
  cls.def("record", &Dataset::Describe, py::arg("index"),
          "Record `index`'s key, label, stored size, width, height, channels and encoding")
      .def("info", &Dataset::Info, "The manifest: format, classes, files, convert options, ...")
      .def(
          "remote_stats",
          [](const Dataset& dataset) {
            const Reader::RemoteStats stats = dataset.reader()->remote_stats();
            py::dict out;
            out["requests"] = stats.requests;
            out["retries"] = stats.retries;
            out["bytes"] = stats.bytes;
            out["cache_hits"] = stats.cache_hits;
            out["cache_fills"] = stats.cache_fills;
            out["cache_evictions"] = stats.cache_evictions;
            return out;
          },
          "A dataset at a URL: requests sent (retries included), retries, bytes received, and "
          "through a cache its block hits, fills and evictions so far, in this process")
      .def("verify", &Dataset::Verify, py::arg("deep") = false,
           "Checks every checksum (deep: decodes every image too); returns the problems found")
      .def_property_readonly("path", &Dataset::path)
      .def_property_readonly("paths", &Dataset::paths,
                             "The datasets read, in order (one, or the parts of a concatenation)")
      .def_property_readonly("part_sizes", &Dataset::part_sizes,
                             "Records of each of `paths`: part k's records start after the "
                             "previous parts'")
      .def_property_readonly(
          "format", [](const Dataset& dataset) { return dataset.reader()->info().format; },
          "shard, lmdb or hdf5")
      .def_property_readonly(
          "classes", [](const Dataset& dataset) { return dataset.reader()->info().classes; },
          "Class names: label i is classes[i] (empty for list-file inputs)")
      .def_property_readonly("verify_checksums", &Dataset::verify_checksums)
      .def(py::pickle(
          // A dataset pickles as its path: spawned DataLoader workers reopen it themselves.
          [](const Dataset& dataset) {
            const RemoteSettings& remote = dataset.remote();
            return py::make_tuple(dataset.paths(), dataset.verify_checksums(), remote.cache_dir,
                                  remote.cache_size_bytes, remote.timeout_seconds);
          },
          [](const py::tuple& state) {
            if (py::isinstance<py::str>(state[0])) {  // pickled by an earlier packrec
              return Dataset(state[0].cast<std::string>(), state[1].cast<bool>());
            }
            return Dataset(state[0].cast<std::vector<std::string>>(), state[1].cast<bool>(),
                           RemoteSettings::FromState(state, 2));
          }));
  ;
}

}  // namespace

void BindDataset(py::module_& module) {
  DatasetClass cls(module, "Dataset",
                   "A packrec dataset (shard, LMDB or HDF5) as a sequence of "
                   "(bytes, label, key); open it with packrec.open");
  AddReadMethods(cls);
  AddDescriptions(cls);
}

}  // namespace packrec::python
