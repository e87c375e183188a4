// Storage the user does not own, emulated: `packrec bench --storage hdd` measures the user's own
// data and CPU as if the data sat on a 7,200 rpm disk, a SATA SSD, an NVMe drive or a cloud
// volume. The data is copied onto a new ext4 filesystem on a loop device, and this process's reads
// from that device are capped by the kernel's block I/O controller (cgroup v1
// blkio.throttle.read_bps_device / read_iops_device, or cgroup v2 io.max) at the profile's bytes/s
// and reads/s.
//
// What it models: a device's sequential bandwidth and its random-read rate, and through them the
// difference between many small files (several reads each: the file's data, its inode, its
// directory) and a few large ones. What it does not model: latency per request below the cap (a
// real disk at depth 1 waits a seek and half a rotation per read, the cap lets reads pass at once
// while under it), the gain of a real disk's command queue at depth (NCQ gets an HDD 20-50% more
// random reads/s at depth 32; here depth buys nothing once the cap is reached), the drive's own
// cache, and writes (only reads are capped). The throttle also counts a sequential stream's
// requests against the reads/s cap, where a real disk pays no seek for them: the emulated device's
// readahead is raised to make them large, and still a profile whose bytes/s exceed 1 MiB times
// its reads/s (hdd: 180 MB/s, 100 reads/s) streams at that product (105 MB/s) at most.
// docs/bench.md gives the details.
//
// Root only: loop devices, mounts, cgroups and /proc/sys/vm/drop_caches need it.
//
// What stays after a failure: nothing on disk. The filesystem image is unlinked as soon as the
// loop device holds it, the loop device detaches itself when its filesystem is unmounted
// (LO_FLAGS_AUTOCLEAR), and the mount lives in a mount namespace of this process's own, which the
// kernel tears down when the process ends, however it ends (kill -9 included). Only two empty
// directories can outlive a killed process, the cgroup (packrec-bench-PID) and the mount point
// ($TMPDIR/packrec-storage-PID); the next emulation removes those of processes no longer running.
//
// Threading: Create moves the whole process into the throttled cgroup and, where it can, into its
// own mount namespace (which the kernel allows only while the process has one thread: create the
// emulation before starting threads). The object's methods may be called from any thread.
#ifndef PACKREC_STORAGE_EMULATION_H_
#define PACKREC_STORAGE_EMULATION_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "packrec/status.h"

namespace packrec {

// A device's read limits, from published figures (BuiltinStorageProfiles says whose).
struct StorageProfile {
  std::string name;  // "hdd", "sata-ssd", "nvme", "cloud-gp3", or "custom"
  std::string description;
  std::uint64_t read_bytes_per_s = 0;
  std::uint64_t read_iops = 0;
  std::string source;  // where the figures come from
  // The emulated device's readahead; 0: bytes/s over reads/s, at least 128 KiB (see below).
  std::uint64_t readahead_bytes = 0;
};

// hdd, sata-ssd, nvme, cloud-gp3.
const std::vector<StorageProfile>& BuiltinStorageProfiles();

// A built-in profile's name, or a custom device: "bps=200MB,iops=150" (bytes/s with the suffixes
// k, M, G (powers of 1000) or KiB, MiB, GiB (powers of 1024), an optional B and /s; reads/s as a
// number, k for thousands), either followed by overrides: "hdd,readahead=128KiB,iops=80".
// Errors: InvalidArgument naming the part that is wrong and the profiles there are.
Result<StorageProfile> ParseStorageProfile(std::string_view text);

// Reads this process sent to the emulated device so far, as the block I/O controller counts them
// (after the page cache and readahead: what reaches the device).
struct DeviceReads {
  std::uint64_t requests = 0;
  std::uint64_t bytes = 0;
};

class StorageEmulation {
 public:
  // Why emulation cannot run here (not root, no loop devices, no block I/O controller, no
  // mkfs.ext4), or empty.
  static std::string Unavailable();

  // Copies `inputs` (image folders, dataset directories or files) onto a new emulated device and
  // throttles this process's reads from it. The filesystem image is kept in memory (/dev/shm)
  // when it fits in a quarter of the available memory, else in `scratch_dir` (or $TMPDIR, /tmp).
  // `extra_bytes`: room for what the caller writes there (the bench's probe file). Errors:
  // NotSupported with Unavailable()'s reason; IOError naming the step (loop device, mkfs.ext4,
  // mount, cgroup file) and the path; anything done before the error is undone.
  static Result<std::unique_ptr<StorageEmulation>> Create(
      const StorageProfile& profile, const std::vector<std::filesystem::path>& inputs,
      const std::filesystem::path& scratch_dir, std::uint64_t extra_bytes);

  // Moves the process back to its cgroup, unmounts the filesystem and detaches the loop device.
  ~StorageEmulation();
  StorageEmulation(const StorageEmulation&) = delete;
  StorageEmulation& operator=(const StorageEmulation&) = delete;

  const StorageProfile& profile() const { return profile_; }
  // The inputs' copies on the emulated device, in the order given to Create.
  const std::vector<std::filesystem::path>& inputs() const { return copies_; }
  // The emulated filesystem's mount point (writable: put scratch files there).
  const std::filesystem::path& mount_point() const { return mount_point_; }
  // "/dev/loop0 (ext4, 1.2 GiB image in memory), cgroup v1 blkio throttle"
  std::string Describe() const;
  // Whether the image is held in memory (then the cap, not the machine's disk, bounds reads).
  bool image_in_memory() const { return image_in_memory_; }

  // Drops what evicting the data's own pages cannot reach: the filesystem's metadata (inodes,
  // directories, the device's buffer cache). Writes 2 to /proc/sys/vm/drop_caches (unused dentries
  // and inodes, machine-wide; no file data) and flushes the loop device's buffers (BLKFLSBUF).
  // Also restarts the throttle's accounting: call it before each cold measurement.
  Status DropMetadataCaches() const;
  // This process's reads from the device so far (see DeviceReads).
  Result<DeviceReads> Reads() const;

 private:
  StorageEmulation() = default;
  struct Cgroup;
  Status SetUpDevice(const std::filesystem::path& image_dir, std::uint64_t image_bytes,
                     std::uint64_t inodes);
  Status CopyInputs(const std::vector<std::filesystem::path>& inputs);
  Status EnterCgroup();
  Status WriteLimits() const;
  Status SetReadahead();
  void TearDown();

  StorageProfile profile_;
  std::vector<std::filesystem::path> copies_;
  std::filesystem::path mount_point_;
  std::string loop_device_;
  std::uint32_t device_major_ = 0;
  std::uint32_t device_minor_ = 0;
  int loop_fd_ = -1;
  bool mounted_ = false;
  bool own_mount_namespace_ = false;
  bool image_in_memory_ = false;
  std::uint64_t image_bytes_ = 0;
  std::uint64_t readahead_kib_ = 128;
  std::unique_ptr<Cgroup> cgroup_;
};

}  // namespace packrec

#endif  // PACKREC_STORAGE_EMULATION_H_
