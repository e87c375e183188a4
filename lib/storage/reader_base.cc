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

}  // namespace packrec
