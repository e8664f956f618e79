/* Stand-in for <Python.h>, which numpy's lapack_lite sources include but,
 * in the files build.sh compiles (f2c.c, f2c_blas.c, f2c_lapack.c,
 * f2c_d_lapack.c, f2c_config.c), do not use. Written for the andes
 * real-program benchmark suite. */
#include <limits.h>
