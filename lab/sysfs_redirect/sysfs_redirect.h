/*
 * rackforge lab: sysfs redirect (SIMULATION support, not a driver): what its files share.
 * sysfs_redirect.c rewrites paths (and says what the library does and why); sysfs_redirect_open.c,
 * sysfs_redirect_stat.c and sysfs_redirect_refuse.c are the intercepted glibc calls.
 */
#ifndef SYSFS_REDIRECT_H
#define SYSFS_REDIRECT_H

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>

#define EXPORT __attribute__((visibility("default")))

/*
 * The path to use for `path`: `path` itself, or the simulated location written into `buf`
 * (sysfs_redirect.c). NULL with errno set when the rewritten path is too long.
 */
const char *redirect(const char *path, char *buf, int *hit);

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


#endif
