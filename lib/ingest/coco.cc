#include "ingest/coco.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/endian.h"
#include "core/file_io.h"
#include "storage/field_block.h"

namespace packrec::conversion {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

enum CocoField : std::size_t { kBoxes, kCategory, kIsCrowd, kArea, kAnnotationId, kSegmentation };

std::vector<FieldSpec> CocoSchema() {
  return {{"boxes", FieldType::kFloat32, "", {4}},      {"category_id", FieldType::kInt64, "", {}},
          {"iscrowd", FieldType::kInt64, "", {}},       {"area", FieldType::kFloat32, "", {}},
          {"annotation_id", FieldType::kInt64, "", {}}, {"segmentation", FieldType::kJson, "", {}}};
}

void AppendFloat(std::vector<std::byte>& out, double value) {
  const auto number = static_cast<float>(value);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &number, sizeof bits);
  std::array<std::byte, 4> bytes{};
  StoreLE<std::uint32_t>(bytes.data(), bits);
  out.insert(out.end(), bytes.begin(), bytes.end());
}

void AppendInt(std::vector<std::byte>& out, std::int64_t value) {
  std::array<std::byte, 8> bytes{};
  StoreLE<std::int64_t>(bytes.data(), value);
  out.insert(out.end(), bytes.begin(), bytes.end());
}

// One image's values, annotation by annotation.
struct ImageValues {
  std::array<std::vector<std::byte>, 6> columns;
  json segmentation = json::array();
  std::string problem;  // why the image is rejected; empty when it is not
};

// Adds annotation `a` to its image's values; the reason it cannot be, when it cannot.
std::string AddAnnotation(const json& a, ImageValues& values) {
  const std::string id = a.contains("id") ? a["id"].dump() : "(no id)";
  const json& box = a.contains("bbox") ? a["bbox"] : json();
  if (!box.is_array() || box.size() != 4 ||
      !std::all_of(box.begin(), box.end(), [](const json& v) { return v.is_number(); })) {
    return "annotation " + id + " has no bbox of four numbers";
  }
  if (box[2].get<double>() < 0 || box[3].get<double>() < 0) {
    return "annotation " + id + " has a box of negative size (" + box[2].dump() + " x " +
           box[3].dump() + ")";
  }
  if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("category_id") ||
      !a["category_id"].is_number_integer()) {
    return "annotation " + id + " lacks an integer id or category_id";
  }
  const json& crowd = a.contains("iscrowd") ? a["iscrowd"] : json(0);
  const json& area = a.contains("area") ? a["area"] : json();
  if (!crowd.is_number_integer() || !area.is_number()) {
    return "annotation " + id + " lacks an integer iscrowd or a numeric area";
  }
  for (const json& number : {box[0], box[1], box[2], box[3], area}) {
    const std::string problem = NumberProblem(FieldType::kFloat32, number);
    if (!problem.empty()) return "annotation " + id + ": " + problem;
  }
  for (const json& number : {a["id"], a["category_id"], crowd}) {
    const std::string problem = NumberProblem(FieldType::kInt64, number);
    if (!problem.empty()) return "annotation " + id + ": " + problem;
  }
  for (const json& v : box) AppendFloat(values.columns[kBoxes], v.get<double>());
  AppendInt(values.columns[kCategory], a["category_id"].get<std::int64_t>());
  AppendInt(values.columns[kIsCrowd], crowd.get<std::int64_t>());
  AppendFloat(values.columns[kArea], area.get<double>());
  AppendInt(values.columns[kAnnotationId], a["id"].get<std::int64_t>());
  values.segmentation.push_back(a.contains("segmentation") ? a["segmentation"] : json());
  return "";
}

// A file_name that stays inside the image folder.
bool IsInsideName(const std::string& name) {
  if (name.empty() || name.starts_with('/')) return false;
  for (const auto& part : fs::path(name)) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

Result<SourceListing> ListCocoImages(const fs::path& root, const fs::path& annotations) {
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::byte> text, ReadWholeFile(annotations));
  const json coco = json::parse(AsText(text), nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& why) {
    return Status::InvalidInput(annotations.string() + ": " + why);
  };
  if (coco.is_discarded() || !coco.is_object()) return bad("not a JSON object");
  if (!coco.contains("images") || !coco["images"].is_array()) return bad("no \"images\" list");
  SourceListing listing;
  listing.kind = "coco";
  listing.fields = CocoSchema();
  if (coco.contains("categories")) listing.categories_json = coco["categories"].dump();
  std::map<std::int64_t, std::size_t> image_of_id;  // id -> index in "images"
  const json& images = coco["images"];
  for (std::size_t i = 0; i < images.size(); ++i) {
    const json& image = images[i];
    if (!image.is_object() || !image.contains("id") || !image["id"].is_number_integer() ||
        !image.contains("file_name") || !image["file_name"].is_string()) {
      return bad("images[" + std::to_string(i) + "] lacks an integer id or a file_name");
    }
    if (!image_of_id.emplace(image["id"].get<std::int64_t>(), i).second) {
      return bad("image id " + image["id"].dump() + " appears twice in \"images\"");
    }
  }
  std::vector<ImageValues> values(images.size());
  const json& list = coco.contains("annotations") ? coco["annotations"] : json::array();
  for (const json& a : list) {
    const auto found = a.is_object() && a.contains("image_id") && a["image_id"].is_number_integer()
                           ? image_of_id.find(a["image_id"].get<std::int64_t>())
                           : image_of_id.end();
    if (found == image_of_id.end()) {
      listing.rejects.push_back(
          {annotations.string(), "annotation " + (a.contains("id") ? a["id"].dump() : "?") +
                                     " names image_id " +
                                     (a.contains("image_id") ? a["image_id"].dump() : "(none)") +
                                     ", which \"images\" does not list"});
      continue;
    }
    ImageValues& image = values[found->second];
    if (!image.problem.empty()) continue;
    image.problem = AddAnnotation(a, image);
  }
  for (std::size_t i = 0; i < images.size(); ++i) {
    const std::string name = images[i]["file_name"].get<std::string>();
    if (!IsInsideName(name)) values[i].problem = "its file_name leaves the image folder";
    if (!values[i].problem.empty()) {
      listing.rejects.push_back({(root / name).string(), values[i].problem});
      continue;
    }
    SourceItem item;
    item.path = root / name;
    item.key = name;
    for (std::size_t f = kBoxes; f < kSegmentation; ++f) {
      item.field_values.emplace_back(f, std::move(values[i].columns[f]));
    }
    const std::string segmentation = values[i].segmentation.dump();
    const auto bytes = AsBytes(segmentation);
    item.field_values.emplace_back(kSegmentation,
                                   std::vector<std::byte>(bytes.begin(), bytes.end()));
    listing.items.push_back(std::move(item));
  }
  return listing;
}

}  // namespace packrec::conversion
