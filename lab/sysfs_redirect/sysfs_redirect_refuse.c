/*
 * rackforge lab: sysfs redirect (SIMULATION support): the intercepted calls that change a tree, refused on the simulated one.
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
