#include "storage/dataset_upload.h"

#include <utility>

#include "core/checksum.h"
#include "core/thread_name.h"
#include "core/threads.h"

namespace packrec {

Result<std::unique_ptr<DatasetUploader>> DatasetUploader::Open(std::string_view url,
                                                               const RemoteOptions& options) {
  PACKREC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> store, ObjectStore::ForUrl(url, options));
  // A store that cannot be written is refused before anything is converted.
  PACKREC_RETURN_IF_ERROR(store->CheckWritable());
  auto uploader = std::unique_ptr<DatasetUploader>(new DatasetUploader(std::move(store)));
  DatasetUploader* raw = uploader.get();
  PACKREC_ASSIGN_OR_RETURN(uploader->thread_, StartThread("pr-upload", [raw] { raw->Run(); }));
  return uploader;
}

DatasetUploader::DatasetUploader(std::shared_ptr<ObjectStore> store) : store_(std::move(store)) {}

DatasetUploader::~DatasetUploader() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    queue_.clear();
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DatasetUploader::Enqueue(const std::filesystem::path& file, std::uint64_t xxh64) {
  {
    std::lock_guard lock(mutex_);
    if (!failure_.ok()) return;
    queue_.push_back({file, xxh64});
  }
  changed_.notify_all();
}

Status DatasetUploader::Drain() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
  return failure_;
}

void DatasetUploader::Run() {
  NameThisThread("pr-upload");
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    const std::string name = job.file.filename().string();
    const Status status = store_->PutFile(name, job.file, Hex64(job.xxh64));
    lock.lock();
    busy_ = false;
    if (status.ok()) {
      uploaded_.insert(name);
    } else if (failure_.ok()) {
      failure_ = status;
      queue_.clear();
    }
    changed_.notify_all();
  }
}

Status DatasetUploader::UploadMissing(const std::filesystem::path& dir,
                                      std::span<const File> files) {
  PACKREC_RETURN_IF_ERROR(Drain());
  for (const File& file : files) {
    {
      std::lock_guard lock(mutex_);
      if (uploaded_.contains(file.name)) continue;
    }
    const std::string hash = Hex64(file.xxh64);
    PACKREC_ASSIGN_OR_RETURN(const std::optional<ObjectStore::ObjectHead> head,
                             store_->Head(file.name));
    if (head && head->size == file.size_bytes && head->xxh64 == hash) {
      std::lock_guard lock(mutex_);
      ++already_there_;
      continue;
    }
    PACKREC_RETURN_IF_ERROR(store_->PutFile(file.name, dir / file.name, hash));
    std::lock_guard lock(mutex_);
    uploaded_.insert(file.name);
  }
  return Status::OK();
}

std::uint64_t DatasetUploader::files_uploaded() const {
  std::lock_guard lock(mutex_);
  return uploaded_.size();
}

std::uint64_t DatasetUploader::files_already_there() const {
  std::lock_guard lock(mutex_);
  return already_there_;
}

}  // namespace packrec
