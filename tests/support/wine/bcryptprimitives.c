/* ProcessPrng for wine releases that lack bcryptprimitives.dll (wine 8.0, as
 * Debian 12 ships it; wine 9 has it). Rust's standard library on Windows draws
 * its random bytes from ProcessPrng, so without this DLL beside it no Rust
 * program starts under such a wine. It forwards to RtlGenRandom
 * (advapi32!SystemFunction036), which wine 8 has. Built by `cargo xtask
 * portability` with mingw-w64, for the tests only: Windows itself has the DLL. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
