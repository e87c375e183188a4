// What the hdf5 format says about itself: the registry's entry for it
// (lib/storage/format_descriptor.h).
#include "core/output_dir.h"
#include "hdf5/hdf5_format.h"
#include "storage/json_util.h"

namespace packrec::hdf5 {
namespace {

void OptionsToJson(const WriterOptions& options, nlohmann::json& out) {
  const bool pixels = options.hdf5.layout == Hdf5Layout::kPixels;
  out["hdf5_layout"] = pixels ? "pixels" : "encoded";
  if (pixels) out["size"] = {options.hdf5.pixel_height, options.hdf5.pixel_width};
}

void OptionsFromJson(const nlohmann::json& in, WriterOptions& options) {
  if (in.value("hdf5_layout", std::string("encoded")) == "pixels") {
    options.hdf5.layout = Hdf5Layout::kPixels;
    const nlohmann::json& size = in.at("size");
    options.hdf5.pixel_height = GetUnsigned<std::uint32_t>(size.at(0));
    options.hdf5.pixel_width = GetUnsigned<std::uint32_t>(size.at(1));
  }
}

}  // namespace

const FormatDescriptor& Hdf5Format() {
  // Never destroyed: a thread still reading when the process exits (a Python daemon thread)
  // finds it whole while exit() runs the static destructors.
  static const FormatDescriptor& kDescriptor = *new FormatDescriptor{
      .info = {.name = "hdf5",
               .summary = "one HDF5 file, which h5py reads (docs/formats/hdf5.md)",
               .suffixes = {".h5", ".hdf5"},
               .readable = true,
               .single_file = true,
               .resumable = true,
               .stores_fields = true},
      .looks_like = LooksLikeHdf5Dataset,
      .open = OpenHdf5Dataset,
      .create = CreateHdf5Writer,
      .resume = ResumeHdf5Writer,
      .options_to_json = OptionsToJson,
      .options_from_json = OptionsFromJson,
      .uses_payload_total = true,
      .side_file_suffixes = {kTempSuffix, kPayloadScratchSuffix, kResumeJournalSuffix},
  };
  return kDescriptor;
}

}  // namespace packrec::hdf5
