#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "packrec/reader.h"

namespace packrec::cli {

namespace {

// What info --json prints.
nlohmann::json InfoJson(const std::string& path, const DatasetInfo& info,
                        std::uint64_t file_bytes) {
  nlohmann::json out;
  out["path"] = path;
  out["format"] = info.format;
  out["format_version"] = info.format_version;
  out["records"] = info.record_count;
  out["rejected"] = info.rejected_count;
  out["classes"] = info.classes;
  out["label_count"] = info.label_count;
  out["payload_bytes"] = info.payload_bytes;
  out["file_bytes"] = file_bytes;
  out["listing_hash"] = info.listing_hash;
  out["source_kind"] = info.source_kind;
  out["created_by"] = info.created_by;
  out["options"] = nlohmann::json::parse(info.options_json);
  nlohmann::json fields = nlohmann::json::array();
  for (std::size_t i = 0; i < info.fields.size(); ++i) {
    const FieldSpec& field = info.fields[i];
    fields.push_back({{"name", field.name},
                      {"type", FieldTypeName(field.type)},
                      {"suffix", field.suffix},
                      {"shape", field.inner_shape}});
    if (i < info.field_records.size()) fields.back()["records"] = info.field_records[i];
  }
  out["fields"] = std::move(fields);
  nlohmann::json files = nlohmann::json::array();
  for (const DatasetFileInfo& file : info.files) {
    files.push_back({{"file", file.file},
                     {"first_record", file.first_record},
                     {"records", file.record_count},
                     {"size_bytes", file.size_bytes}});
  }
  out["files"] = std::move(files);
  return out;
}

// What info prints for a person.
void PrintInfo(const std::string& path, const DatasetInfo& info, std::uint64_t file_bytes) {
  std::cout << "dataset   " << path << "\n"
            << "format    " << info.format << " (version " << info.format_version << "), "
            << info.created_by << "\n"
            << "records   " << info.record_count << " (" << info.rejected_count
            << " inputs rejected at convert time)\n"
            << "labels    " << info.label_count;
  if (!info.classes.empty()) {
    std::cout << " classes: ";
    for (std::size_t i = 0; i < info.classes.size() && i < 8; ++i) {
      std::cout << (i ? ", " : "") << info.classes[i];
    }
    if (info.classes.size() > 8) std::cout << ", ... " << info.classes.back();
  }
  std::cout << "\n";
  // One line per field: name (type[, shape][, .suffix]), and how many records hold it.
  for (std::size_t i = 0; i < info.fields.size(); ++i) {
    const FieldSpec& field = info.fields[i];
    std::cout << (i == 0 ? "fields    " : "          ") << field.name << " ("
              << FieldTypeName(field.type);
    for (std::size_t d = 0; d < field.inner_shape.size(); ++d) {
      std::cout << (d ? " x " : " of N x ") << field.inner_shape[d];
    }
    if (field.suffix != field.name && !field.suffix.empty()) std::cout << ", ." << field.suffix;
    std::cout << ")";
    if (i < info.field_records.size()) {
      std::cout << " in " << info.field_records[i] << " of " << info.record_count << " records";
    }
    std::cout << "\n";
  }
  std::cout << "size      " << HumanBytes(info.payload_bytes) << " of records in "
            << info.files.size() << " file(s), " << HumanBytes(file_bytes) << " on disk\n"
            << "source    " << info.source_kind << ", listing xxh64 " << info.listing_hash << "\n"
            << "options   " << info.options_json << "\n";
}

}  // namespace

void AddInfoCommand(CLI::App& app, int& exit_code) {
  auto* command = app.add_subcommand("info", "Show a dataset's counts, classes, sizes and options");
  struct Args {
    std::string path;
    bool json = false;
    OpenOptions open;
  };
  auto args = std::make_shared<Args>();
  command->add_option("DATASET", args->path, "Dataset directory, or its URL (https://, s3://)")
      ->required();
  AddRemoteOptions(command, args->open.remote);
  command->add_flag("--json", args->json, "Print as JSON, an error as {\"error\": {...}}");
  command->callback([args, &exit_code] {
    Result<std::unique_ptr<Reader>> reader = OpenDataset(args->path, args->open);
    if (!reader.ok()) {
      exit_code = Fail("info", reader.status(), args->json);
      return;
    }
    const DatasetInfo& info = (*reader)->info();
    std::uint64_t file_bytes = 0;
    for (const DatasetFileInfo& file : info.files) file_bytes += file.size_bytes;
    if (args->json) {
      std::cout << InfoJson(args->path, info, file_bytes).dump(2) << "\n";
      return;
    }
    PrintInfo(args->path, info, file_bytes);
  });
}

}  // namespace packrec::cli
