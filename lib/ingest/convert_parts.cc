// --part I/N: one slice of a listing converted into its own part dataset,
// OUT/part-IIIII-of-NNNNN plus the format's suffix, which `packrec merge` joins. A part is written
// under OUT/NAME.partial and renamed when finished; a finished part of the same conversion is not
// redone.
#include <string>
#include <system_error>

#include "dataset/registry.h"
#include "ingest/convert_internal.h"

namespace packrec::conversion {
namespace {

namespace fs = std::filesystem;

// Part `index` of `count` of `total` items: [total x index / count, total x (index+1) / count).
std::pair<std::uint64_t, std::uint64_t> PartRange(std::uint64_t total, std::uint32_t index,
                                                  std::uint32_t count) {
  return {total * index / count, total * (index + 1) / count};
}

// Moves a dataset, and its rejects file when that lies beside it (HDF5) rather than inside.
Status MovePart(const fs::path& from, const fs::path& to, const std::string& format) {
  const fs::path rejects = RejectsFilePath(from, format);
  const bool beside = rejects.parent_path() != from;
  std::error_code error;
  fs::remove_all(to, error);
  if (beside) fs::remove(RejectsFilePath(to, format), error);
  PACKREC_RETURN_IF_ERROR(RenamePath(from, to));
  if (beside && fs::exists(rejects, error)) {
    PACKREC_RETURN_IF_ERROR(RenamePath(rejects, RejectsFilePath(to, format)));
  }
  return Status::OK();
}

}  // namespace

Result<ConvertStats> ConvertPart(const ConvertOptions& options, SourceListing& listing,
                                 DatasetMetadata& metadata, const ProgressCallback& progress,
                                 Clock::time_point start) {
  ConvertOptions write = options;
  const std::uint64_t total = listing.items.size();
  if (options.part_count > total) {
    return Status::InvalidArgument("--part " + std::to_string(options.part_index) + "/" +
                                   std::to_string(options.part_count) + ": " +
                                   std::to_string(total) + " inputs cannot fill " +
                                   std::to_string(options.part_count) + " parts");
  }
  const auto [begin, end] = PartRange(total, options.part_index, options.part_count);
  metadata.options_json = OptionsJson(options, begin, end, total);
  listing.items.erase(listing.items.begin() + static_cast<std::ptrdiff_t>(end),
                      listing.items.end());
  listing.items.erase(listing.items.begin(),
                      listing.items.begin() + static_cast<std::ptrdiff_t>(begin));
  const fs::path final_path =
      options.output / PartName(options.part_index, options.part_count, options.writer.format);
  if (!options.writer.overwrite) {
    const std::optional<FinishedDataset> done = FindFinishedDataset(final_path, metadata);
    if (done && !done->same_conversion) {
      return Status::AlreadyExists(final_path.string() +
                                   " holds this part of another conversion (another listing or "
                                   "other options)")
          .WithRemedy(Remedy::kOverwriteToReplace);
    }
    if (done) {
      ConvertStats stats;
      stats.part_path = final_path;
      stats.already_complete = true;
      stats.records_written = done->records;
      return stats;
    }
    std::error_code error;
    if (fs::exists(final_path, error)) {
      return Status::AlreadyExists(final_path.string() + " exists and is not a finished part")
          .WithRemedy(Remedy::kOverwriteToReplace);
    }
  }
  // Written under a name only this part uses, so a re-run may clear what a killed run left.
  write.output = final_path.string() + ".partial";
  std::error_code error;
  fs::create_directories(options.output, error);
  if (error) return ErrnoStatus("create directory", options.output, error.value());
  if (!options.resume) {
    fs::remove_all(write.output, error);
    const FormatDescriptor* format = FindFormatDescriptor(options.writer.format);
    for (const std::string& suffix : format->side_file_suffixes) {
      fs::remove(fs::path(write.output.string() + suffix), error);
    }
  }
  write.writer.overwrite = false;
  Result<ConvertStats> stats = ConvertItems(write, listing, metadata, progress, start, begin);
  if (!stats.ok()) return stats;
  PACKREC_RETURN_IF_ERROR(MovePart(write.output, final_path, options.writer.format));
  stats->part_path = final_path;
  return stats;
}

}  // namespace packrec::conversion
