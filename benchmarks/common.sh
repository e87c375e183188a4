# Shell helpers the benchmark scripts share; sourced (`source "$(dirname "$0")/common.sh"`), not run.

# The median of the numbers on standard input, one a line.
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# Drops the given files' pages from the page cache (after a sync, POSIX_FADV_DONTNEED), so the next
# read of them comes from the storage: a cold read without root's drop_caches.
evict() {
  sync
  /usr/bin/python3 -c '
import os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
' "$@"
}
