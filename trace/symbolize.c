// SPDX-License-Identifier: MIT
/*
 * symbolize.c - source lines for the sites of a log, after the run.
 *
 * An access records a return address into the instrumented code (the call to __tsan_write4
 * sits right after the store it stands for). The decisions:
 *  - addr2line, from binutils, reads the DWARF line tables that clang -g writes; writing a
 *    line-table reader here would be a lot of code for what one process per object does. It
 *    runs once per object file over all of that object's sites, never on the recording path.
 *  - The object and the address inside it come from dl_iterate_phdr (the main program by the
 *    path /proc/self/exe links to - addr2line's own /proc/self/exe is addr2line - a shared
 *    library by its path); addr2line gets the address one byte before the return address,
 *    inside the call, as every symbolizer does.
 *  - -i: a site inlined from a helper (folio_get_refs() of internal.h inside GUP) names the
 *    helper's line first and each caller it was inlined into after " < ".
 *  - Paths are shown relative to the working directory when they lie under it.
 */
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace/trace.h"

struct find {
	uintptr_t pc;
	const char *path;
	uintptr_t bias;
	bool found;
};

static char exe_path[4096];

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find *f = arg;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || f->pc < lo || f->pc >= lo + ph->p_memsz)
			continue;
		f->path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : exe_path;
		f->bias = info->dlpi_addr;
		f->found = true;
		return 1;
	}
	return 0;
}

/* Append @s to *@out (a malloc'd string or NULL), separated by @sep. */
static void append(char **out, const char *sep, const char *s)
{
	size_t a = *out ? strlen(*out) : 0, n = strlen(sep) + strlen(s);
	char *p = realloc(*out, a + n + 1);

	if (!p)
		return;
	if (!a)
		p[0] = '\0';
	else
		strcat(p, sep);
	strcat(p, s);
	*out = p;
}

static const char *shorten(const char *path, const char *cwd, size_t cwd_len)
{
	if (cwd_len && !strncmp(path, cwd, cwd_len) && path[cwd_len] == '/')
		return path + cwd_len + 1;
	return path;
}

/* Run addr2line on @path for the sites idx[0..n) of @pcs; fill their out[]. */
static int run_addr2line(const char *path, uintptr_t bias, const uintptr_t *pcs,
			 const size_t *idx, size_t n, char **out)
{
	char tmpl[] = "/tmp/pinmm-trace-XXXXXX";
	char cwd[4096];
	size_t cwd_len = getcwd(cwd, sizeof(cwd)) ? strlen(cwd) : 0;
	int fd = mkstemp(tmpl);
	FILE *in, *p;
	char *cmd, line[4096], func[1024] = "";
	size_t cur = (size_t)-1;
	int ret = -1;

	if (fd < 0 || !(in = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		fprintf(in, "%#lx\n", (unsigned long)(pcs[idx[i]] - bias - 1));
	fclose(in);
	if (asprintf(&cmd, "addr2line -a -f -i -e '%s' < %s 2>/dev/null", path, tmpl) < 0)
		goto out;
	p = popen(cmd, "r");
	free(cmd);
	if (!p)
		goto out;
	/* Per site: "0x<addr>", then (function, file:line) pairs, the innermost first. */
	while (fgets(line, sizeof(line), p)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "0x", 2)) {
			cur = cur == (size_t)-1 ? 0 : cur + 1;
			func[0] = '\0';
			continue;
		}
		if (cur >= n)
			continue;
		if (!func[0]) {
			snprintf(func, sizeof(func), "%s", line);
			continue;
		}
		{
			char site[5200];

			snprintf(site, sizeof(site), "%s %s", func, shorten(line, cwd, cwd_len));
			append(&out[idx[cur]], " < ", site);
			func[0] = '\0';
		}
	}
	ret = pclose(p) == 0 && cur + 1 == n ? 0 : -1;
out:
	unlink(tmpl);
	return ret;
}

int pm_trace_symbolize(const uintptr_t *pcs, size_t n, char **out)
{
	const char **paths = calloc(n ? n : 1, sizeof(*paths));
	uintptr_t *bias = calloc(n ? n : 1, sizeof(*bias));
	size_t *idx = calloc(n ? n : 1, sizeof(*idx));
	bool *done = calloc(n ? n : 1, sizeof(*done));
	int ret = 0;

	for (size_t i = 0; i < n; i++)
		out[i] = NULL;
	if (!exe_path[0]) {
		ssize_t len = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);

		if (len <= 0)
			snprintf(exe_path, sizeof(exe_path), "/proc/%d/exe", (int)getpid());
		else
			exe_path[len] = '\0';
	}
	if (!paths || !bias || !idx || !done) {
		ret = -1;
		goto fallback;
	}
	for (size_t i = 0; i < n; i++) {
		struct find f = { .pc = pcs[i] };

		dl_iterate_phdr(find_cb, &f);
		paths[i] = f.found ? f.path : NULL;
		bias[i] = f.bias;
		done[i] = !f.found;
	}
	/* One addr2line per object: the sites of each path in turn. */
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;

		if (done[i])
			continue;
		for (size_t j = i; j < n; j++)
			if (!done[j] && !strcmp(paths[j], paths[i])) {
				idx[k++] = j;
				done[j] = true;
			}
		if (run_addr2line(paths[i], bias[i], pcs, idx, k, out))
			ret = -1;
	}
fallback:
	for (size_t i = 0; i < n; i++)
		if (!out[i] && asprintf(&out[i], "%#lx", (unsigned long)pcs[i]) < 0)
			out[i] = NULL;
	free(paths);
	free(bias);
	free(idx);
	free(done);
	return ret;
}
