#include "ingest/field_routing.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "core/file_io.h"
#include "storage/field_block.h"

namespace packrec::conversion {

namespace {

bool Listed(const std::vector<std::string>& names, const std::string& name) {
  return std::ranges::find(names, name) != names.end();
}

// image, label and key are what every record has; --fields may list them for clarity.
bool IsRecordPart(const std::string& name) {
  return name == "image" || name == "label" || name == "key";
}

}  // namespace

Status CheckFieldSelection(const SourceOptions& options) {
  for (const auto* list : {&options.keep_fields, &options.drop_fields}) {
    std::set<std::string> seen;
    for (const std::string& name : *list) {
      if (name.empty()) return Status::InvalidArgument("--fields and --drop-fields: empty name");
      if (!seen.insert(name).second) {
        return Status::InvalidArgument("--fields / --drop-fields name '" + name + "' twice");
      }
    }
  }
  for (const std::string& name : options.drop_fields) {
    if (Listed(options.keep_fields, name)) {
      return Status::InvalidArgument("'" + name + "' is both kept (--fields) and dropped " +
                                     "(--drop-fields)");
    }
    if (IsRecordPart(name)) {
      return Status::InvalidArgument("--drop-fields " + name + ": every record keeps its " + name +
                                     "; only the fields beside it can be dropped");
    }
  }
  return Status::OK();
}

namespace {

Status CheckKeptFieldsIn(const std::vector<std::string>& keep,
                         const std::vector<FieldSpec>& schema) {
  for (const std::string& name : keep) {
    if (IsRecordPart(name)) continue;
    const bool held =
        std::ranges::any_of(schema, [&](const FieldSpec& spec) { return spec.name == name; });
    if (held) continue;
    std::string names;
    for (const FieldSpec& spec : schema) names += (names.empty() ? "" : ", ") + spec.name;
    return Status::InvalidArgument(
        "--fields " + name + ": no record of the source has it (" +
        (names.empty() ? std::string("it holds no fields") : "its fields: " + names) + ")");
  }
  return Status::OK();
}

}  // namespace

Status SelectListingFields(SourceListing& listing, const SourceOptions& options) {
  if (options.keep_fields.empty() && options.drop_fields.empty()) return Status::OK();
  PACKREC_RETURN_IF_ERROR(CheckKeptFieldsIn(options.keep_fields, listing.fields));
  std::vector<std::optional<std::size_t>> kept_as(listing.fields.size());
  std::vector<FieldSpec> kept;
  for (std::size_t field = 0; field < listing.fields.size(); ++field) {
    if (!options.KeepsField(listing.fields[field].name)) continue;
    kept_as[field] = kept.size();
    kept.push_back(std::move(listing.fields[field]));
  }
  listing.fields = std::move(kept);
  for (SourceItem& item : listing.items) {
    std::erase_if(item.side_files, [&](const SideFile& side) { return !kept_as[side.field]; });
    for (SideFile& side : item.side_files) side.field = *kept_as[side.field];
    std::erase_if(item.field_values, [&](const auto& value) { return !kept_as[value.first]; });
    for (auto& value : item.field_values) value.first = *kept_as[value.first];
  }
  return Status::OK();
}

std::vector<FieldSpec> FieldRouter::Start(const std::vector<FieldSpec>& source_fields) {
  std::vector<FieldSpec> output;
  for (const FieldSpec& spec : source_fields) {
    source_schema_.push_back(spec);
    if (options_.KeepsField(spec.name)) {
      output_of_.push_back(output.size());
      output.push_back(spec);
    } else {
      output_of_.push_back(std::nullopt);
    }
  }
  output_fields_ = output.size();
  records_per_field_.assign(output_fields_, 0);
  return output;
}

void FieldRouter::Extend(const std::vector<FieldSpec>& added) {
  for (const FieldSpec& spec : added) {
    source_schema_.push_back(spec);
    output_of_.push_back(std::nullopt);
  }
}

namespace {

// A value typed `given` as the field `known` stores it; false when it cannot be.
bool Conform(const FieldSpec& known, const FieldSpec& given, std::vector<std::byte>& value) {
  if (known.type == given.type && known.inner_shape == given.inner_shape) return true;
  if (known.type == FieldType::kBytes && given.type == FieldType::kText) return true;
  if (known.type == FieldType::kJson && given.type == FieldType::kText) {
    const nlohmann::json list = nlohmann::json::array({std::string(AsText(value))});
    const std::string text = list.dump();
    const auto bytes = AsBytes(text);
    value.assign(bytes.begin(), bytes.end());
    return true;
  }
  return false;
}

}  // namespace

Status FieldRouter::PlaceTyped(
    std::vector<std::pair<FieldSpec, std::vector<std::byte>>>& typed,
    std::vector<std::pair<std::size_t, std::vector<std::byte>>>& values) {
  values.reserve(values.size() + typed.size());
  for (auto& [spec, value] : typed) {
    // Looked up before an emplace, which would allocate a node for every known field's value.
    auto found = typed_index_.find(spec.name);
    const bool added = found == typed_index_.end();
    if (added) found = typed_index_.emplace(spec.name, source_schema_.size()).first;
    if (added) {
      source_schema_.push_back(spec);
      output_of_.push_back(std::nullopt);
    }
    const FieldSpec& field = source_schema_[found->second];
    const std::string& what = spec.source_name.empty() ? spec.name : spec.source_name;
    if (!Conform(field, spec, value)) {
      return Status::InvalidInput("its " + what + " is " + FieldTypeText(spec) + ", where field '" +
                                  field.name + "' is " + FieldTypeText(field) +
                                  " (as the first record that had it)");
    }
    const Status valid = ValidateFieldValue(field, value);
    if (!valid.ok()) {
      return Status::InvalidInput("its " + what + " cannot be field '" + field.name +
                                  "': " + valid.message());
    }
    values.emplace_back(found->second, std::move(value));
  }
  return Status::OK();
}

std::optional<std::size_t> FieldRouter::Output(std::size_t source_field) const {
  return source_field < output_of_.size() ? output_of_[source_field] : std::nullopt;
}

Status FieldRouter::Route(const std::vector<std::pair<std::size_t, std::vector<std::byte>>>& values,
                          DatasetWriter& writer, std::vector<FieldView>& out) {
  std::vector<FieldSpec> added;
  for (const auto& [field, value] : values) {
    if (field >= source_schema_.size() || output_of_[field] ||
        !options_.KeepsField(source_schema_[field].name)) {
      continue;
    }
    output_of_[field] = output_fields_ + added.size();
    added.push_back(source_schema_[field]);
  }
  if (!added.empty()) {
    const Status grown = writer.AddFields(added);
    if (!grown.ok()) {
      for (auto& output : output_of_) {
        if (output && *output >= output_fields_) output.reset();
      }
      return grown;
    }
    output_fields_ += added.size();
    records_per_field_.resize(output_fields_, 0);
  }
  out.assign(output_fields_, FieldView{});
  for (const auto& [field, value] : values) {
    const std::optional<std::size_t> output = Output(field);
    if (!output) continue;
    out[*output] = FieldView{true, value};
  }
  for (std::size_t i = 0; i < out.size(); ++i) records_per_field_[i] += out[i].present ? 1 : 0;
  return Status::OK();
}

Status FieldRouter::CheckKeptFieldsSeen() const {
  return CheckKeptFieldsIn(options_.keep_fields, source_schema_);
}

}  // namespace packrec::conversion
