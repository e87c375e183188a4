// Emulated storage (packrec/storage_emulation.h): a loop device holding an ext4 image of the
// data, read through the block I/O controller's throttle. The loop device, the mount and the
// cgroup are set up with the kernel's own interfaces (ioctl, mount(2), cgroupfs files); the
// filesystem is made by mkfs.ext4 (e2fsprogs), not by hand.
#include "packrec/storage_emulation.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bench/bench_internal.h"
#include "core/file_io.h"

extern char** environ;

namespace packrec {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kCgroupPrefix = "packrec-bench-";
constexpr std::string_view kMountPrefix = "packrec-storage-";

// ---- profiles -------------------------------------------------------------------------------

// Parses "200MB", "1.5GiB/s", "3000", "3k" into a count; `bytes` allows the B and /s decorations.
// Hand-written: the library does not link CLI11, whose AsSizeValue the CLI's size flags use, and a
// profile is parsed by the library (the CLI and Python pass the text through).
std::optional<std::uint64_t> ParseQuantity(std::string_view text, bool bytes) {
  if (text.ends_with("/s")) text.remove_suffix(2);
  if (bytes && text.ends_with('B')) text.remove_suffix(1);
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || !(value > 0)) return std::nullopt;
  const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"", 1},    {"k", 1e3},     {"K", 1e3},        {"M", 1e6},
      {"G", 1e9}, {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) {
      const double result = std::round(value * scale);
      if (result < 1 || result > 1e15) return std::nullopt;
      return static_cast<std::uint64_t>(result);
    }
  }
  return std::nullopt;
}

std::string ProfileNames() {
  std::string names;
  for (const StorageProfile& profile : BuiltinStorageProfiles()) {
    names += (names.empty() ? "" : ", ") + profile.name;
  }
  return names + ", or bps=SIZE,iops=N";
}

// ---- small file and process helpers -----------------------------------------------------------

Status WriteSmallFile(const fs::path& path, std::string_view text) {
  const ScopedFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("open", path, errno);
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return ErrnoStatus("write '" + std::string(text) + "' to", path, errno);
  }
  return Status::OK();
}

std::string ReadSmallFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path FindProgram(std::string_view name) {
  std::string path = "/usr/sbin:/sbin:/usr/bin:/bin";
  if (const char* env = std::getenv("PATH")) path = std::string(env) + ":" + path;
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir) / name;
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// Runs `argv` to its end, its output to this process's stderr; the exit status or -1.
int RunProgram(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool ProcessRuns(std::string_view pid_text) {
  int pid = 0;
  const auto [end, error] =
      std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
  if (error != std::errc() || end != pid_text.data() + pid_text.size() || pid <= 0) return true;
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

// Removes what a killed emulation left in `dir`: empty cgroups or mount points named
// `prefix`PID of processes that no longer run (rmdir refuses anything still in use).
void RemoveStale(const fs::path& dir, std::string_view prefix) {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(prefix) && !ProcessRuns(std::string_view(name).substr(prefix.size()))) {
      ::rmdir(entry.path().c_str());
    }
  }
}

// ---- the block I/O controller -----------------------------------------------------------------

struct ControllerPlace {
  int version = 0;      // 1 (blkio) or 2 (io); 0: none
  fs::path own_cgroup;  // this process's cgroup in that hierarchy, as a directory
};

// Where this process sits in the hierarchy that has the block I/O controller: cgroup v1's blkio
// where it is mounted (a controller lives in one hierarchy only), else cgroup v2 with `io`.
ControllerPlace FindController() {
  fs::path v1_mount, v2_mount;
  std::ifstream mounts("/proc/self/mountinfo");
  for (std::string line; std::getline(mounts, line);) {
    const std::size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, device, root, mount_point, type, source, options;
    head >> id >> parent >> device >> root >> mount_point;
    tail >> type >> source >> options;
    if (type == "cgroup" && ("," + options + ",").find(",blkio,") != std::string::npos) {
      v1_mount = mount_point;
    } else if (type == "cgroup2" && v2_mount.empty()) {
      v2_mount = mount_point;
    }
  }
  ControllerPlace place;
  std::ifstream groups("/proc/self/cgroup");
  for (std::string line; std::getline(groups, line);) {
    const std::size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = "," + line.substr(first + 1, second - first - 1) + ",";
    const std::string path = line.substr(second + 1);
    if (!v1_mount.empty() && controllers.find(",blkio,") != std::string::npos) {
      return {1, v1_mount / fs::path(path).relative_path()};
    }
    if (controllers == ",," && !v2_mount.empty() && v1_mount.empty()) {
      const fs::path own = v2_mount / fs::path(path).relative_path();
      if (ReadSmallFile(v2_mount / "cgroup.controllers").find("io") != std::string::npos) {
        place = {2, own};
      }
    }
  }
  return place;
}

// ---- the loop device --------------------------------------------------------------------------

// Attaches `image_fd` to a free loop device that detaches itself on its last close. Returns the
// open loop device and its path.
Result<std::pair<int, std::string>> AttachLoop(int image_fd) {
  const ScopedFd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (control.get() < 0) return ErrnoStatus("open", "/dev/loop-control", errno);
  for (int attempt = 0; attempt < 8; ++attempt) {  // another process may take the free one first
    const int number = ::ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (number < 0)
      return ErrnoStatus("find a free loop device through", "/dev/loop-control", errno);
    const std::string path = "/dev/loop" + std::to_string(number);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open", path, errno);
    loop_config config{};
    config.fd = static_cast<std::uint32_t>(image_fd);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    if (::ioctl(fd, LOOP_CONFIGURE, &config) == 0) return std::make_pair(fd, path);
    const int error = errno;
    ::close(fd);
    if (error != EBUSY) return ErrnoStatus("attach the filesystem image to", path, error);
  }
  return Status::IOError("every free loop device was taken by another process; try again");
}

// The image's directory: memory when the image fits in a quarter of what is available there and
// in the machine, else the scratch directory.
std::pair<fs::path, bool> ImageDirectory(const fs::path& scratch_dir, std::uint64_t image_bytes) {
  const std::uint64_t available_memory = bench::MeminfoBytes("MemAvailable");
  struct statvfs shm {};
  if (::statvfs("/dev/shm", &shm) == 0) {
    const std::uint64_t shm_free = std::uint64_t{shm.f_bavail} * shm.f_frsize;
    if (image_bytes <= std::min(shm_free, available_memory) / 4) return {"/dev/shm", true};
  }
  return {scratch_dir.empty() ? bench::DefaultTempDir() : scratch_dir, false};
}

// Bytes and inodes the copies need: each file rounded up to the block, directories one block.
std::pair<std::uint64_t, std::uint64_t> Footprint(const std::vector<fs::path>& inputs) {
  std::uint64_t bytes = 0, entries = 0;
  for (const fs::path& input : inputs) {
    std::error_code error;
    ++entries;
    if (fs::is_regular_file(input, error)) {
      bytes += (fs::file_size(input, error) + 4095) / 4096 * 4096;
      continue;
    }
    for (fs::recursive_directory_iterator it(input, error), end; !error && it != end;
         it.increment(error)) {
      ++entries;
      std::error_code size_error;
      const std::uint64_t size = it->is_regular_file(size_error) ? it->file_size(size_error) : 0;
      bytes += (size + 4095) / 4096 * 4096 + (it->is_directory(size_error) ? 4096 : 0);
    }
  }
  return {bytes, entries};
}

std::string Gib(std::uint64_t bytes) {
  std::ostringstream text;
  text.precision(bytes >= (std::uint64_t{10} << 30) ? 0 : 2);
  text << std::fixed << static_cast<double>(bytes) / 1073741824.0 << " GiB";
  return text.str();
}

}  // namespace

const std::vector<StorageProfile>& BuiltinStorageProfiles() {
  static const std::vector<StorageProfile> profiles = {
      {"hdd", "7,200 rpm SATA hard disk", 180'000'000, 100,
       "datasheets of 7,200 rpm 3.5-inch disks give 160-250 MB/s sustained (outer tracks "
       "fastest); a random read waits an average seek (8.5 ms) and half a rotation (4.2 ms): "
       "about 80 reads/s at depth 1, 100-120 with the disk's command queue"},
      {"sata-ssd", "SATA SSD", 550'000'000, 90'000,
       "SATA III's 6 Gb/s link carries about 550 MB/s; consumer SATA SSD datasheets give "
       "90,000-98,000 random 4 KiB reads/s at depth 32"},
      {"nvme", "PCIe 3.0 x4 NVMe SSD", 3'500'000'000, 500'000,
       "PCIe 3.0 x4 NVMe datasheets give 3,400-3,500 MB/s and 500,000-600,000 random 4 KiB "
       "reads/s at depth 32 (PCIe 4.0 drives double both)"},
      {"cloud-gp3", "AWS EBS gp3 volume at its baseline", 125'000'000, 3'000,
       "AWS documents gp3's baseline as 125 MiB/s and 3,000 IOPS whatever the size (more is "
       "bought separately); its latency (about 1 ms per read) is not modelled"},
  };
  return profiles;
}

namespace {

// One "key=value" part of a profile into `profile`.
Status ApplyProfilePart(const std::string& part, StorageProfile& profile) {
  const std::size_t equals = part.find('=');
  const std::string key = part.substr(0, equals);
  const std::string value = equals == std::string::npos ? "" : part.substr(equals + 1);
  std::uint64_t* target = key == "bps"         ? &profile.read_bytes_per_s
                          : key == "iops"      ? &profile.read_iops
                          : key == "readahead" ? &profile.readahead_bytes
                                               : nullptr;
  if (target == nullptr) {
    return Status::InvalidArgument("storage profile part '" + part +
                                   "': the parts are bps=SIZE, iops=N and readahead=SIZE");
  }
  const bool bytes = key != "iops";
  const std::optional<std::uint64_t> quantity = ParseQuantity(value, bytes);
  if (!quantity) {
    return Status::InvalidArgument(
        "storage profile part '" + part + "': " +
        (bytes ? "a size as 200MB, 1.5GB, 128KiB" : "reads/s as 150 or 3k") + ", more than zero");
  }
  *target = *quantity;
  return Status::OK();
}

}  // namespace

Result<StorageProfile> ParseStorageProfile(std::string_view text) {
  std::stringstream parts{std::string(text)};
  std::string first;
  std::getline(parts, first, ',');
  StorageProfile profile{"custom", "", 0, 0, "given on the command line"};
  bool builtin = false;
  for (const StorageProfile& candidate : BuiltinStorageProfiles()) {
    if (first == candidate.name) {
      profile = candidate;
      builtin = true;
    }
  }
  if (!builtin && first.find('=') == std::string::npos) {
    return Status::InvalidArgument("unknown storage profile '" + first + "': use " +
                                   ProfileNames());
  }
  if (!builtin) PACKREC_RETURN_IF_ERROR(ApplyProfilePart(first, profile));
  for (std::string part; std::getline(parts, part, ',');) {
    PACKREC_RETURN_IF_ERROR(ApplyProfilePart(part, profile));
  }
  if (!builtin) {
    profile.description = "custom device: " +
                          (profile.read_bytes_per_s != 0
                               ? std::to_string(profile.read_bytes_per_s / 1'000'000) + " MB/s"
                               : std::string("bytes/s not capped")) +
                          ", " +
                          (profile.read_iops != 0 ? std::to_string(profile.read_iops) + " reads/s"
                                                  : std::string("reads/s not capped"));
  }
  return profile;
}

// ---- StorageEmulation -------------------------------------------------------------------------

struct StorageEmulation::Cgroup {
  int version = 0;
  fs::path original;  // where the process came from, and goes back to
  fs::path dir;       // the throttled cgroup
  bool entered = false;
};

std::string StorageEmulation::Unavailable() {
  if (::geteuid() != 0) {
    return "emulated storage needs root (loop devices, mounts, cgroups and drop_caches)";
  }
  if (::access("/dev/loop-control", R_OK | W_OK) != 0) {
    return "no loop devices here (/dev/loop-control is missing: the loop module, or a "
           "container without it)";
  }
  if (FindController().version == 0) {
    return "no block I/O controller: neither cgroup v1's blkio nor cgroup v2's io is mounted "
           "and enabled for this process";
  }
  if (FindProgram("mkfs.ext4").empty()) {
    return "mkfs.ext4 is not installed (Debian package e2fsprogs)";
  }
  return "";
}

Result<std::unique_ptr<StorageEmulation>> StorageEmulation::Create(
    const StorageProfile& profile, const std::vector<fs::path>& inputs, const fs::path& scratch_dir,
    std::uint64_t extra_bytes) {
  if (const std::string why = Unavailable(); !why.empty()) return Status::NotSupported(why);
  if (profile.read_bytes_per_s == 0 && profile.read_iops == 0) {
    return Status::InvalidArgument("storage profile '" + profile.name + "' caps nothing");
  }
  std::unique_ptr<StorageEmulation> emulation(new StorageEmulation);
  emulation->profile_ = profile;
  const auto [data_bytes, entries] = Footprint(inputs);
  // ext4 keeps about 5% for root and its metadata (inode tables, journal) beside the data.
  const std::uint64_t image_bytes =
      (data_bytes + extra_bytes) / 100 * 115 + entries * 512 + (std::uint64_t{256} << 20);
  const auto [image_dir, in_memory] = ImageDirectory(scratch_dir, image_bytes);
  emulation->image_in_memory_ = in_memory;
  emulation->image_bytes_ = image_bytes;
  PACKREC_RETURN_IF_ERROR(
      emulation->SetUpDevice(image_dir, image_bytes, entries + entries / 5 + 1024));
  PACKREC_RETURN_IF_ERROR(emulation->CopyInputs(inputs));
  // The throttle last: copying the data in is not what is measured.
  const ControllerPlace place = FindController();
  RemoveStale(place.own_cgroup, kCgroupPrefix);
  auto cgroup = std::make_unique<Cgroup>();
  cgroup->version = place.version;
  cgroup->original = place.own_cgroup;
  cgroup->dir = place.own_cgroup / (std::string(kCgroupPrefix) + std::to_string(::getpid()));
  emulation->cgroup_ = std::move(cgroup);
  PACKREC_RETURN_IF_ERROR(emulation->EnterCgroup());
  return emulation;
}

Status StorageEmulation::SetUpDevice(const fs::path& image_dir, std::uint64_t image_bytes,
                                     std::uint64_t inodes) {
  // A mount namespace of our own: the kernel unmounts the filesystem when this process ends,
  // however it ends. The kernel refuses it to a process with several threads; the destructor then
  // does the unmounting.
  if (::unshare(CLONE_NEWNS) == 0 &&
      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) {
    own_mount_namespace_ = true;
  }
  std::string image_template = (image_dir / "packrec-storage-image-XXXXXX").string();
  const ScopedFd image(::mkostemp(image_template.data(), O_CLOEXEC));
  if (image.get() < 0) return ErrnoStatus("create a filesystem image in", image_dir, errno);
  // Unlinked at once: the loop device keeps it alive, nothing stays behind once it detaches.
  ::unlink(image_template.c_str());
  if (::ftruncate(image.get(), static_cast<off_t>(image_bytes)) != 0) {
    return ErrnoStatus("size the filesystem image (" + Gib(image_bytes) + ") in", image_dir, errno);
  }
  PACKREC_ASSIGN_OR_RETURN(const auto loop, AttachLoop(image.get()));
  loop_fd_ = loop.first;
  loop_device_ = loop.second;
  struct stat device {};
  if (::fstat(loop_fd_, &device) != 0) return ErrnoStatus("stat", loop_device_, errno);
  device_major_ = major(device.st_rdev);
  device_minor_ = minor(device.st_rdev);
  const int mkfs =
      RunProgram({FindProgram("mkfs.ext4").string(), "-q", "-F", "-N", std::to_string(inodes), "-E",
                  "lazy_itable_init=0,lazy_journal_init=0", loop_device_});
  if (mkfs != 0) {
    return Status::IOError("mkfs.ext4 on " + loop_device_ + " failed (exit status " +
                           std::to_string(mkfs) + ")")
        .WithPath(loop_device_);
  }
  PACKREC_RETURN_IF_ERROR(SetReadahead());
  const fs::path mount_parent = bench::DefaultTempDir();
  RemoveStale(mount_parent, kMountPrefix);
  mount_point_ = mount_parent / (std::string(kMountPrefix) + std::to_string(::getpid()));
  if (::mkdir(mount_point_.c_str(), 0700) != 0) {
    const fs::path failed = std::exchange(mount_point_, {});
    return ErrnoStatus("create the mount point", failed, errno);
  }
  // ext4 reads inode tables ahead as 32 separate 4 KiB requests, which a disk's I/O scheduler
  // merges into one but the throttle, above the scheduler, counts as 32 reads: 33 device reads a
  // file at random over 20,000 loose files, where a disk seeks once (measured). Without that
  // readahead an inode table block missed is one read, as one seek on the disk.
  // noatime: the copies are new, so relatime would write each file's access time on its first
  // read, a journal write per file that a dataset of some age does not pay.
  if (::mount(loop_device_.c_str(), mount_point_.c_str(), "ext4", MS_NOATIME,
              "inode_readahead_blks=0") != 0) {
    return ErrnoStatus("mount " + loop_device_ + " (ext4) on", mount_point_, errno);
  }
  mounted_ = true;
  return Status::OK();
}

// The throttle counts every request against the reads/s cap, a sequential stream's too, where a
// real disk pays no seek for them. The kernel's default 128 KiB readahead would then hold the hdd
// profile's sequential reads to 26 MB/s (measured); readahead of bytes/s over reads/s (unless the
// profile sets it) makes sequential requests as large as the block layer lets them be (up to
// 1 MiB: 105 MB/s at 100 reads/s, docs/bench.md). The price: a page fault in a memory mapping
// reads that much around it too, as it would on a real disk set up so (blockdev --setra).
Status StorageEmulation::SetReadahead() {
  readahead_kib_ = 128;
  if (profile_.readahead_bytes != 0) {
    readahead_kib_ = std::max<std::uint64_t>(profile_.readahead_bytes / 1024, 4);
  } else if (profile_.read_iops != 0 && profile_.read_bytes_per_s != 0) {
    const std::uint64_t per_read_kib = profile_.read_bytes_per_s / profile_.read_iops / 1024;
    readahead_kib_ = std::clamp<std::uint64_t>((per_read_kib + 127) / 128 * 128, 128, 8192);
  }
  const fs::path knob =
      "/sys/block/" + fs::path(loop_device_).filename().string() + "/queue/read_ahead_kb";
  return WriteSmallFile(knob, std::to_string(readahead_kib_));
}

Status StorageEmulation::CopyInputs(const std::vector<fs::path>& inputs) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    fs::path name =
        inputs[i].filename().empty() ? inputs[i].parent_path().filename() : inputs[i].filename();
    for (const fs::path& copy : copies_) {
      if (copy.filename() == name) name = std::to_string(i) + "-" + name.string();
    }
    const fs::path copy = mount_point_ / name;
    std::error_code error;
    fs::copy(inputs[i], copy, fs::copy_options::recursive, error);
    if (error) {
      return Status::IOError("copy " + inputs[i].string() +
                             " onto the emulated device: " + error.message())
          .WithPath(copy);
    }
    copies_.push_back(copy);
  }
  // Written back now, so that evicting the copies leaves nothing dirty behind.
  const ScopedFd root(::open(mount_point_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0 || ::syncfs(root.get()) != 0) {
    return ErrnoStatus("write back", mount_point_, errno);
  }
  return Status::OK();
}

// The profile's limits into the cgroup. Writing them also starts the throttle's accounting
// afresh (a new time slice), which DropMetadataCaches relies on.
Status StorageEmulation::WriteLimits() const {
  const Cgroup& group = *cgroup_;
  const std::string device = std::to_string(device_major_) + ":" + std::to_string(device_minor_);
  if (group.version == 1) {
    if (profile_.read_bytes_per_s != 0) {
      PACKREC_RETURN_IF_ERROR(
          WriteSmallFile(group.dir / "blkio.throttle.read_bps_device",
                         device + " " + std::to_string(profile_.read_bytes_per_s)));
    }
    if (profile_.read_iops != 0) {
      PACKREC_RETURN_IF_ERROR(WriteSmallFile(group.dir / "blkio.throttle.read_iops_device",
                                             device + " " + std::to_string(profile_.read_iops)));
    }
  } else {
    const auto limit = [](std::uint64_t value) {
      return value != 0 ? std::to_string(value) : std::string("max");
    };
    PACKREC_RETURN_IF_ERROR(
        WriteSmallFile(group.dir / "io.max", device + " rbps=" + limit(profile_.read_bytes_per_s) +
                                                 " riops=" + limit(profile_.read_iops)));
  }
  return Status::OK();
}

Status StorageEmulation::EnterCgroup() {
  Cgroup& group = *cgroup_;
  if (group.version == 2) {
    // The parent must hand the io controller down; the kernel refuses that to a cgroup with
    // processes of its own (other than the root), which is then said as it is.
    const fs::path control = group.original / "cgroup.subtree_control";
    if (ReadSmallFile(control).find("io") == std::string::npos) {
      PACKREC_RETURN_IF_ERROR(WriteSmallFile(control, "+io"));
    }
  }
  if (::mkdir(group.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("create the cgroup", group.dir, errno);
  }
  PACKREC_RETURN_IF_ERROR(WriteLimits());
  PACKREC_RETURN_IF_ERROR(WriteSmallFile(group.dir / "cgroup.procs", std::to_string(::getpid())));
  group.entered = true;
  return Status::OK();
}

void StorageEmulation::TearDown() {
  if (cgroup_ != nullptr) {
    if (cgroup_->entered) {
      (void)WriteSmallFile(cgroup_->original / "cgroup.procs", std::to_string(::getpid()));
    }
    ::rmdir(cgroup_->dir.c_str());
    cgroup_.reset();
  }
  if (mounted_ && ::umount2(mount_point_.c_str(), 0) != 0) {
    ::umount2(mount_point_.c_str(), MNT_DETACH);  // busy: gone once the last user lets go
  }
  mounted_ = false;
  if (!mount_point_.empty()) ::rmdir(mount_point_.c_str());
  if (loop_fd_ >= 0) ::close(loop_fd_);  // LO_FLAGS_AUTOCLEAR: the device detaches itself
  loop_fd_ = -1;
}

StorageEmulation::~StorageEmulation() { TearDown(); }

std::string StorageEmulation::Describe() const {
  return loop_device_ + " (ext4 on a " + Gib(image_bytes_) + " image " +
         (image_in_memory_ ? "in memory" : "on this machine's disk") + ", readahead " +
         std::to_string(readahead_kib_) + " KiB), reads capped by " +
         (cgroup_ != nullptr && cgroup_->version == 2 ? "cgroup v2 io.max"
                                                      : "cgroup v1 blkio.throttle");
}

Status StorageEmulation::DropMetadataCaches() const {
  PACKREC_RETURN_IF_ERROR(WriteSmallFile("/proc/sys/vm/drop_caches", "2"));
  if (::ioctl(loop_fd_, BLKFLSBUF, 0) != 0) {
    return ErrnoStatus("flush the buffers of", loop_device_, errno);
  }
  // The throttle's accounting can carry a debt from the previous measurement's bursts, which
  // made each read of the next one wait out a whole 100 ms slice (10 reads/s on a 100 reads/s
  // profile, seen): a measurement starts from a fresh slice.
  return cgroup_ != nullptr ? WriteLimits() : Status::OK();
}

Result<DeviceReads> StorageEmulation::Reads() const {
  const std::string device = std::to_string(device_major_) + ":" + std::to_string(device_minor_);
  DeviceReads reads;
  if (cgroup_ == nullptr) return reads;
  if (cgroup_->version == 1) {
    // Lines "MAJ:MIN Read N" in the two counters.
    for (const auto& [file, target] :
         {std::pair{"blkio.throttle.io_serviced", &reads.requests},
          std::pair{"blkio.throttle.io_service_bytes", &reads.bytes}}) {
      std::istringstream lines(ReadSmallFile(cgroup_->dir / file));
      for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        std::string who, what;
        std::uint64_t value = 0;
        if (fields >> who >> what >> value && who == device && what == "Read") *target = value;
      }
    }
    return reads;
  }
  // io.stat: "MAJ:MIN rbytes=N wbytes=N rios=N wios=N ..."
  std::istringstream lines(ReadSmallFile(cgroup_->dir / "io.stat"));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string who, field;
    if (!(fields >> who) || who != device) continue;
    while (fields >> field) {
      if (field.starts_with("rbytes=")) reads.bytes = std::stoull(field.substr(7));
      if (field.starts_with("rios=")) reads.requests = std::stoull(field.substr(5));
    }
  }
  return reads;
}

}  // namespace packrec
