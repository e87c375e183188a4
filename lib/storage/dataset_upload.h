// Ships a dataset written on local disk to an s3:// URL: each data file on a background thread as
// soon as it is finished (while the conversion goes on), then the manifest, last, so that a reader
// of the URL sees either no dataset or a whole one.
//
// Threading: Enqueue may be called from one thread at a time (the writing thread); the upload
// runs on the uploader's own thread. Destroying the uploader waits for the file being uploaded
// (its multipart upload is completed or aborted) and drops the rest of the queue.
#ifndef PACKREC_LIB_STORAGE_DATASET_UPLOAD_H_
#define PACKREC_LIB_STORAGE_DATASET_UPLOAD_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "packrec/reader.h"
#include "packrec/status.h"
#include "storage/object_store.h"

namespace packrec {

class DatasetUploader {
 public:
  // NotSupported for a URL packrec cannot write to (http(s)).
  static Result<std::unique_ptr<DatasetUploader>> Open(std::string_view url,
                                                       const RemoteOptions& options);
  ~DatasetUploader();
  DatasetUploader(const DatasetUploader&) = delete;
  DatasetUploader& operator=(const DatasetUploader&) = delete;

  const ObjectStore& store() const { return *store_; }

  // Queues `file` for upload as the object named by its file name; returns at once. After an
  // upload failed, queued files are dropped and Drain returns that failure.
  void Enqueue(const std::filesystem::path& file, std::uint64_t xxh64);
  // Waits until the queue is empty; the first failure, if any.
  Status Drain();

  // One file of a finished local dataset, as its manifest lists it.
  struct File {
    std::string name;
    std::uint64_t size_bytes = 0;
    std::uint64_t xxh64 = 0;
  };
  // Uploads each of `files` from `dir` unless this uploader already did, or the URL already
  // holds exactly it (HEAD: the same size and the xxh64 packrec stored with it), as a resumed
  // conversion finds the shards a killed run uploaded. Call after Drain.
  Status UploadMissing(const std::filesystem::path& dir, std::span<const File> files);

  std::uint64_t files_uploaded() const;
  std::uint64_t files_already_there() const;

 private:
  explicit DatasetUploader(std::shared_ptr<ObjectStore> store);
  void Run();

  struct Job {
    std::filesystem::path file;
    std::uint64_t xxh64 = 0;
  };
  std::shared_ptr<ObjectStore> store_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  Status failure_;
  std::set<std::string> uploaded_;  // names uploaded by this uploader
  std::uint64_t already_there_ = 0;
  std::thread thread_;
};

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_DATASET_UPLOAD_H_
