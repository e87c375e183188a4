#include <algorithm>

#include "packrec/reader.h"

namespace packrec {

Status Reader::ForEach(const Visitor& visit, std::uint64_t begin, std::uint64_t end) const {
  ReadScratch scratch;
  end = std::min(end, size());
  for (std::uint64_t i = begin; i < end; ++i) {
    PACKREC_ASSIGN_OR_RETURN(const RecordView view, Read(i, scratch));
    PACKREC_RETURN_IF_ERROR(visit(view));
  }
  return Status::OK();
}

Result<RecordLocation> Reader::Locate(std::uint64_t) const {
  return Status::NotSupported("the " + info().format +
                              " format does not expose record locations (shards do)");
}

// Formats that keep fields inside the record read the whole record.
Result<FieldView> Reader::ReadField(std::uint64_t index, std::size_t field,
                                    ReadScratch& scratch) const {
  if (field >= info().fields.size()) {
    return Status::OutOfRange("field " + std::to_string(field) + " of a dataset with " +
                              std::to_string(info().fields.size()) + " fields");
  }
  PACKREC_ASSIGN_OR_RETURN(const RecordView view, Read(index, scratch));
  return field < view.fields.size() ? view.fields[field] : FieldView{};
}

Result<std::vector<std::uint32_t>> Reader::ReadLabels() const {
  std::vector<std::uint32_t> labels;
  labels.reserve(size());
  PACKREC_RETURN_IF_ERROR(ForEach([&](const RecordView& view) {
    labels.push_back(view.label);
    return Status::OK();
  }));
  return labels;
}

}  // namespace packrec
