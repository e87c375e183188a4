// Import sources at URLs (WebDataset tars, TFRecord and RecordIO files over HTTP(S) or S3): the
// files are downloaded in order into a private spool folder on a background thread, at most two
// ahead of the one being read, and each is removed once the importer asks for a later one. The
// importers read local files as always (SourceOptions::local_copy); the disk holds a few files,
// never the whole source.
#ifndef PACKREC_LIB_STORAGE_REMOTE_FILES_H_
#define PACKREC_LIB_STORAGE_REMOTE_FILES_H_

#include <condition_variable>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "packrec/reader.h"
#include "packrec/status.h"

namespace packrec {

// The URLs a source spec names: braces expanded (shard-{000..009}.tar), and on s3:// a glob in
// the last part (s3://bucket/laion/part-*.tar) matched against the keys under its prefix, in
// the listing's order. NotFound when a glob matches nothing.
Result<std::vector<std::string>> ExpandUrlPattern(const std::vector<std::string>& patterns,
                                                  const RemoteOptions& options);

class RemoteFileSpool {
 public:
  // Starts downloading `urls` in order into a new folder under $TMPDIR (else /var/tmp).
  static Result<std::shared_ptr<RemoteFileSpool>> Create(std::vector<std::string> urls,
                                                         const RemoteOptions& options);
  ~RemoteFileSpool();  // stops the download and removes the folder
  RemoteFileSpool(const RemoteFileSpool&) = delete;
  RemoteFileSpool& operator=(const RemoteFileSpool&) = delete;

  // The local copy of file `index`, once downloaded (waits); the copies of earlier files are
  // removed. The download's error (naming the URL) when it failed. Indices must not go back.
  Result<std::filesystem::path> Acquire(std::size_t index);

 private:
  RemoteFileSpool(std::vector<std::string> urls, RemoteOptions options, std::filesystem::path dir);
  void Run();
  std::filesystem::path LocalPath(std::size_t index) const;

  static constexpr std::size_t kAhead = 2;  // files downloaded beyond the one being read
  const std::vector<std::string> urls_;
  const RemoteOptions options_;
  const std::filesystem::path dir_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t reading_ = 0;     // the file the importer asked for last
  std::size_t downloaded_ = 0;  // files [0, downloaded_) are done (or failed)
  std::vector<Status> results_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_REMOTE_FILES_H_
