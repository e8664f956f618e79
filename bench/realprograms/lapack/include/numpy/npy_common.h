/* Stand-in for numpy's npy_common.h (unused by the lapack_lite sources
 * build.sh compiles). Written for the andes real-program benchmark suite. */
