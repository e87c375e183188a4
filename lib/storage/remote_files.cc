#include "storage/remote_files.h"

#include <fnmatch.h>
#include <stdlib.h>

#include <cstdio>
#include <map>
#include <utility>

#include "core/file_io.h"
#include "core/thread_name.h"
#include "core/threads.h"
#include "storage/object_store.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

bool HasGlob(std::string_view text) { return text.find_first_of("*?[") != std::string_view::npos; }

// "s3://bucket/dir/part-*.tar" -> ("s3://bucket/dir", "part-*.tar"): a URL's "directory" (the
// store) and the object name inside it.
std::pair<std::string, std::string> SplitUrl(const std::string& url) {
  const auto slash = url.rfind('/');
  return {url.substr(0, slash), url.substr(slash + 1)};
}

Status ExpandGlob(const std::string& pattern, const RemoteOptions& options,
                  std::vector<std::string>& out) {
  if (!pattern.starts_with("s3://")) {
    return Status::NotSupported("cannot expand " + pattern +
                                ": a pattern over a URL needs s3:// (plain HTTP has no listing); "
                                "name the files, or use braces");
  }
  PACKREC_ASSIGN_OR_RETURN(const ParsedUrl parsed, ParseUrl(pattern));
  if (parsed.key.empty()) return Status::InvalidArgument(pattern + ": no object key");
  const std::string bucket = parsed.BucketUrl();
  const std::string& key_pattern = parsed.key;
  const std::string prefix = key_pattern.substr(0, key_pattern.find_first_of("*?["));
  if (HasGlob(key_pattern.substr(0, key_pattern.rfind('/') + 1))) {
    return Status::InvalidArgument(pattern + ": only the last part of an S3 key may hold a glob");
  }
  PACKREC_ASSIGN_OR_RETURN(const std::shared_ptr<ObjectStore> store,
                           ObjectStore::ForUrl(bucket, options));
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::string> keys, store->ListKeys(prefix));
  std::size_t matched = 0;
  for (const std::string& key : keys) {
    // FNM_PATHNAME: '*' stops at '/', as a shell glob does over folders.
    if (fnmatch(key_pattern.c_str(), key.c_str(), FNM_PATHNAME) == 0) {
      out.push_back(bucket + "/" + key);
      ++matched;
    }
  }
  if (matched == 0) return Status::NotFound("no object matches " + pattern);
  return Status::OK();
}

}  // namespace

Result<std::vector<std::string>> ExpandUrlPattern(const std::vector<std::string>& patterns,
                                                  const RemoteOptions& options) {
  std::vector<std::string> urls;
  for (const std::string& pattern : patterns) {
    if (HasGlob(SplitUrl(pattern).second) || HasGlob(pattern.substr(pattern.find("://") + 3))) {
      PACKREC_RETURN_IF_ERROR(ExpandGlob(pattern, options, urls));
    } else {
      urls.push_back(pattern);
    }
  }
  return urls;
}

Result<std::shared_ptr<RemoteFileSpool>> RemoteFileSpool::Create(std::vector<std::string> urls,
                                                                 const RemoteOptions& options) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ =
      (tmp != nullptr && *tmp != '\0' ? std::string(tmp) : std::string("/var/tmp")) +
      "/packrec-import-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return ErrnoStatus("create", templ, errno);
  auto spool = std::shared_ptr<RemoteFileSpool>(
      new RemoteFileSpool(std::move(urls), options, fs::path(templ)));
  RemoteFileSpool* raw = spool.get();
  PACKREC_ASSIGN_OR_RETURN(spool->thread_, StartThread("pr-import-dl", [raw] { raw->Run(); }));
  return spool;
}

RemoteFileSpool::RemoteFileSpool(std::vector<std::string> urls, RemoteOptions options, fs::path dir)
    : urls_(std::move(urls)), options_(std::move(options)), dir_(std::move(dir)) {
  results_.resize(urls_.size());
}

RemoteFileSpool::~RemoteFileSpool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

fs::path RemoteFileSpool::LocalPath(std::size_t index) const {
  char name[32];
  std::snprintf(name, sizeof name, "%06zu-", index);
  return dir_ / (name + SplitUrl(urls_[index]).second);
}

void RemoteFileSpool::Run() {
  NameThisThread("pr-import-dl");
  std::map<std::string, std::shared_ptr<ObjectStore>> stores;  // one per URL "directory"
  for (std::size_t index = 0; index < urls_.size(); ++index) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || index <= reading_ + kAhead; });
      if (stopping_) return;
    }
    const auto [directory, name] = SplitUrl(urls_[index]);
    Status status;
    if (!stores.contains(directory)) {
      Result<std::shared_ptr<ObjectStore>> store = ObjectStore::ForUrl(directory, options_);
      if (store.ok()) stores[directory] = *store;
      status = store.status();
    }
    if (status.ok()) status = stores[directory]->Download(name, LocalPath(index));
    std::lock_guard lock(mutex_);
    results_[index] = std::move(status);
    downloaded_ = index + 1;
    changed_.notify_all();
  }
}

Result<fs::path> RemoteFileSpool::Acquire(std::size_t index) {
  if (index >= urls_.size()) return Status::Internal("no file " + std::to_string(index));
  std::unique_lock lock(mutex_);
  for (std::size_t earlier = reading_; earlier < index; ++earlier) {
    std::error_code ignored;
    fs::remove(LocalPath(earlier), ignored);  // read: its copy has served
  }
  reading_ = std::max(reading_, index);
  changed_.notify_all();
  changed_.wait(lock, [&] { return downloaded_ > index; });
  PACKREC_RETURN_IF_ERROR(results_[index]);
  return LocalPath(index);
}

}  // namespace packrec
