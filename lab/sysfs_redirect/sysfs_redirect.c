/*
 * rackforge lab: sysfs redirect (SIMULATION support, not a driver).
 *
 * A preload library (LD_PRELOAD, or /etc/ld.so.preload in a lab node) that makes the
 * simulated sysfs tree of lab/hwsim appear at the paths the REAL rdma-core tools read:
 *
 *     /sys/class/infiniband[/...]      ->  $HWSIM_SYSFS/class/infiniband[/...]
 *     /sys/class/infiniband_mad[/...]  ->  $HWSIM_SYSFS/class/infiniband_mad[/...]
 *
 * $HWSIM_SYSFS defaults to /var/lib/hwsim/sys (the simulator's default). Every other path is
 * passed through untouched. The redirected view is read-only: calls that would change it fail
 * with EROFS, as the read-only /sys of a lab container does.
 *
 * Why: the lab has no RDMA kernel, so /sys/class/infiniband does not exist and cannot be
 * created (sysfs refuses mkdir; podman cannot mount onto a missing sysfs directory). The real
 * ibstat (libibumad) and ibstatus (a shell script: dash + cat) read fixed paths; with this
 * library they read the simulator's tree there, and format, parse and fail exactly as they do
 * on hardware.
 *
 * Covered: the glibc entry points that take a path and are used to read sysfs (open*, fopen*,
 * opendir, scandir*, *stat*, statx, access/faccessat, readlink*, chdir, realpath, *xattr,
 * statfs/statvfs) and the ones that change a tree (refused). Only absolute paths are
 * rewritten; a path relative to a directory descriptor or to the working directory resolves
 * where that descriptor or directory really is (after chdir("/sys/class/infiniband") that is
 * the simulated tree, so `cd /sys/class/infiniband; echo *` works). Not covered: statically
 * linked programs and raw system calls (Go binaries), glob(3)/nftw(3)/fts(3) inside glibc with
 * an absolute /sys/class/infiniband pattern, and listings of /sys/class itself (infiniband is
 * not added to them). realpath() and getcwd() show the simulated tree's real location.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>

#define DEFAULT_ROOT "/var/lib/hwsim/sys"
#define EXPORT __attribute__((visibility("default")))

static char sim_root[PATH_MAX];
static size_t sim_root_len;

static void load_root(void)
{
	/* secure_getenv: a setuid program keeps the default tree */
	const char *root = secure_getenv("HWSIM_SYSFS");
	size_t len;

	if (!root || root[0] != '/')
		root = DEFAULT_ROOT;
	len = strlen(root);
	while (len > 1 && root[len - 1] == '/')
		len--;
	if (len >= sizeof(sim_root) - 1)
		len = strlen(DEFAULT_ROOT), root = DEFAULT_ROOT;
	memcpy(sim_root, root, len);
	sim_root[len] = '\0';
	__atomic_store_n(&sim_root_len, len, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void sysfs_redirect_init(void)
{
	load_root();
}

/* One redirected subtree: "/sys/class/<name>" itself or anything below it. */
static int in_subtree(const char *norm, const char *top)
{
	size_t n = strlen(top);

	return strncmp(norm, top, n) == 0 && (norm[n] == '\0' || norm[n] == '/');
}

/*
 * The path to use for `path`: `path` itself, or the simulated location written into `buf`.
 * Repeated slashes and "." components are folded before matching ("//sys/./class/infiniband"
 * is the same directory); ".." is left to the kernel, which resolves it inside the simulated
 * tree (laid out as /sys is). NULL with errno set when the rewritten path is too long.
 */
static const char *redirect(const char *path, char *buf, int *hit)
{
	char norm[PATH_MAX];
	const char *p = path;
	size_t n = 0, len;

	*hit = 0;
	if (!path || path[0] != '/')
		return path;
	/* cheap reject: every redirected path contains "/class/infiniband" */
	if (!strstr(path, "infiniband"))
		return path;
	while (*p) {
		if (*p == '/') {
			while (p[1] == '/')
				p++;
			if (p[1] == '.' && (p[2] == '/' || p[2] == '\0')) {
				p += 2;
				continue;
			}
		}
		if (n >= sizeof(norm) - 1)
			return path; /* longer than PATH_MAX: not ours, let the kernel answer */
		norm[n++] = *p++;
	}
	if (n > 1 && norm[n - 1] == '/')
		n--;
	norm[n] = '\0';
	if (!in_subtree(norm, "/sys/class/infiniband") && !in_subtree(norm, "/sys/class/infiniband_mad"))
		return path;
	if (!__atomic_load_n(&sim_root_len, __ATOMIC_ACQUIRE))
		load_root();
	len = sim_root_len + (n - 4); /* "/sys" is replaced by the simulated root */
	if (len >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	memcpy(buf, sim_root, sim_root_len);
	memcpy(buf + sim_root_len, norm + 4, n - 4 + 1);
	*hit = 1;
	return buf;
}

#define REAL(name)                                                                        \
	static __typeof__(name) *real_fn;                                                 \
	if (!real_fn)                                                                     \
		real_fn = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);                     \
	if (!real_fn) {                                                                   \
		errno = ENOSYS;                                                           \
		return 0;                                                                 \
	}

/* for pointer-returning functions the "return 0" above is NULL; int ones get -1 below */
#define REAL_INT(name)                                                                    \
	static __typeof__(name) *real_fn;                                                 \
	if (!real_fn)                                                                     \
		real_fn = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);                     \
	if (!real_fn) {                                                                   \
		errno = ENOSYS;                                                           \
		return -1;                                                                \
	}

#define MAP(var, path)                                                                    \
	char var##_buf[PATH_MAX];                                                         \
	int var##_hit;                                                                    \
	const char *var = redirect((path), var##_buf, &var##_hit);                        \
	if (!var)                                                                         \
		return -1;

#define MAP_PTR(var, path)                                                                \
	char var##_buf[PATH_MAX];                                                         \
	int var##_hit;                                                                    \
	const char *var = redirect((path), var##_buf, &var##_hit);                        \
	if (!var)                                                                         \
		return NULL;

/* a change to the simulated tree: refused as on a read-only /sys */
#define REFUSE_IF(hit)                                                                    \
	if (hit) {                                                                        \
		errno = EROFS;                                                            \
		return -1;                                                                \
	}

/* O_TMPFILE includes the O_DIRECTORY bit: only all of its bits mean O_TMPFILE (as in glibc's
 * __OPEN_NEEDS_MODE), else every O_DIRECTORY open would count as a write */
static int is_tmpfile(int flags)
{
	return (flags & __O_TMPFILE) == __O_TMPFILE;
}

static int writes(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND)) || is_tmpfile(flags);
}

static int fopen_writes(const char *mode)
{
	return mode && (strchr(mode, 'w') || strchr(mode, 'a') || strchr(mode, '+'));
}

static mode_t mode_arg(int flags, va_list ap)
{
	return ((flags & O_CREAT) || is_tmpfile(flags)) ? (mode_t)va_arg(ap, int) : 0;
}

/* ---- open ---- */

EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	REAL_INT(open);
	MAP(p, path);
	REFUSE_IF(p_hit && writes(flags));
	return real_fn(p, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	REAL_INT(open64);
	MAP(p, path);
	REFUSE_IF(p_hit && writes(flags));
	return real_fn(p, flags, mode);
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	REAL_INT(openat);
	MAP(p, path);
	REFUSE_IF(p_hit && writes(flags));
	return real_fn(dirfd, p, flags, mode);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	REAL_INT(openat64);
	MAP(p, path);
	REFUSE_IF(p_hit && writes(flags));
	return real_fn(dirfd, p, flags, mode);
}

/* the _FORTIFY_SOURCE entry points (open without O_CREAT) */
extern int __open_2(const char *path, int flags);
extern int __open64_2(const char *path, int flags);
extern int __openat_2(int dirfd, const char *path, int flags);
extern int __openat64_2(int dirfd, const char *path, int flags);

EXPORT int __open_2(const char *path, int flags)
{
	REAL_INT(__open_2);
	MAP(p, path);
	REFUSE_IF(p_hit && writes(flags));
	return real_fn(p, flags);
}

EXPORT int __open64_2(const char *path, int flags)
{
	REAL_INT(__open64_2);
	MAP(p, path);
	REFUSE_IF(p_hit && writes(flags));
	return real_fn(p, flags);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	REAL_INT(__openat_2);
	MAP(p, path);
	REFUSE_IF(p_hit && writes(flags));
	return real_fn(dirfd, p, flags);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	REAL_INT(__openat64_2);
	MAP(p, path);
	REFUSE_IF(p_hit && writes(flags));
	return real_fn(dirfd, p, flags);
}

EXPORT int creat(const char *path, mode_t mode)
{
	REAL_INT(creat);
	MAP(p, path);
	REFUSE_IF(p_hit);
	return real_fn(p, mode);
}

EXPORT int creat64(const char *path, mode_t mode)
{
	REAL_INT(creat64);
	MAP(p, path);
	REFUSE_IF(p_hit);
	return real_fn(p, mode);
}

/* ---- stdio ---- */

#define FOPEN_LIKE(name, ...)                                                             \
	REAL(name);                                                                       \
	MAP_PTR(p, path);                                                                 \
	if (p_hit && fopen_writes(mode)) {                                                \
		errno = EROFS;                                                            \
		return NULL;                                                              \
	}                                                                                 \
	return real_fn(__VA_ARGS__);

EXPORT FILE *fopen(const char *path, const char *mode)
{
	FOPEN_LIKE(fopen, p, mode);
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
	FOPEN_LIKE(fopen64, p, mode);
}

EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	FOPEN_LIKE(freopen, p, mode, stream);
}

EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	FOPEN_LIKE(freopen64, p, mode, stream);
}

/* ---- directories ---- */

EXPORT DIR *opendir(const char *path)
{
	REAL(opendir);
	MAP_PTR(p, path);
	return real_fn(p);
}

EXPORT int scandir(const char *path, struct dirent ***list, int (*filter)(const struct dirent *),
		   int (*compar)(const struct dirent **, const struct dirent **))
{
	REAL_INT(scandir);
	MAP(p, path);
	return real_fn(p, list, filter, compar);
}

EXPORT int scandir64(const char *path, struct dirent64 ***list, int (*filter)(const struct dirent64 *),
		     int (*compar)(const struct dirent64 **, const struct dirent64 **))
{
	REAL_INT(scandir64);
	MAP(p, path);
	return real_fn(p, list, filter, compar);
}

EXPORT int scandirat(int dirfd, const char *path, struct dirent ***list, int (*filter)(const struct dirent *),
		     int (*compar)(const struct dirent **, const struct dirent **))
{
	REAL_INT(scandirat);
	MAP(p, path);
	return real_fn(dirfd, p, list, filter, compar);
}

EXPORT int scandirat64(int dirfd, const char *path, struct dirent64 ***list, int (*filter)(const struct dirent64 *),
		       int (*compar)(const struct dirent64 **, const struct dirent64 **))
{
	REAL_INT(scandirat64);
	MAP(p, path);
	return real_fn(dirfd, p, list, filter, compar);
}

EXPORT int chdir(const char *path)
{
	REAL_INT(chdir);
	MAP(p, path);
	return real_fn(p);
}

/* ---- metadata ---- */

EXPORT int stat(const char *path, struct stat *st)
{
	REAL_INT(stat);
	MAP(p, path);
	return real_fn(p, st);
}

EXPORT int stat64(const char *path, struct stat64 *st)
{
	REAL_INT(stat64);
	MAP(p, path);
	return real_fn(p, st);
}

EXPORT int lstat(const char *path, struct stat *st)
{
	REAL_INT(lstat);
	MAP(p, path);
	return real_fn(p, st);
}

EXPORT int lstat64(const char *path, struct stat64 *st)
{
	REAL_INT(lstat64);
	MAP(p, path);
	return real_fn(p, st);
}

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	REAL_INT(fstatat);
	MAP(p, path);
	return real_fn(dirfd, p, st, flags);
}

EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	REAL_INT(fstatat64);
	MAP(p, path);
	return real_fn(dirfd, p, st, flags);
}

EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *st)
{
	REAL_INT(statx);
	MAP(p, path);
	return real_fn(dirfd, p, flags, mask, st);
}

/* binaries built against glibc < 2.33 call the versioned wrappers instead of stat() */
#define XSTAT(name, type)                                                                 \
	extern int name(int ver, const char *path, type *st);                             \
	EXPORT int name(int ver, const char *path, type *st)                              \
	{                                                                                 \
		static int (*real_fn)(int, const char *, type *);                         \
		if (!real_fn)                                                             \
			real_fn = (int (*)(int, const char *, type *))dlvsym(RTLD_NEXT, #name, \
									    "GLIBC_2.2.5"); \
		if (!real_fn) {                                                           \
			errno = ENOSYS;                                                   \
			return -1;                                                        \
		}                                                                         \
		MAP(p, path);                                                             \
		return real_fn(ver, p, st);                                               \
	}

XSTAT(__xstat, struct stat)
XSTAT(__xstat64, struct stat64)
XSTAT(__lxstat, struct stat)
XSTAT(__lxstat64, struct stat64)

#define FXSTATAT(name, type)                                                              \
	extern int name(int ver, int dirfd, const char *path, type *st, int flags);       \
	EXPORT int name(int ver, int dirfd, const char *path, type *st, int flags)        \
	{                                                                                 \
		static int (*real_fn)(int, int, const char *, type *, int);               \
		if (!real_fn)                                                             \
			real_fn = (int (*)(int, int, const char *, type *, int))dlvsym(  \
				RTLD_NEXT, #name, "GLIBC_2.4");                           \
		if (!real_fn) {                                                           \
			errno = ENOSYS;                                                   \
			return -1;                                                        \
		}                                                                         \
		MAP(p, path);                                                             \
		return real_fn(ver, dirfd, p, st, flags);                                 \
	}

FXSTATAT(__fxstatat, struct stat)
FXSTATAT(__fxstatat64, struct stat64)

EXPORT int access(const char *path, int mode)
{
	REAL_INT(access);
	MAP(p, path);
	REFUSE_IF(p_hit && (mode & W_OK));
	return real_fn(p, mode);
}

EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
	REAL_INT(faccessat);
	MAP(p, path);
	REFUSE_IF(p_hit && (mode & W_OK));
	return real_fn(dirfd, p, mode, flags);
}

EXPORT int euidaccess(const char *path, int mode)
{
	REAL_INT(euidaccess);
	MAP(p, path);
	REFUSE_IF(p_hit && (mode & W_OK));
	return real_fn(p, mode);
}

EXPORT int eaccess(const char *path, int mode)
{
	REAL_INT(eaccess);
	MAP(p, path);
	REFUSE_IF(p_hit && (mode & W_OK));
	return real_fn(p, mode);
}

EXPORT ssize_t readlink(const char *path, char *buf, size_t size)
{
	REAL_INT(readlink);
	MAP(p, path);
	return real_fn(p, buf, size);
}

EXPORT ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t size)
{
	REAL_INT(readlinkat);
	MAP(p, path);
	return real_fn(dirfd, p, buf, size);
}

EXPORT char *realpath(const char *path, char *resolved)
{
	REAL(realpath);
	MAP_PTR(p, path);
	return real_fn(p, resolved);
}

extern char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen);
EXPORT char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen)
{
	REAL(__realpath_chk);
	MAP_PTR(p, path);
	return real_fn(p, resolved, resolvedlen);
}

EXPORT char *canonicalize_file_name(const char *path)
{
	REAL(canonicalize_file_name);
	MAP_PTR(p, path);
	return real_fn(p);
}

EXPORT ssize_t getxattr(const char *path, const char *name, void *value, size_t size)
{
	REAL_INT(getxattr);
	MAP(p, path);
	return real_fn(p, name, value, size);
}

EXPORT ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size)
{
	REAL_INT(lgetxattr);
	MAP(p, path);
	return real_fn(p, name, value, size);
}

EXPORT ssize_t listxattr(const char *path, char *list, size_t size)
{
	REAL_INT(listxattr);
	MAP(p, path);
	return real_fn(p, list, size);
}

EXPORT ssize_t llistxattr(const char *path, char *list, size_t size)
{
	REAL_INT(llistxattr);
	MAP(p, path);
	return real_fn(p, list, size);
}

EXPORT int statfs(const char *path, struct statfs *buf)
{
	REAL_INT(statfs);
	MAP(p, path);
	return real_fn(p, buf);
}

EXPORT int statfs64(const char *path, struct statfs64 *buf)
{
	REAL_INT(statfs64);
	MAP(p, path);
	return real_fn(p, buf);
}

EXPORT int statvfs(const char *path, struct statvfs *buf)
{
	REAL_INT(statvfs);
	MAP(p, path);
	return real_fn(p, buf);
}

EXPORT int statvfs64(const char *path, struct statvfs64 *buf)
{
	REAL_INT(statvfs64);
	MAP(p, path);
	return real_fn(p, buf);
}

/* ---- changes: the simulated tree is read-only through its /sys path ---- */

#define REFUSE1(name, proto, call)                                                        \
	EXPORT int name proto                                                             \
	{                                                                                 \
		REAL_INT(name);                                                           \
		MAP(p, path);                                                             \
		REFUSE_IF(p_hit);                                                         \
		return real_fn call;                                                      \
	}

REFUSE1(mkdir, (const char *path, mode_t mode), (p, mode))
REFUSE1(mkdirat, (int dirfd, const char *path, mode_t mode), (dirfd, p, mode))
REFUSE1(rmdir, (const char *path), (p))
REFUSE1(unlink, (const char *path), (p))
REFUSE1(unlinkat, (int dirfd, const char *path, int flags), (dirfd, p, flags))
REFUSE1(chmod, (const char *path, mode_t mode), (p, mode))
REFUSE1(fchmodat, (int dirfd, const char *path, mode_t mode, int flags), (dirfd, p, mode, flags))
REFUSE1(chown, (const char *path, uid_t uid, gid_t gid), (p, uid, gid))
REFUSE1(lchown, (const char *path, uid_t uid, gid_t gid), (p, uid, gid))
REFUSE1(fchownat, (int dirfd, const char *path, uid_t uid, gid_t gid, int flags), (dirfd, p, uid, gid, flags))
REFUSE1(truncate, (const char *path, off_t length), (p, length))
REFUSE1(truncate64, (const char *path, off64_t length), (p, length))
REFUSE1(utime, (const char *path, const struct utimbuf *times), (p, times))
REFUSE1(utimes, (const char *path, const struct timeval times[2]), (p, times))
REFUSE1(mknod, (const char *path, mode_t mode, dev_t dev), (p, mode, dev))
REFUSE1(mknodat, (int dirfd, const char *path, mode_t mode, dev_t dev), (dirfd, p, mode, dev))
REFUSE1(setxattr, (const char *path, const char *name, const void *value, size_t size, int flags),
	(p, name, value, size, flags))
REFUSE1(lsetxattr, (const char *path, const char *name, const void *value, size_t size, int flags),
	(p, name, value, size, flags))
REFUSE1(removexattr, (const char *path, const char *name), (p, name))
REFUSE1(lremovexattr, (const char *path, const char *name), (p, name))

EXPORT int utimensat(int dirfd, const char *path, const struct timespec times[2], int flags)
{
	REAL_INT(utimensat);
	MAP(p, path); /* a NULL path (futimens() on dirfd) passes through */
	REFUSE_IF(p_hit);
	return real_fn(dirfd, p, times, flags);
}

/* the new name of a link, rename or symlink is where the change lands */
#define REFUSE2(name, proto, call)                                                        \
	EXPORT int name proto                                                             \
	{                                                                                 \
		REAL_INT(name);                                                           \
		MAP(a, from);                                                             \
		MAP(b, to);                                                               \
		REFUSE_IF(a_hit || b_hit);                                                \
		return real_fn call;                                                      \
	}

REFUSE2(rename, (const char *from, const char *to), (a, b))
REFUSE2(renameat, (int fromfd, const char *from, int tofd, const char *to), (fromfd, a, tofd, b))
REFUSE2(renameat2, (int fromfd, const char *from, int tofd, const char *to, unsigned int flags), (fromfd, a, tofd, b, flags))
REFUSE2(link, (const char *from, const char *to), (a, b))
REFUSE2(linkat, (int fromfd, const char *from, int tofd, const char *to, int flags), (fromfd, a, tofd, b, flags))

/* symlink(target, linkpath): the target is only text stored in the link, never rewritten */
EXPORT int symlink(const char *target, const char *path)
{
	REAL_INT(symlink);
	MAP(p, path);
	REFUSE_IF(p_hit);
	return real_fn(target, p);
}

EXPORT int symlinkat(const char *target, int dirfd, const char *path)
{
	REAL_INT(symlinkat);
	MAP(p, path);
	REFUSE_IF(p_hit);
	return real_fn(target, dirfd, p);
}
