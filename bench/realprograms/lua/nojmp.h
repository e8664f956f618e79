/* Forced into every Lua source file by build.sh (-include nojmp.h).
 *
 * Lua raises errors with longjmp. wasm32-wasip1 has setjmp/longjmp only
 * through the WebAssembly exception-handling proposal, which the andes
 * engine (wasmtime 36, without exceptions) does not run. ldo.c lets a build
 * choose how errors are thrown (LUAI_THROW / LUAI_TRY); this build makes a
 * thrown error print its message and abort. The benchmark scripts raise no
 * error and use no coroutines (a coroutine yield from Lua is also a throw),
 * so they run exactly as under a stock build. The native build uses the same
 * header, so both run the same program. */
#ifndef ANDES_LUA_NOJMP_H
#define ANDES_LUA_NOJMP_H
#include <stdio.h>
#include <stdlib.h>
#define LUAI_THROW(L, c)                                                      \
  do {                                                                        \
    const char *andes_msg_ = lua_tolstring((L), -1, NULL);                   \
    fprintf(stderr, "lua: error (status %d): %s (this build cannot unwind; " \
            "aborting)\n", (c)->status, andes_msg_ ? andes_msg_ : "?");      \
    fflush(stderr);                                                           \
    abort();                                                                  \
  } while (0)
#define LUAI_TRY(L, c, a) { a }
#define luai_jmpbuf int
#endif
