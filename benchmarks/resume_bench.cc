// Mid-epoch resumption, for benchmarks/resume_bench.sh (issue 9):
//
//   packrec_resume_bench DATASET [--transform none|eval|train] [--threads T] [--batch B]
//                        [--size N] [--fraction F]
//
// Reads the first F (0.9) of an epoch through the Loader (what restarting and replaying the
// epoch to that point costs), saves the loader's state, then resumes a new loader from the state
// (through its JSON text, as a checkpoint would) and times (a) creating it at the position and
// (b) getting the first batch after the position, which the uninterrupted run also had to read
// (set beside (c): a fresh loader's first batch at the start of the epoch).
// Checks that the resumed batch is the one the uninterrupted loader delivers next. Prints one
// line of key=value pairs.
#include <packrec/loader.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "pipeline/epoch_sequence.h"  // the order's cost per lookup: internal, measured here

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "resume_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: packrec_resume_bench DATASET [--transform none|eval|train] "
                 "[--threads T] [--batch B] [--size N] [--fraction F]\n");
    return 2;
  }
  const std::string path = argv[1];
  packrec::LoaderOptions options;
  options.batch_size = 256;
  options.threads = 2;
  options.output_size = 112;
  options.transform = packrec::TransformKind::kEval;
  options.seed = 1;
  std::string transform = "eval";
  double fraction = 0.9;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--transform") {
      transform = value;
      options.transform = value == "none"    ? packrec::TransformKind::kNone
                          : value == "train" ? packrec::TransformKind::kTrain
                                             : packrec::TransformKind::kEval;
    } else if (flag == "--threads") {
      options.threads = static_cast<unsigned>(std::stoul(value));
    } else if (flag == "--batch") {
      options.batch_size = static_cast<std::uint32_t>(std::stoul(value));
    } else if (flag == "--size") {
      options.output_size = static_cast<std::uint32_t>(std::stoul(value));
    } else if (flag == "--fraction") {
      fraction = std::stod(value);
    } else {
      return Fail("unknown flag " + flag);
    }
  }
  options.resize_size = options.output_size * 256 / 224;

  auto opened = packrec::OpenDataset(path);
  if (!opened.ok()) return Fail(opened.status().ToString());
  const std::shared_ptr<const packrec::Reader> reader(std::move(*opened));

  // The uninterrupted run, up to the fraction.
  const Clock::time_point read_start = Clock::now();
  auto first = packrec::Loader::Create(reader, options);
  if (!first.ok()) return Fail(first.status().ToString());
  const auto stop_at =
      static_cast<std::uint64_t>(fraction * static_cast<double>((*first)->batches_per_epoch()));
  std::uint64_t records_read = 0;
  double start_first_batch_seconds = 0;  // a fresh epoch's start-up, to set the resume's beside
  for (std::uint64_t b = 0; b < stop_at; ++b) {
    auto batch = (*first)->Next();
    if (!batch.ok() || *batch == nullptr) return Fail("the epoch ended early");
    if (b == 0) start_first_batch_seconds = Since(read_start);
    records_read += (*batch)->size();
  }
  const double read_seconds = Since(read_start);
  const std::string checkpoint = (*first)->State().ToJson();
  auto expected = (*first)->Next();  // what comes next without interruption
  if (!expected.ok() || *expected == nullptr) return Fail("no batch after the position");
  const std::vector<std::uint64_t> expected_records((*expected)->record_indices().begin(),
                                                    (*expected)->record_indices().end());
  first->reset();

  // The resumed run.
  const Clock::time_point resume_start = Clock::now();
  auto state = packrec::LoaderState::FromJson(checkpoint);
  if (!state.ok()) return Fail(state.status().ToString());
  auto resumed = packrec::Loader::Create(reader, options, *state);
  if (!resumed.ok()) return Fail(resumed.status().ToString());
  const double resume_seconds = Since(resume_start);
  auto batch = (*resumed)->Next();
  const double first_batch_seconds = Since(resume_start);
  if (!batch.ok() || *batch == nullptr) return Fail("no batch after resuming");
  const std::vector<std::uint64_t> got((*batch)->record_indices().begin(),
                                       (*batch)->record_indices().end());
  const bool same = got == expected_records;

  // The order's cost per record, by position (what a resume skips to, with nothing stored):
  // ImageNet's 1.28M records and a 2-billion-record epoch.
  double lookup_ns[2] = {0, 0};
  const std::uint64_t sizes[2] = {1281167, 2000000000};
  for (int i = 0; i < 2; ++i) {
    const packrec::EpochSequence sequence(sizes[i], options, 3);
    std::uint64_t sink = 0;
    const std::uint64_t lookups = 1000000;
    const Clock::time_point start = Clock::now();
    for (std::uint64_t p = 0; p < lookups; ++p) sink += sequence.At(p * 7919 % sizes[i]);
    lookup_ns[i] = Since(start) * 1e9 / static_cast<double>(lookups);
    if (sink == 0) std::printf("#");  // keeps the loop
  }

  std::printf(
      "lookup_ns_1281167=%.1f lookup_ns_2000000000=%.1f "
      "transform=%s records=%llu batch=%u threads=%u position=%llu records_read=%llu "
      "read_seconds=%.4f start_first_batch_seconds=%.6f resume_seconds=%.6f "
      "resume_first_batch_seconds=%.6f "
      "resume_share=%.6f first_batch_share=%.6f same_next_batch=%s state_bytes=%zu\n",
      lookup_ns[0], lookup_ns[1], transform.c_str(),
      static_cast<unsigned long long>(reader->size()), options.batch_size, options.threads,
      static_cast<unsigned long long>(state->position),
      static_cast<unsigned long long>(records_read), read_seconds, start_first_batch_seconds,
      resume_seconds, first_batch_seconds, resume_seconds / read_seconds,
      first_batch_seconds / read_seconds, same ? "yes" : "no", checkpoint.size());
  return same ? 0 : Fail("the resumed loader's first batch is not the uninterrupted next batch");
}
