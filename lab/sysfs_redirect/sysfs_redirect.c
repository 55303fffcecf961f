/*
 * rackforge lab: sysfs redirect (SIMULATION support, not a driver).
 *
 * A preload library (LD_PRELOAD, or /etc/ld.so.preload in a lab node) that makes the
 * simulated sysfs tree of lab/hwsim appear at the paths the REAL rdma-core tools read:
 *
 *     /sys/class/infiniband[/...]      ->  $HWSIM_SYSFS/class/infiniband[/...]
 *     /sys/class/infiniband_mad[/...]  ->  $HWSIM_SYSFS/class/infiniband_mad[/...]
 *     /proc/mdstat                     ->  /run/hwsim/mdstat (hwsim's md arrays: hwsimlib/block_sim.py)
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
 *
 * Files: this one rewrites paths; sysfs_redirect_open.c (open, stdio, directories),
 * sysfs_redirect_stat.c (metadata, links, xattrs, statfs) and sysfs_redirect_refuse.c (calls that
 * change a tree) intercept the calls; sysfs_redirect.h holds what they share.
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

#define DEFAULT_ROOT "/var/lib/hwsim/sys"
#define MDSTAT_PATH "/run/hwsim/mdstat"

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
const char *redirect(const char *path, char *buf, int *hit)
{
	char norm[PATH_MAX];
	const char *p = path;
	size_t n = 0, len;

	*hit = 0;
	if (!path || path[0] != '/')
		return path;
	/* cheap reject: every redirected path contains "/class/infiniband" or is /proc/mdstat */
	if (!strstr(path, "infiniband") && !strstr(path, "mdstat"))
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
	if (strcmp(norm, "/proc/mdstat") == 0) {
		/* the simulated kernel's md arrays (a container's /proc is the host kernel's) */
		memcpy(buf, MDSTAT_PATH, sizeof(MDSTAT_PATH));
		*hit = 1;
		return buf;
	}
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
