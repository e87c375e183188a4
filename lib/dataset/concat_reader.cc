// Several datasets read as one (ConcatenateDatasets): each call goes to the part that holds the
// record, with the index moved into the part and back out.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/checksum.h"
#include "packrec/dataset_ops.h"

namespace packrec {
namespace {

bool SameSchema(const std::vector<FieldSpec>& a, const std::vector<FieldSpec>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].type != b[i].type || a[i].suffix != b[i].suffix ||
        a[i].inner_shape != b[i].inner_shape) {
      return false;
    }
  }
  return true;
}

// Moves a part's problems to the concatenation's record numbers.
class ShiftingReporter final : public VerifyReporter {
 public:
  ShiftingReporter(VerifyReporter& inner, std::uint64_t first) : inner_(inner), first_(first) {}
  void Report(const VerifyProblem& problem) override {
    VerifyProblem shifted = problem;
    if (shifted.record_index) *shifted.record_index += first_;
    inner_.Report(shifted);
  }

 private:
  VerifyReporter& inner_;
  std::uint64_t first_;
};

class ConcatReader final : public Reader {
 public:
  explicit ConcatReader(std::vector<std::shared_ptr<const Reader>> parts)
      : parts_(std::move(parts)) {
    info_.format = "concat";
    info_.source_kind = "concat";
    info_.options_json = "{}";
    info_.classes = parts_.front()->info().classes;
    info_.fields = parts_.front()->info().fields;
    std::string identity = "packrec-concat-v1";
    for (const std::shared_ptr<const Reader>& part : parts_) {
      const DatasetInfo& part_info = part->info();
      firsts_.push_back(info_.record_count);
      for (DatasetFileInfo file : part_info.files) {
        file.first_record += info_.record_count;
        info_.files.push_back(std::move(file));
      }
      info_.record_count += part_info.record_count;
      info_.rejected_count += part_info.rejected_count;
      info_.payload_bytes += part_info.payload_bytes;
      info_.label_count = std::max(info_.label_count, part_info.label_count);
      info_.metadata_checksummed = info_.metadata_checksummed && part_info.metadata_checksummed;
      if (part_info.classes != info_.classes) info_.classes.clear();
      if (!SameSchema(part_info.fields, info_.fields)) info_.fields.clear();
      // What DatasetFingerprint (a layer above) takes from a dataset's manifest: its listing,
      // counts and convert options.
      identity += " [" + part_info.listing_hash + " " + std::to_string(part_info.record_count) +
                  " " + std::to_string(part_info.label_count) + " " +
                  std::to_string(part_info.rejected_count) + " " +
                  std::to_string(part_info.payload_bytes) + " " + part_info.options_json + "]";
    }
    // The parts, in order, are the listing: a loader's state of one concatenation resumes no other.
    info_.listing_hash = Hex64(Xxh64(identity));
    info_.created_by = "packrec ConcatenateDatasets";
  }

  const DatasetInfo& info() const override { return info_; }

  Result<RecordView> Read(std::uint64_t index, ReadScratch& scratch) const override {
    PACKREC_ASSIGN_OR_RETURN(const std::size_t part, PartOf(index));
    PACKREC_ASSIGN_OR_RETURN(RecordView view, parts_[part]->Read(index - firsts_[part], scratch));
    return Shifted(view, part);
  }

  Status ForEach(const Visitor& visit, std::uint64_t begin, std::uint64_t end) const override {
    end = std::min(end, size());
    for (std::size_t part = 0; part < parts_.size() && begin < end; ++part) {
      const std::uint64_t first = firsts_[part];
      const std::uint64_t last = first + parts_[part]->size();
      if (begin >= last) continue;
      PACKREC_RETURN_IF_ERROR(
          parts_[part]->ForEach([&](const RecordView& view) { return visit(Shifted(view, part)); },
                                begin - first, std::min(end, last) - first));
      begin = std::min(end, last);
    }
    return Status::OK();
  }

  Result<FieldView> ReadField(std::uint64_t index, std::size_t field,
                              ReadScratch& scratch) const override {
    if (field >= info_.fields.size()) {
      return Status::OutOfRange("field " + std::to_string(field) + " of a concatenation with " +
                                std::to_string(info_.fields.size()) + " common fields");
    }
    PACKREC_ASSIGN_OR_RETURN(const std::size_t part, PartOf(index));
    return parts_[part]->ReadField(index - firsts_[part], field, scratch);
  }

  Result<std::vector<std::uint32_t>> ReadLabels() const override {
    std::vector<std::uint32_t> labels;
    labels.reserve(size());
    for (const std::shared_ptr<const Reader>& part : parts_) {
      PACKREC_ASSIGN_OR_RETURN(const std::vector<std::uint32_t> part_labels, part->ReadLabels());
      labels.insert(labels.end(), part_labels.begin(), part_labels.end());
    }
    return labels;
  }

  Result<RecordLocation> Locate(std::uint64_t index) const override {
    PACKREC_ASSIGN_OR_RETURN(const std::size_t part, PartOf(index));
    return parts_[part]->Locate(index - firsts_[part]);
  }

  VerifyStats Verify(VerifyReporter& reporter) const override {
    VerifyStats total;
    for (std::size_t part = 0; part < parts_.size(); ++part) {
      ShiftingReporter shifting(reporter, firsts_[part]);
      const VerifyStats stats = parts_[part]->Verify(shifting);
      total.records_checked += stats.records_checked;
      total.bytes_checked += stats.bytes_checked;
      total.problems += stats.problems;
    }
    return total;
  }

 private:
  Result<std::size_t> PartOf(std::uint64_t index) const {
    if (index >= size()) {
      return Status::OutOfRange("record " + std::to_string(index) + " of a concatenation of " +
                                std::to_string(size()) + " records");
    }
    const auto after = std::upper_bound(firsts_.begin(), firsts_.end(), index);
    return static_cast<std::size_t>(after - firsts_.begin()) - 1;
  }

  // A part's view with the concatenation's index, and without fields the parts do not share.
  RecordView Shifted(RecordView view, std::size_t part) const {
    view.index += firsts_[part];
    if (info_.fields.empty()) view.fields = {};
    return view;
  }

  std::vector<std::shared_ptr<const Reader>> parts_;
  std::vector<std::uint64_t> firsts_;  // each part's first record in the concatenation
  DatasetInfo info_;
};

}  // namespace

Result<std::unique_ptr<Reader>> ConcatenateDatasets(
    std::vector<std::shared_ptr<const Reader>> parts) {
  if (parts.empty()) return Status::InvalidArgument("no datasets to concatenate");
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == nullptr) {
      return Status::InvalidArgument("dataset " + std::to_string(i) +
                                     " of the concatenation is null");
    }
  }
  return std::unique_ptr<Reader>(std::make_unique<ConcatReader>(std::move(parts)));
}

}  // namespace packrec
