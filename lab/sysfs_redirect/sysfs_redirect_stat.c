/*
 * rackforge lab: sysfs redirect (SIMULATION support): the intercepted metadata calls (stat, access, readlink, realpath, xattrs, statfs).
 * See sysfs_redirect.c for what the library does.
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

#include "sysfs_redirect.h"

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

