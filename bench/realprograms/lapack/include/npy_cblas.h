/* Stand-in for numpy's npy_cblas.h: the two names lapack_lite's f2c.h takes
 * from it, as numpy defines them for a 32-bit-integer BLAS without symbol
 * prefix or suffix (so dgesv_ is dgesv_). Written for the andes
 * real-program benchmark suite. */
#define CBLAS_INT int
#define BLAS_FUNC(name) name##_
