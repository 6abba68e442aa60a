/*
 * files.c — the on-disk caches' file handling, shared by the cpu and cuda backends: the
 * cache folder made on demand, whole files read into memory, files written so that a
 * concurrent reader never sees half of one.
 */
#include "runtime.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool make_dir(const char *path) { return mkdir(path, 0700) == 0 || errno == EEXIST; }

kiln_status rt_cache_folder(const char *dir) {
  char parent[4096];
  if (!dir || !dir[0] || strlen(dir) >= 4000)
    return kiln_fail(KILN_ERR_IO, "the cache folder '%.100s' is empty or too long", dir ? dir : "");
  snprintf(parent, sizeof parent, "%s", dir);
  char *slash = strrchr(parent, '/');
  bool has_parent = slash && slash != parent;
  if (has_parent) *slash = 0;
  if ((has_parent && !make_dir(parent)) || !make_dir(dir))
    return kiln_fail(KILN_ERR_IO, "cannot create the cache folder '%s': %s", dir, strerror(errno));
  return KILN_OK;
}

char *rt_file_read(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = kiln_malloc((size_t)n + 1))) {
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) { kiln_free(buf); buf = NULL; }
    else { buf[n] = 0; *size = (size_t)n; }
  }
  fclose(f);
  return buf;
}

bool rt_file_write(const char *path, const void *data, size_t n) {
  char tmp[4200];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= sizeof tmp) return false;
  FILE *f = fopen(tmp, "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, n, f) == n;
  ok = (fclose(f) == 0) && ok;
  if (ok) ok = rename(tmp, path) == 0;
  if (!ok) remove(tmp);
  return ok;
}
