/* Stand-in for the config.h that lapack_lite's f2c_*.c include (empty).
 * Written for the andes real-program benchmark suite. */
