// Carries the fields an import's source holds into its output's schema: the ones --fields and
// --drop-fields keep, each added to the writer when the first record holding a value for it is
// written (a source may meet a WebDataset member or tf.Example feature first in its millionth
// record), and counted per field for `packrec info`.
#ifndef PACKREC_LIB_INGEST_FIELD_ROUTING_H_
#define PACKREC_LIB_INGEST_FIELD_ROUTING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "packrec/ingest.h"
#include "packrec/record.h"
#include "packrec/source.h"
#include "packrec/status.h"
#include "packrec/writer.h"

namespace packrec::conversion {

// InvalidArgument for a --fields or --drop-fields list that names a field twice, or that names
// one in both.
Status CheckFieldSelection(const SourceOptions& options);

// Leaves the fields --fields / --drop-fields do not keep out of an image folder's or list
// file's listing. InvalidArgument naming a --fields entry the listing has no field of.
Status SelectListingFields(SourceListing& listing, const SourceOptions& options);

// One instance per import, used on the writing thread only.
class FieldRouter {
 public:
  explicit FieldRouter(const SourceOptions& options) : options_(options) {}

  // The source's schema as it was opened; returns the output's first schema (its selected fields).
  std::vector<FieldSpec> Start(const std::vector<FieldSpec>& source_fields);
  // Appends the fields a record (any record, in source order) announced to the source's schema.
  void Extend(const std::vector<FieldSpec>& added);
  // Places a record's self-typed values (SourceRecord::typed_fields, moved out) into the
  // source's schema by name, appending them to `values`. InvalidInput, naming the field, for a
  // value its field's type does not take (the record's reject reason).
  Status PlaceTyped(std::vector<std::pair<FieldSpec, std::vector<std::byte>>>& typed,
                    std::vector<std::pair<std::size_t, std::vector<std::byte>>>& values);
  // The output's views of a written record's values (`values`: source field index and value),
  // in the writer's schema order. A selected field the writer does not have yet is added to it
  // first (DatasetWriter::AddFields). Views are valid while `values` is.
  Status Route(const std::vector<std::pair<std::size_t, std::vector<std::byte>>>& values,
               DatasetWriter& writer, std::vector<FieldView>& out);
  // How many written records held each field of the output's schema.
  const std::vector<std::uint64_t>& records_per_field() const { return records_per_field_; }
  // InvalidArgument naming a --fields entry that no record of the source had.
  Status CheckKeptFieldsSeen() const;

 private:
  // Where the source field's values go in the output: nullopt when left out or not yet added.
  std::optional<std::size_t> Output(std::size_t source_field) const;

  const SourceOptions& options_;
  std::vector<FieldSpec> source_schema_;
  std::unordered_map<std::string, std::size_t> typed_index_;  // PlaceTyped's names
  std::vector<std::optional<std::size_t>> output_of_;         // per source field
  std::size_t output_fields_ = 0;
  std::vector<std::uint64_t> records_per_field_;
};

}  // namespace packrec::conversion

#endif  // PACKREC_LIB_INGEST_FIELD_ROUTING_H_
