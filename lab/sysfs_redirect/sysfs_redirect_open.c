/*
 * rackforge lab: sysfs redirect (SIMULATION support): the intercepted open, stdio and directory calls.
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

