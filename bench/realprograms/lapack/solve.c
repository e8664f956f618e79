/* A driver for reference LAPACK 3.2.2 and reference BLAS as translated to C
 * by f2c and shipped in numpy's source (numpy/linalg/lapack_lite). The
 * driver is ours, written for the andes real-program benchmark suite; the
 * numerical work is LAPACK's and BLAS's:
 *
 *   solve N
 *
 *   1. dgesv: LU factorisation with partial pivoting (dgetrf, blocked, on
 *      dgemm/dtrsm) of a random N x N matrix and a solve with 4 right-hand
 *      sides built from a known solution; prints the error and a checksum.
 *   2. dsyevd: all eigenvalues of a random symmetric N/2 x N/2 matrix
 *      (Householder tridiagonalisation, then divide and conquer); prints
 *      the extreme ones, their sum and the matrix trace.
 *   3. dgemm: C = A B for N/2 x N/2 matrices; prints a checksum.
 *
 * Inputs come from a fixed 64-bit generator; the output depends only on N. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>

typedef int integer;
extern int dgesv_(integer *n, integer *nrhs, double *a, integer *lda,
                  integer *ipiv, double *b, integer *ldb, integer *info);
extern int dsyevd_(char *jobz, char *uplo, integer *n, double *a, integer *lda,
                   double *w, double *work, integer *lwork, integer *iwork,
                   integer *liwork, integer *info);
extern int dgemm_(char *transa, char *transb, integer *m, integer *n,
                  integer *k, double *alpha, double *a, integer *lda,
                  double *b, integer *ldb, double *beta, double *c,
                  integer *ldc);

/* LAPACK's error handler: reference LAPACK's xerbla prints and stops. */
int xerbla_(char *srname, integer *info) {
  fprintf(stderr, "** On entry to %.6s parameter number %d had an illegal value\n",
          srname, *info);
  exit(1);
}

static uint64_t rng = 88172645463325252ULL;
/* Uniform in [-1, 1), exactly representable (53 random bits). */
static double unif(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(int64_t)(rng >> 11) / (double)(1ULL << 52) - 1.0;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) { fprintf(stderr, "solve: out of memory\n"); exit(1); }
  return p;
}

int main(int argc, char **argv) {
  integer n = argc > 1 ? atoi(argv[1]) : 1000;
  integer nrhs = 4, info;

  /* 1. Linear system. Column-major, as Fortran. */
  double *a = xmalloc(sizeof(double) * n * n);
  double *a0 = xmalloc(sizeof(double) * n * n);
  double *x = xmalloc(sizeof(double) * n * nrhs);
  double *b = xmalloc(sizeof(double) * n * nrhs);
  integer *ipiv = xmalloc(sizeof(integer) * n);
  for (long i = 0; i < (long)n * n; i++) a0[i] = a[i] = unif();
  for (long i = 0; i < (long)n * nrhs; i++) x[i] = 1.0 + (double)(i % 97) / 97.0;
  for (integer r = 0; r < nrhs; r++)
    for (integer i = 0; i < n; i++) {
      double s = 0;
      for (integer j = 0; j < n; j++) s += a0[i + (long)j * n] * x[j + (long)r * n];
      b[i + (long)r * n] = s;
    }
  dgesv_(&n, &nrhs, a, &n, ipiv, b, &n, &info);
  double maxerr = 0, sum = 0, logdet = 0;
  int swaps = 0;
  for (long i = 0; i < (long)n * nrhs; i++) {
    double e = fabs(b[i] - x[i]);
    if (e > maxerr) maxerr = e;
    sum += b[i];
  }
  for (integer i = 0; i < n; i++) {
    logdet += log(fabs(a[i + (long)i * n]));
    if (ipiv[i] != i + 1) swaps++;
  }
  printf("dgesv n=%d nrhs=%d info=%d\n", n, nrhs, info);
  printf("  max |x - x_true| = %.3e\n", maxerr);
  printf("  sum x = %.9f\n", sum);
  printf("  log|det A| = %.9f, row swaps %d\n", logdet, swaps);

  /* 2. Symmetric eigenvalues. */
  integer m = n / 2, lwork = -1, liwork = -1, iwq;
  double wq;
  double *s = xmalloc(sizeof(double) * m * m);
  double *w = xmalloc(sizeof(double) * m);
  double trace = 0;
  for (integer j = 0; j < m; j++)
    for (integer i = 0; i <= j; i++) {
      double v = unif();
      s[i + (long)j * m] = s[j + (long)i * m] = v;
      if (i == j) trace += v;
    }
  dsyevd_("N", "U", &m, s, &m, w, &wq, &lwork, &iwq, &liwork, &info);
  lwork = (integer)wq;
  liwork = iwq;
  double *work = xmalloc(sizeof(double) * lwork);
  integer *iwork = xmalloc(sizeof(integer) * liwork);
  dsyevd_("N", "U", &m, s, &m, w, work, &lwork, iwork, &liwork, &info);
  double wsum = 0;
  for (integer i = 0; i < m; i++) wsum += w[i];
  printf("dsyevd m=%d info=%d\n", m, info);
  printf("  lambda_min = %.9f, lambda_max = %.9f\n", w[0], w[m - 1]);
  printf("  sum lambda = %.9f, trace = %.9f\n", wsum, trace);

  /* 3. Matrix product. */
  double one = 1.0, zero = 0.0;
  double *c = xmalloc(sizeof(double) * m * m);
  for (long i = 0; i < (long)m * m; i++) { s[i] = unif(); c[i] = 0; }
  dgemm_("N", "T", &m, &m, &m, &one, s, &m, a0, &n, &zero, c, &m);
  double csum = 0, cabs = 0;
  for (long i = 0; i < (long)m * m; i++) { csum += c[i]; cabs += fabs(c[i]); }
  printf("dgemm m=%d\n", m);
  printf("  sum C = %.9f, sum |C| = %.9f\n", csum, cabs);
  return 0;
}
