/* Forced into bzip2.c for the wasm32-wasip1 build only (-include).
 * WASI has no file ownership, so wasi-libc has no fchown(); bzip2.c calls it
 * only to copy the owner of an input file to the output file it creates,
 * which the benchmark never does (it compresses to standard output, -c).
 * Written for the andes real-program benchmark suite. */
#ifndef ANDES_BZIP2_WASI_COMPAT_H
#define ANDES_BZIP2_WASI_COMPAT_H
#include <sys/types.h>
static inline int fchown(int fd, uid_t owner, gid_t group) {
  (void)fd; (void)owner; (void)group;
  return 0;
}
#endif
