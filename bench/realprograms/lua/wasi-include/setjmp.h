/* Shadows wasi-libc's <setjmp.h> for the wasm32-wasip1 build of Lua only:
 * wasi-libc refuses setjmp.h without the exception-handling proposal, and
 * ldo.c includes it unconditionally. Nothing uses it: nojmp.h replaces
 * Lua's longjmp-based error handling (see there). */
#ifndef ANDES_LUA_SETJMP_H
#define ANDES_LUA_SETJMP_H
#endif
