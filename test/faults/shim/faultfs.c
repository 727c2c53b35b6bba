/*
 * faultfs: an LD_PRELOAD library for paypolicy's fault tests (test/faults/). Compiled by the test
 * setup with the machine's C compiler; nothing prebuilt is committed.
 *
 * It interposes libc's write family, fsync/fdatasync, ftruncate, unlink and the wall clock, and
 * acts only on regular files under FAULTFS_DIR (the data directory) except the mmap'd -shm.
 *
 * Environment:
 *   FAULTFS_DIR    absolute directory whose files are tracked and faulted
 *   FAULTFS_STATE  directory for undo logs; when set, every write to a tracked file first saves
 *                  the bytes it overwrites (and the size before) to <state>/<n>.undo, and a
 *                  successful fsync/fdatasync forgets them. After kill -9, undoing what is left
 *                  (test/faults/harness.ts powerCut) leaves exactly the synced content: a power cut.
 *                  <state>/index lists "<n>\t<path>" per tracked file. Records are four u64:
 *                  offset, saved length, size before, written length; then the saved bytes.
 *                  A successful sync also appends to <n>.synced the (offset, written length) of
 *                  every record it covered, then (UINT64_MAX, file size): a later process's synced
 *                  bytes survive the roll-back of an earlier process's unsynced writes (a restart
 *                  in the same boot after a failed sync, when the page cache still shows them).
 *   FAULTFS_CTL    control file of key=value lines, re-read when it changes (atomic rename):
 *                    fsync=ok|eio|noop     eio: fail with EIO (nothing forgotten); noop: return 0
 *                                          without syncing (positive control: nothing is durable)
 *                    fsync_match=SUFFIX    eio/noop only for paths ending with SUFFIX (e.g. -wal)
 *                    fsync_delay_ms=N      sleep before every sync of a tracked file
 *                    fsync_delay_match=SUFFIX  only before syncs of paths ending with SUFFIX
 *                    write=ok|enospc|erofs|eio   fail writes and truncates of tracked files
 *                    write_match=SUFFIX    only of paths ending with SUFFIX (e.g. -wal)
 *                                          (with enospc, statfs of FAULTFS_DIR reports no free space)
 *                    clock_shift_ms=N      add N (may be negative) to CLOCK_REALTIME,
 *                                          gettimeofday and time
 *
 * Limits: file creation, unlink and rename count as durable at once (directory entries are not
 * rolled back); O_TRUNC at open is not undone; mmap writes are not seen (SQLite mmaps only -shm,
 * which it rebuilds from the WAL after a crash).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_clock_gettime)(clockid_t, struct timespec *);
static int (*real_gettimeofday)(struct timeval *, void *);
static time_t (*real_time)(time_t *);
static int (*real_statfs)(const char *, struct statfs *);
static int (*real_statfs64)(const char *, struct statfs64 *);

static void resolve(void) {
  if (real_write) return;
  real_pwrite = dlsym(RTLD_NEXT, "pwrite");
  real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
  real_writev = dlsym(RTLD_NEXT, "writev");
  real_pwritev = dlsym(RTLD_NEXT, "pwritev");
  real_pwritev64 = dlsym(RTLD_NEXT, "pwritev64");
  real_fsync = dlsym(RTLD_NEXT, "fsync");
  real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
  real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
  real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
  real_unlink = dlsym(RTLD_NEXT, "unlink");
  real_unlinkat = dlsym(RTLD_NEXT, "unlinkat");
  real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
  real_gettimeofday = dlsym(RTLD_NEXT, "gettimeofday");
  real_time = dlsym(RTLD_NEXT, "time");
  real_statfs = dlsym(RTLD_NEXT, "statfs");
  real_statfs64 = dlsym(RTLD_NEXT, "statfs64");
  __atomic_store_n(&real_write, (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write"), __ATOMIC_RELEASE);
}

/* ---- control file ---- */

enum { MODE_OK, MODE_EIO, MODE_NOOP };
static struct {
  int fsync_mode;
  char fsync_match[64];
  long fsync_delay_ms;
  char fsync_delay_match[64];
  int write_errno; /* 0: writes pass */
  char write_match[64];
  long long clock_shift_ms;
} ctl;
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct timespec ctl_checked;
static struct stat ctl_stat;

static void parse_ctl(const char *text) {
  ctl.fsync_mode = MODE_OK;
  ctl.fsync_match[0] = 0;
  ctl.fsync_delay_ms = 0;
  ctl.fsync_delay_match[0] = 0;
  ctl.write_errno = 0;
  ctl.write_match[0] = 0;
  long long shift = 0;
  const char *line = text;
  while (*line) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char buf[160];
    if (len < sizeof buf) {
      memcpy(buf, line, len);
      buf[len] = 0;
      char *eq = strchr(buf, '=');
      if (eq) {
        *eq = 0;
        const char *k = buf, *v = eq + 1;
        if (!strcmp(k, "fsync")) ctl.fsync_mode = !strcmp(v, "eio") ? MODE_EIO : !strcmp(v, "noop") ? MODE_NOOP : MODE_OK;
        else if (!strcmp(k, "fsync_match")) snprintf(ctl.fsync_match, sizeof ctl.fsync_match, "%s", v);
        else if (!strcmp(k, "fsync_delay_ms")) ctl.fsync_delay_ms = atol(v);
        else if (!strcmp(k, "fsync_delay_match")) snprintf(ctl.fsync_delay_match, sizeof ctl.fsync_delay_match, "%s", v);
        else if (!strcmp(k, "write_match")) snprintf(ctl.write_match, sizeof ctl.write_match, "%s", v);
        else if (!strcmp(k, "write")) ctl.write_errno = !strcmp(v, "enospc") ? ENOSPC : !strcmp(v, "erofs") ? EROFS : !strcmp(v, "eio") ? EIO : 0;
        else if (!strcmp(k, "clock_shift_ms")) shift = atoll(v);
      }
    }
    line += len;
    if (*line == '\n') line++;
  }
  __atomic_store_n(&ctl.clock_shift_ms, shift, __ATOMIC_RELAXED);
}

/* Re-reads FAULTFS_CTL at most once a millisecond, and only when its inode, size or mtime moved. */
static void refresh_ctl(void) {
  resolve();
  const char *path = getenv("FAULTFS_CTL");
  if (!path) return;
  struct timespec now;
  real_clock_gettime(CLOCK_MONOTONIC, &now);
  if (pthread_mutex_trylock(&ctl_lock) != 0) return;
  long long elapsed_ns = (now.tv_sec - ctl_checked.tv_sec) * 1000000000LL + (now.tv_nsec - ctl_checked.tv_nsec);
  if (ctl_checked.tv_sec == 0 || elapsed_ns >= 1000000) {
    ctl_checked = now;
    struct stat st;
    if (stat(path, &st) == 0 &&
        (st.st_ino != ctl_stat.st_ino || st.st_size != ctl_stat.st_size || st.st_mtim.tv_sec != ctl_stat.st_mtim.tv_sec ||
         st.st_mtim.tv_nsec != ctl_stat.st_mtim.tv_nsec)) {
      char text[2048];
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        ssize_t n = pread(fd, text, sizeof text - 1, 0);
        close(fd);
        if (n >= 0) {
          text[n] = 0;
          parse_ctl(text);
          ctl_stat = st;
        }
      }
    }
  }
  pthread_mutex_unlock(&ctl_lock);
}

/* ---- tracked files ---- */

typedef struct {
  dev_t dev;
  ino_t ino;
  int tracked;
  int undo_fd; /* -1 when no FAULTFS_STATE */
  int synced_fd;
  char path[PATH_MAX];
} entry_t;

#define MAX_ENTRIES 4096
static entry_t entries[MAX_ENTRIES];
static int n_entries;
static int next_undo = 0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* Caller holds `lock`. The entry for fd's file, or NULL when fd is not a tracked regular file. */
static entry_t *entry_for(int fd, struct stat *st) {
  const char *dir = getenv("FAULTFS_DIR");
  if (!dir || fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) return NULL;
  for (int i = 0; i < n_entries; i++)
    if (entries[i].dev == st->st_dev && entries[i].ino == st->st_ino) return entries[i].tracked ? &entries[i] : NULL;
  if (n_entries == MAX_ENTRIES) return NULL;
  entry_t *e = &entries[n_entries++];
  e->dev = st->st_dev;
  e->ino = st->st_ino;
  e->tracked = 0;
  e->undo_fd = -1;
  e->synced_fd = -1;
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, e->path, sizeof e->path - 1);
  if (n < 0) return NULL;
  e->path[n] = 0;
  size_t dl = strlen(dir);
  if (strncmp(e->path, dir, dl) != 0 || e->path[dl] != '/' || ends_with(e->path, "-shm")) return NULL;
  e->tracked = 1;
  const char *state = getenv("FAULTFS_STATE");
  if (state) {
    char name[PATH_MAX];
    int id = next_undo++;
    snprintf(name, sizeof name, "%s/%d.%d.undo", state, (int)getpid(), id);
    e->undo_fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    snprintf(name, sizeof name, "%s/%d.%d.synced", state, (int)getpid(), id);
    e->synced_fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    char line[PATH_MAX + 64];
    int len = snprintf(line, sizeof line, "%d.%d\t%s\n", (int)getpid(), id, e->path);
    snprintf(name, sizeof name, "%s/index", state);
    int ix = open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (ix >= 0) {
      real_write(ix, line, (size_t)len);
      close(ix);
    }
  }
  return e;
}

/* Caller holds `lock`. Saves [off, off+len) as it is now, and the size, before it is overwritten. */
static void save_undo(entry_t *e, int fd, off_t size, off_t off, size_t len) {
  if (e->undo_fd < 0) return;
  size_t old = off < size ? (size_t)(size - off < (off_t)len ? size - off : (off_t)len) : 0;
  uint64_t hdr[4] = {(uint64_t)off, (uint64_t)old, (uint64_t)size, (uint64_t)len};
  char *buf = old ? malloc(old) : NULL;
  if (old && (!buf || pread(fd, buf, old, off) != (ssize_t)old)) {
    /* Cannot save what would be lost: refuse to lose it silently (no stdio: write() is ours). */
    static const char msg[] = "faultfs: cannot save undo data\n";
    real_write(2, msg, sizeof msg - 1);
    abort();
  }
  real_write(e->undo_fd, hdr, sizeof hdr);
  if (old) real_write(e->undo_fd, buf, old);
  free(buf);
}

/*
 * Common path of every write: returns 1 when the write must fail with *err, else 0 with the undo
 * record written and `lock` HELD (the caller does the real write, then unlocks), or 0 with the
 * lock released for untracked fds (*held = 0).
 */
static int write_fails(const entry_t *e) {
  return ctl.write_errno && (!ctl.write_match[0] || ends_with(e->path, ctl.write_match));
}

static int before_write(int fd, off_t off, int use_cursor, size_t len, int *err, int *held) {
  *held = 0;
  resolve();
  refresh_ctl();
  pthread_mutex_lock(&lock);
  struct stat st;
  entry_t *e = entry_for(fd, &st);
  if (!e) {
    pthread_mutex_unlock(&lock);
    return 0;
  }
  if (write_fails(e)) {
    *err = ctl.write_errno;
    pthread_mutex_unlock(&lock);
    return 1;
  }
  if (use_cursor) {
    int flags = fcntl(fd, F_GETFL);
    off = (flags >= 0 && (flags & O_APPEND)) ? st.st_size : lseek(fd, 0, SEEK_CUR);
  }
  save_undo(e, fd, st.st_size, off, len);
  *held = 1;
  return 0;
}

static size_t iov_len(const struct iovec *iov, int n) {
  size_t t = 0;
  for (int i = 0; i < n; i++) t += iov[i].iov_len;
  return t;
}

#define WRAP_WRITE(call, off, use_cursor, len)        \
  int err = 0, held = 0;                              \
  if (before_write(fd, off, use_cursor, len, &err, &held)) { \
    errno = err;                                      \
    return -1;                                        \
  }                                                   \
  ssize_t rc = call;                                  \
  int saved = errno;                                  \
  if (held) pthread_mutex_unlock(&lock);              \
  errno = saved;                                      \
  return rc;

ssize_t write(int fd, const void *buf, size_t n) { WRAP_WRITE(real_write(fd, buf, n), 0, 1, n) }
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { WRAP_WRITE(real_pwrite(fd, buf, n, off), off, 0, n) }
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) { WRAP_WRITE(real_pwrite64(fd, buf, n, off), off, 0, n) }
ssize_t writev(int fd, const struct iovec *iov, int cnt) { WRAP_WRITE(real_writev(fd, iov, cnt), 0, 1, iov_len(iov, cnt)) }
ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) { WRAP_WRITE(real_pwritev(fd, iov, cnt, off), off, 0, iov_len(iov, cnt)) }
ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off) { WRAP_WRITE(real_pwritev64(fd, iov, cnt, off), off, 0, iov_len(iov, cnt)) }

static int do_truncate(int (*real)(int, off_t), int fd, off_t len) {
  resolve();
  refresh_ctl();
  pthread_mutex_lock(&lock);
  struct stat st;
  entry_t *e = entry_for(fd, &st);
  if (e && write_fails(e)) {
    pthread_mutex_unlock(&lock);
    errno = ctl.write_errno;
    return -1;
  }
  if (e) save_undo(e, fd, st.st_size, len < st.st_size ? len : st.st_size, len < st.st_size ? (size_t)(st.st_size - len) : 0);
  int rc = real(fd, len);
  int saved = errno;
  pthread_mutex_unlock(&lock);
  errno = saved;
  return rc;
}
int ftruncate(int fd, off_t len) { return do_truncate(real_ftruncate ? real_ftruncate : (resolve(), real_ftruncate), fd, len); }
int ftruncate64(int fd, off_t len) { return do_truncate(real_ftruncate64 ? real_ftruncate64 : (resolve(), real_ftruncate64), fd, len); }

/* Caller holds `lock`. Appends the ranges of the undo records in [0, covered) and the file size
 * to the entry's .synced log. */
static void note_synced(entry_t *e, int fd, off_t covered) {
  if (e->synced_fd < 0) return;
  char *buf = malloc((size_t)covered);
  char name[64];
  snprintf(name, sizeof name, "/proc/self/fd/%d", e->undo_fd);
  int rfd = open(name, O_RDONLY | O_CLOEXEC);
  if (!buf || rfd < 0) abort();
  /* A sync on another thread may have dropped records meanwhile: it noted them itself. */
  ssize_t got = pread(rfd, buf, (size_t)covered, 0);
  close(rfd);
  if (got > 0) covered = got;
  else covered = 0;
  for (off_t at = 0; at + 32 <= covered;) {
    uint64_t hdr[4];
    memcpy(hdr, buf + at, sizeof hdr);
    if (at + 32 + (off_t)hdr[1] > covered) break;
    uint64_t range[2] = {hdr[0], hdr[3]};
    real_write(e->synced_fd, range, sizeof range);
    at += 32 + (off_t)hdr[1];
  }
  free(buf);
  struct stat st;
  if (fstat(fd, &st) == 0) {
    uint64_t mark[2] = {UINT64_MAX, (uint64_t)st.st_size};
    real_write(e->synced_fd, mark, sizeof mark);
  }
}

static int do_sync(int (*real)(int), int fd) {
  resolve();
  refresh_ctl();
  pthread_mutex_lock(&lock);
  struct stat st;
  entry_t *e = entry_for(fd, &st);
  off_t before = -1;
  if (e && e->undo_fd >= 0) before = lseek(e->undo_fd, 0, SEEK_END);
  int mode = e ? ctl.fsync_mode : MODE_OK;
  if (e && ctl.fsync_match[0] && !ends_with(e->path, ctl.fsync_match)) mode = MODE_OK;
  long delay = e && (!ctl.fsync_delay_match[0] || ends_with(e->path, ctl.fsync_delay_match)) ? ctl.fsync_delay_ms : 0;
  pthread_mutex_unlock(&lock);
  if (delay > 0) usleep((useconds_t)delay * 1000);
  if (mode == MODE_EIO) {
    errno = EIO;
    return -1;
  }
  if (mode == MODE_NOOP) return 0;
  int rc = real(fd);
  if (rc != 0 || !e) return rc;
  int saved = errno;
  pthread_mutex_lock(&lock);
  /* Found again: the table may have moved while unlocked. */
  e = entry_for(fd, &st);
  if (!e || e->undo_fd < 0) {
    pthread_mutex_unlock(&lock);
    errno = saved;
    return rc;
  }
  /* Records appended while the sync ran may not be covered by it: keep them. */
  off_t after = lseek(e->undo_fd, 0, SEEK_END);
  if (before > 0) note_synced(e, fd, before);
  if (after > before && before >= 0) {
    size_t tail = (size_t)(after - before);
    char *buf = malloc(tail);
    char name[64];
    snprintf(name, sizeof name, "/proc/self/fd/%d", e->undo_fd);
    int rfd = open(name, O_RDONLY | O_CLOEXEC);
    if (!buf || rfd < 0 || pread(rfd, buf, tail, before) != (ssize_t)tail) abort();
    close(rfd);
    real_ftruncate(e->undo_fd, 0);
    real_write(e->undo_fd, buf, tail);
    free(buf);
  } else {
    real_ftruncate(e->undo_fd, 0);
  }
  pthread_mutex_unlock(&lock);
  errno = saved;
  return rc;
}
int fsync(int fd) { return do_sync(real_fsync ? real_fsync : (resolve(), real_fsync), fd); }
int fdatasync(int fd) { return do_sync(real_fdatasync ? real_fdatasync : (resolve(), real_fdatasync), fd); }

/* An unlinked file's pending undo records would otherwise be replayed onto its successor. */
static void forget(const struct stat *st) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < n_entries; i++) {
    if (entries[i].dev != st->st_dev || entries[i].ino != st->st_ino) continue;
    if (entries[i].undo_fd >= 0) {
      real_ftruncate(entries[i].undo_fd, 0);
      close(entries[i].undo_fd);
    }
    if (entries[i].synced_fd >= 0) {
      real_ftruncate(entries[i].synced_fd, 0);
      close(entries[i].synced_fd);
    }
    entries[i] = entries[--n_entries];
    break;
  }
  pthread_mutex_unlock(&lock);
}
int unlink(const char *path) {
  resolve();
  struct stat st;
  int known = lstat(path, &st) == 0;
  int rc = real_unlink(path);
  if (rc == 0 && known) forget(&st);
  return rc;
}
int unlinkat(int dirfd, const char *path, int flags) {
  resolve();
  struct stat st;
  int known = fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
  int rc = real_unlinkat(dirfd, path, flags);
  if (rc == 0 && known && !(flags & AT_REMOVEDIR)) forget(&st);
  return rc;
}

/* ---- wall clock ---- */

static long long shift_ms(void) {
  refresh_ctl();
  return __atomic_load_n(&ctl.clock_shift_ms, __ATOMIC_RELAXED);
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
  resolve();
  int rc = real_clock_gettime(clk, ts);
  if (rc == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) {
    long long s = shift_ms();
    if (s) {
      long long ns = (long long)ts->tv_nsec + (s % 1000) * 1000000LL;
      ts->tv_sec += s / 1000 + (ns >= 1000000000LL) - (ns < 0);
      ts->tv_nsec = (ns % 1000000000LL + 1000000000LL) % 1000000000LL;
    }
  }
  return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
  resolve();
  int rc = real_gettimeofday(tv, tz);
  if (rc == 0 && tv) {
    long long s = shift_ms();
    if (s) {
      long long us = (long long)tv->tv_sec * 1000000LL + tv->tv_usec + s * 1000LL;
      tv->tv_sec = us / 1000000LL;
      tv->tv_usec = us % 1000000LL;
    }
  }
  return rc;
}

time_t time(time_t *out) {
  resolve();
  time_t t = real_time(NULL) + (time_t)(shift_ms() / 1000);
  if (out) *out = t;
  return t;
}

__attribute__((constructor)) static void init(void) { resolve(); }

/* ---- free space: a disk that refuses writes with ENOSPC reports none free ---- */

static int looks_full(const char *path) {
  const char *dir = getenv("FAULTFS_DIR");
  refresh_ctl();
  if (!dir || !path || ctl.write_errno != ENOSPC) return 0;
  size_t dl = strlen(dir);
  return strncmp(path, dir, dl) == 0 && (path[dl] == 0 || path[dl] == '/');
}

int statfs(const char *path, struct statfs *buf) {
  resolve();
  int rc = real_statfs(path, buf);
  if (rc == 0 && looks_full(path)) buf->f_bavail = buf->f_bfree = 0;
  return rc;
}

int statfs64(const char *path, struct statfs64 *buf) {
  resolve();
  int rc = real_statfs64(path, buf);
  if (rc == 0 && looks_full(path)) buf->f_bavail = buf->f_bfree = 0;
  return rc;
}
