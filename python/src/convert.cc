// packrec.convert: Convert with the GIL released, and a progress callback that may stop it.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "bindings.h"
#include "packrec/convert.h"
#include "packrec/merge.h"
#include "packrec/source.h"

namespace packrec::python {
namespace {

struct ConvertArguments {
  std::string source;
  std::string output;
  std::string format;
  std::uint64_t shard_size;
  std::uint32_t align;
  std::string compression;  // as ParseCompression takes it: none, zstd[:LEVEL], deflate[:LEVEL]
  unsigned threads;
  std::optional<std::uint64_t> shuffle_seed;
  std::string on_error;     // fail | skip
  std::string list_format;  // auto | caffe | mxnet
  std::string list_root;
  std::uint32_t resize_short;
  int quality;
  bool overwrite;
  bool resume;
  std::string lmdb_values;  // packrec | caffe-datum
  std::uint64_t map_size;
  std::string hdf5_layout;                                            // encoded | pixels
  std::optional<std::pair<std::uint32_t, std::uint32_t>> pixel_size;  // (height, width)
  std::optional<std::pair<std::uint32_t, std::uint32_t>> part;        // (index, count)
  // Imports: from, image_field, label_field, key_field, caffe_raw, fields, drop_fields,
  // annotations (names checked in Python).
  std::map<std::string, std::string> import_options;
};

// Option names are checked in Python (packrec/__init__.py); the library checks the values.
ConvertOptions ToOptions(const ConvertArguments& args) {
  ConvertOptions options;
  options.source = args.source;
  options.output = args.output;
  options.writer.format = args.format;
  options.writer.shard_size_bytes = args.shard_size;
  options.writer.shard.align_bytes = args.align;
  const CompressionSetting compression = ValueOrThrow(ParseCompression(args.compression));
  options.writer.compression = compression.codec;
  options.writer.compression_level = compression.level;
  options.writer.overwrite = args.overwrite;
  options.resume = args.resume;
  options.writer.lmdb.map_size_bytes = args.map_size;
  options.writer.lmdb.values =
      args.lmdb_values == "caffe-datum" ? LmdbValues::kCaffeDatum : LmdbValues::kPackrec;
  options.writer.hdf5.layout =
      args.hdf5_layout == "pixels" ? Hdf5Layout::kPixels : Hdf5Layout::kEncoded;
  if (args.pixel_size) {
    options.writer.hdf5.pixel_height = args.pixel_size->first;
    options.writer.hdf5.pixel_width = args.pixel_size->second;
  }
  options.threads = args.threads;
  const auto import_option = [&](const char* name) {
    const auto it = args.import_options.find(name);
    return it == args.import_options.end() ? std::string() : it->second;
  };
  if (const std::string from = import_option("from"); !from.empty()) {
    Result<SourceFormat> format = ParseSourceFormat(from);
    if (format.ok()) options.from = *format;
  }
  options.source_options.image_field = import_option("image_field");
  options.source_options.label_field = import_option("label_field");
  options.source_options.key_field = import_option("key_field");
  options.source_options.raw_pixels =
      import_option("caffe_raw") == "raw" ? RawPixels::kRaw : RawPixels::kPng;
  // Lists travel comma-joined, as the CLI takes them.
  const auto names = [](const std::string& joined) {
    std::vector<std::string> list;
    std::size_t start = 0;
    while (start < joined.size()) {
      const std::size_t comma = std::min(joined.find(',', start), joined.size());
      list.push_back(joined.substr(start, comma - start));
      start = comma + 1;
    }
    return list;
  };
  options.source_options.keep_fields = names(import_option("fields"));
  options.source_options.drop_fields = names(import_option("drop_fields"));
  options.annotations = import_option("annotations");
  options.shuffle_seed = args.shuffle_seed;
  options.on_error = args.on_error == "skip" ? OnBadRecord::kSkip : OnBadRecord::kFail;
  options.list_kind = args.list_format == "caffe"   ? ListFileKind::kCaffe
                      : args.list_format == "mxnet" ? ListFileKind::kMxnet
                                                    : ListFileKind::kAuto;
  options.list_root = args.list_root;
  options.resize_short = args.resize_short;
  options.quality = args.quality;
  if (args.part) {
    options.part_index = args.part->first;
    options.part_count = args.part->second;
  }
  return options;
}

py::dict RunConvert(const ConvertArguments& args, const py::object& progress) {
  const ConvertOptions options = ToOptions(args);
  // Set when the callback raised (or Ctrl-C arrived): the conversion stops, removes its output,
  // and that exception is the one the caller sees.
  std::optional<py::error_already_set> raised;
  const ProgressCallback callback = [&](const ConvertProgress& report) -> Status {
    py::gil_scoped_acquire acquire;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (!progress.is_none()) {
        py::dict state;
        state["records_done"] = report.records_done;
        state["records_total"] = report.records_total;
        state["input_bytes"] = report.input_bytes;
        state["elapsed_seconds"] = report.elapsed_seconds;
        progress(state);
      }
    } catch (py::error_already_set& error) {
      raised.emplace(std::move(error));
      return Status::Internal("stopped by the progress callback");
    }
    return Status::OK();
  };
  Result<ConvertStats> stats = [&] {
    ReleasedGil release;
    return Convert(options, callback);
  }();
  if (raised) throw std::move(*raised);
  const ConvertStats done = ValueOrThrow(std::move(stats));
  py::dict out;
  out["records_written"] = done.records_written;
  out["input_bytes"] = done.input_bytes;
  out["output_bytes"] = done.output_bytes;
  py::list rejects;
  for (const Reject& reject : done.rejects)
    rejects.append(py::make_tuple(reject.path, reject.reason));
  out["rejects"] = rejects;
  out["empty_classes"] = done.empty_classes;
  out["elapsed_seconds"] = done.elapsed_seconds;
  out["already_complete"] = done.already_complete;
  out["resumed_records"] = done.resumed_records;
  if (args.part) out["part_path"] = done.part_path.string();
  return out;
}

}  // namespace

void BindConvert(py::module_& module) {
  module.def(
      "_convert",
      [](std::string source, std::string output, std::string format, std::uint64_t shard_size,
         std::uint32_t align, std::string compression, unsigned threads,
         std::optional<std::uint64_t> shuffle_seed, std::string on_error, std::string list_format,
         std::string list_root, std::uint32_t resize_short, int quality, bool overwrite,
         bool resume, std::string lmdb_values, std::uint64_t map_size, std::string hdf5_layout,
         std::optional<std::pair<std::uint32_t, std::uint32_t>> pixel_size,
         std::optional<std::pair<std::uint32_t, std::uint32_t>> part,
         std::map<std::string, std::string> import_options, const py::object& progress) {
        return RunConvert({std::move(source),
                           std::move(output),
                           std::move(format),
                           shard_size,
                           align,
                           std::move(compression),
                           threads,
                           shuffle_seed,
                           std::move(on_error),
                           std::move(list_format),
                           std::move(list_root),
                           resize_short,
                           quality,
                           overwrite,
                           resume,
                           std::move(lmdb_values),
                           map_size,
                           std::move(hdf5_layout),
                           pixel_size,
                           part,
                           std::move(import_options)},
                          progress);
      },
      "Use packrec.convert");
  module.def(
      "_merge",
      [](std::string output, std::vector<std::string> parts, bool overwrite, bool remove_parts) {
        MergeOptions options;
        options.overwrite = overwrite;
        options.remove_parts = remove_parts;
        const std::vector<std::filesystem::path> paths(parts.begin(), parts.end());
        Result<MergeStats> stats = [&] {
          ReleasedGil release;
          return MergeParts(paths, output, options);
        }();
        const MergeStats done = ValueOrThrow(std::move(stats));
        py::dict out;
        out["parts"] = done.parts;
        out["records"] = done.records;
        out["rejected"] = done.rejected;
        out["output_bytes"] = done.output_bytes;
        out["elapsed_seconds"] = done.elapsed_seconds;
        return out;
      },
      "Use packrec.merge");
}

}  // namespace packrec::python
