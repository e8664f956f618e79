/*
 * andes.h: the guest SDK for andes jobs written in C or C++.
 *
 * One header, nothing to link: every function is `static inline`. It binds
 * the `andes:job` interfaces of wit/job.wit (the single source of truth) as
 * core-module imports lowered with the component model's canonical ABI, as
 * the Rust SDK (guest-sdk/src) does, with the same surface:
 *
 *   andes_vacate_requested, andes_vacate_deadline, andes_vacate_time_left
 *   andes_checkpoint_requested, andes_checkpoint_save, andes_checkpoint_load
 *   andes_attr_get (+ _string, _int, _real, _bool)
 *   andes_attr_set (+ _progress, _int, _real, _string, _string_n, _bool)
 *   andes_log, andes_logf, andes_log_debug / _info / _warn / _error
 *   the pure parts: andes_attr_is_valid_name, andes_attr_is_settable,
 *   andes_string_literal, andes_real_literal, andes_parse_string_literal,
 *   andes_parse_int_literal, andes_parse_real_literal
 *
 * Build a job with `zig cc -target wasm32-wasi` (or wasi-sdk's clang); C99 or
 * later, or C++. A job may set only `Progress` and attributes whose names
 * begin with `Chirp` (case-insensitively); anything else, and any name that is
 * not a ClassAd identifier, is refused here before the host is asked.
 *
 * Strings the host returns (an attribute's value, a refusal, a saved state)
 * are allocated with the module's exported `cabi_realloc`, which the host
 * calls; without it such a call traps. This header defines one, weak (so a
 * program that has its own keeps it) and exported, with malloc's heap: what
 * the functions below return is yours to free().
 *
 * Outside andes (built for anything but wasm, or with -DANDES_HOST=0) the
 * functions behave as the Rust SDK does natively: no vacate, no deadline, no
 * checkpoint requested and none to load, no attribute; set fails with
 * ANDES_ATTR_NOT_UNDER_ANDES after its local checks, save with
 * ANDES_SAVE_NOT_UNDER_ANDES, and log lines go to standard error as
 * `[andes LEVEL] message`. A job's logic can be run and tested natively.
 */
#ifndef ANDES_H
#define ANDES_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef ANDES_HOST
#if defined(__wasm__)
#define ANDES_HOST 1
#else
#define ANDES_HOST 0
#endif
#endif

#ifdef __cplusplus
/* A C header: its casts are C's, whatever warnings a C++ program asks for. */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#endif
extern "C" {
#endif

/* The attribute a job sets to report how far it has got: a real from 0 to 1. */
#define ANDES_PROGRESS "Progress"
/* The prefix of the attributes a job may set freely. */
#define ANDES_CHIRP_PREFIX "Chirp"
/* Room for any andes_real_literal, its NUL included. */
#define ANDES_REAL_LITERAL_MAX 32
/* The longest name or expression text the host reads (its MAX_ATTR_TEXT). */
#define ANDES_MAX_ATTR_TEXT (64 * 1024)
/* The exit code of a job that saved its state and wants to be run again:
 * HTCondor's checkpoint_exit_code convention. */
#define ANDES_CHECKPOINT_EXIT_CODE 85

/* How important a log line is: the WIT enum `andes:job/log.level`, by index. */
typedef enum andes_log_level {
    ANDES_LOG_DEBUG = 0,
    ANDES_LOG_INFO = 1,
    ANDES_LOG_WARN = 2,
    ANDES_LOG_ERROR = 3
} andes_log_level;

/* Why an attribute could not be set: the Rust SDK's attr::AttrError. */
typedef enum andes_attr_error {
    ANDES_ATTR_OK = 0,
    /* Only `Progress` and names beginning with `Chirp` may be set; refused
     * without asking the host. */
    ANDES_ATTR_NOT_SETTABLE,
    /* Not a ClassAd attribute name (a letter or `_`, then letters, digits
     * and `_`); refused without asking the host. */
    ANDES_ATTR_INVALID_NAME,
    /* The value cannot be written as a ClassAd expression (empty, not UTF-8,
     * longer than the host reads, a progress that is not a number); refused
     * without asking the host. */
    ANDES_ATTR_INVALID_VALUE,
    /* The host refused the update; the message says why. */
    ANDES_ATTR_REFUSED,
    /* Not running under andes: there is no job ad to update. */
    ANDES_ATTR_NOT_UNDER_ANDES
} andes_attr_error;

/* Why a checkpoint was not saved: the Rust SDK's checkpoint::SaveError. */
typedef enum andes_save_error {
    ANDES_SAVE_OK = 0,
    /* The host refused it; the message says why (too large, say). */
    ANDES_SAVE_REFUSED,
    /* Not running under andes: there is no host to keep it. */
    ANDES_SAVE_NOT_UNDER_ANDES
} andes_save_error;

/* ------------------------------------------------------------------------ */
/* The raw imports (wit/job.wit) and the allocator the host calls.           */

#if ANDES_HOST
#define ANDES_IMPORT_(module, name) __attribute__((import_module(module), import_name(name)))
ANDES_IMPORT_("andes:job/control@0.1.0", "vacate-requested")
int32_t andes_sys_vacate_requested_(void);
/* option<u64> at ret, 8-aligned: tag byte at +0, the u64 at +8. */
ANDES_IMPORT_("andes:job/control@0.1.0", "deadline")
void andes_sys_deadline_(uint64_t *ret);
/* option<string> at ret, 4-aligned: tag byte at +0, ptr at +4, len at +8. */
ANDES_IMPORT_("andes:job/attributes@0.1.0", "get")
void andes_sys_get_(const char *name, size_t name_len, uint32_t *ret);
/* result<_, string> at ret, as get's. */
ANDES_IMPORT_("andes:job/attributes@0.1.0", "set")
void andes_sys_set_(const char *name, size_t name_len, const char *value, size_t value_len,
                    uint32_t *ret);
ANDES_IMPORT_("andes:job/log@0.1.0", "write")
void andes_sys_write_(int32_t level, const char *msg, size_t msg_len);
ANDES_IMPORT_("andes:job/checkpoint@0.1.0", "checkpoint-requested")
int32_t andes_sys_checkpoint_requested_(void);
/* result<_, string> at ret, as get's. */
ANDES_IMPORT_("andes:job/checkpoint@0.1.0", "save")
void andes_sys_save_(const void *state, size_t len, uint32_t *ret);
/* option<list<u8>> at ret, as get's. */
ANDES_IMPORT_("andes:job/checkpoint@0.1.0", "load")
void andes_sys_load_(uint32_t *ret);
#undef ANDES_IMPORT_

/*
 * The canonical ABI's allocator, which the host calls as
 * cabi_realloc(0, 0, 1, len) to hand the guest a string or a saved state.
 * Weak, so that a program (or another binding generator) may define its
 * own; exported, so that the host finds it. Memory comes from malloc, and a
 * zero-sized block is the (never freed) address `align`, as in Rust.
 */
void *cabi_realloc(void *ptr, size_t old_size, size_t align, size_t new_size);
__attribute__((weak, export_name("cabi_realloc"))) void *cabi_realloc(void *ptr, size_t old_size,
                                                                     size_t align,
                                                                     size_t new_size) {
    void *out;
    if (old_size == 0) ptr = NULL; /* a zero-sized block is not malloc's */
    if (new_size == 0) {
        free(ptr);
        return (void *)align;
    }
    if (align > 16) {
        if (ptr) abort(); /* never asked of us: the host's alignment is 1 */
        out = aligned_alloc(align, (new_size + align - 1) / align * align);
    } else {
        out = realloc(ptr, new_size);
    }
    if (!out) abort(); /* the canonical ABI traps when allocation fails */
    return out;
}
#endif /* ANDES_HOST */

/* ------------------------------------------------------------------------ */
/* Helpers (not part of the API).                                            */

/* A malloc'd copy of `n` bytes with a NUL after them, or NULL. */
static inline char *andes_dup_n_(const char *s, size_t n) {
    char *out = (char *)malloc(n + 1);
    if (out) {
        if (n) memcpy(out, s, n);
        out[n] = '\0';
    }
    return out;
}

/* A malloc'd string formatted as printf does, or NULL. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 1, 0)))
#endif
static inline char *andes_vformat_(const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, again);
    va_end(again);
    if (n < 0) return NULL;
    char *out = (char *)malloc((size_t)n + 1);
    if (out) vsnprintf(out, (size_t)n + 1, fmt, ap);
    return out;
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 1, 2)))
#endif
static inline char *andes_format_(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *out = andes_vformat_(fmt, ap);
    va_end(ap);
    return out;
}

static inline bool andes_is_space_(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static inline bool andes_is_digit_(unsigned char c) { return c >= '0' && c <= '9'; }

static inline bool andes_is_alpha_(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline unsigned char andes_lower_(unsigned char c) {
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Whether `n` bytes at `a` equal the NUL-terminated `b`, in any ASCII case. */
static inline bool andes_eq_ignore_case_(const char *a, size_t n, const char *b) {
    if (strlen(b) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (andes_lower_((unsigned char)a[i]) != andes_lower_((unsigned char)b[i])) return false;
    return true;
}

/* `text` less ASCII white space at both ends: its start, its length in *n. */
static inline const char *andes_trim_(const char *text, size_t *n) {
    size_t len = strlen(text);
    while (len && andes_is_space_((unsigned char)*text)) text++, len--;
    while (len && andes_is_space_((unsigned char)text[len - 1])) len--;
    *n = len;
    return text;
}

/* Whether `n` bytes at `s` are UTF-8 (as Rust's str requires). */
static inline bool andes_is_utf8_(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t more;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            more = 1, cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            more = 2, cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            more = 3, cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i <= more) return false;
        for (size_t k = 1; k <= more; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if ((more == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (more == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        i += more + 1;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Vacating: HTCondor's soft kill.                                           */

/* Whether the execute host has asked this job to vacate: the machine is
 * being reclaimed; save what you need and exit (with
 * ANDES_CHECKPOINT_EXIT_CODE to be run again) before the deadline. Once
 * true it stays true. Cheap: poll it between steps of work. */
static inline bool andes_vacate_requested(void) {
#if ANDES_HOST
    return andes_sys_vacate_requested_() != 0;
#else
    return false;
#endif
}

/* When a vacate is pending: true, with the time after which the host kills
 * the job in *unix_secs (seconds since the Unix epoch; unix_secs may be
 * NULL). False when no vacate is pending, and outside andes. */
static inline bool andes_vacate_deadline(uint64_t *unix_secs) {
#if ANDES_HOST
    uint64_t area[2] = {0, 0};
    andes_sys_deadline_(area);
    if (*(const uint8_t *)area == 0) return false;
    if (unix_secs) *unix_secs = area[1];
    return true;
#else
    (void)unix_secs;
    return false;
#endif
}

/* When a vacate is pending: true, with how long until the host kills the
 * job by this job's clock in *seconds (zero once the deadline has passed;
 * seconds may be NULL). False when no vacate is pending. */
static inline bool andes_vacate_time_left(double *seconds) {
    uint64_t deadline;
    if (!andes_vacate_deadline(&deadline)) return false;
    if (seconds) {
        double now;
#ifdef TIME_UTC /* C11's timespec_get */
        struct timespec ts;
        if (timespec_get(&ts, TIME_UTC) == TIME_UTC)
            now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
        else
            now = (double)time(NULL);
#else
        now = (double)time(NULL);
#endif
        double left = (double)deadline - now;
        *seconds = left > 0.0 ? left : 0.0;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Log lines, which reach the job's event log on the submit side.            */

/* The level's name as the WIT spells it: "debug", "info", "warn", "error". */
static inline const char *andes_log_level_str(andes_log_level level) {
    switch (level) {
    case ANDES_LOG_DEBUG: return "debug";
    case ANDES_LOG_INFO: return "info";
    case ANDES_LOG_WARN: return "warn";
    case ANDES_LOG_ERROR: return "error";
    }
    return "info";
}

/* Writes one line (keep it short: the host keeps 4096 bytes of it). */
static inline void andes_log(andes_log_level level, const char *message) {
    if ((int)level < ANDES_LOG_DEBUG || (int)level > ANDES_LOG_ERROR) level = ANDES_LOG_INFO;
    if (!message) message = "";
#if ANDES_HOST
    andes_sys_write_((int32_t)level, message, strlen(message));
#else
    fprintf(stderr, "[andes %s] %s\n", andes_log_level_str(level), message);
#endif
}

/* Writes one line formatted as printf does. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static inline void andes_logf(andes_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *line = andes_vformat_(fmt, ap);
    va_end(ap);
    andes_log(level, line ? line : fmt);
    free(line);
}

static inline void andes_log_debug(const char *message) { andes_log(ANDES_LOG_DEBUG, message); }
static inline void andes_log_info(const char *message) { andes_log(ANDES_LOG_INFO, message); }
static inline void andes_log_warn(const char *message) { andes_log(ANDES_LOG_WARN, message); }
static inline void andes_log_error(const char *message) { andes_log(ANDES_LOG_ERROR, message); }

/* ------------------------------------------------------------------------ */
/* Cooperative checkpoints.                                                  */

/* True when the host asks the job to checkpoint now (periodically, or
 * before a vacate); it stays true until the job saves. Always false outside
 * andes. */
static inline bool andes_checkpoint_requested(void) {
#if ANDES_HOST
    return andes_sys_checkpoint_requested_() != 0;
#else
    return false;
#endif
}

/* Stores `len` bytes at `state` as the job's checkpoint, replacing the
 * previous one; the host keeps it with the job, durably, and
 * andes_checkpoint_load returns it when the job runs again. On failure, when
 * `message` is not NULL, *message is a malloc'd explanation (free it); NULL
 * on success. */
static inline andes_save_error andes_checkpoint_save(const void *state, size_t len,
                                                     char **message) {
    if (message) *message = NULL;
#if ANDES_HOST
    uint32_t area[3] = {0, 0, 0};
    andes_sys_save_(state, len, area);
    if (*(const uint8_t *)area == 0) return ANDES_SAVE_OK;
    char *reason = (char *)(uintptr_t)area[1];
    size_t n = area[2];
    if (message) *message = andes_format_("the host refused the checkpoint: %.*s", (int)n, n ? reason : "");
    if (n) free(reason);
    return ANDES_SAVE_REFUSED;
#else
    (void)state;
    (void)len;
    if (message) *message = andes_dup_n_("not running under andes", 23);
    return ANDES_SAVE_NOT_UNDER_ANDES;
#endif
}

/* The job's last saved state, malloc'd (free it), its length in *len (len
 * may be NULL): after a restart, what it saved before; in this run, its
 * latest save. NULL on a first start, outside andes, and when memory runs
 * out. A saved state of no bytes is a block of one byte, length 0. */
static inline void *andes_checkpoint_load(size_t *len) {
    if (len) *len = 0;
#if ANDES_HOST
    uint32_t area[3] = {0, 0, 0};
    andes_sys_load_(area);
    if (*(const uint8_t *)area == 0) return NULL;
    size_t n = area[2];
    if (n == 0) return malloc(1); /* the host's pointer is cabi_realloc's dangling one */
    if (len) *len = n;
    return (void *)(uintptr_t)area[1];
#else
    return NULL;
#endif
}

/* ------------------------------------------------------------------------ */
/* The job's own ClassAd (HTCondor's chirp): the pure parts.                 */

/* Whether `name` is a plain ClassAd attribute name: a letter or `_`, then
 * letters, digits and `_`. */
static inline bool andes_attr_is_valid_name(const char *name) {
    if (!name) return false;
    const unsigned char *p = (const unsigned char *)name;
    if (!(andes_is_alpha_(*p) || *p == '_')) return false;
    for (p++; *p; p++)
        if (!(andes_is_alpha_(*p) || andes_is_digit_(*p) || *p == '_')) return false;
    return true;
}

/* Whether a job may set attribute `name`: `Progress`, or a name beginning
 * with `Chirp`, compared case-insensitively as ClassAd names are. */
static inline bool andes_attr_is_settable(const char *name) {
    if (!andes_attr_is_valid_name(name)) return false;
    size_t n = strlen(name), chirp = sizeof ANDES_CHIRP_PREFIX - 1;
    return andes_eq_ignore_case_(name, n, ANDES_PROGRESS) ||
           (n >= chirp && andes_eq_ignore_case_(name, chirp, ANDES_CHIRP_PREFIX));
}

/* `len` bytes at `value` as a ClassAd string literal, malloc'd (free it;
 * NULL when memory runs out): in double quotes, `"` and `\` escaped, `\n`
 * `\t` `\r` `\b` `\f`, and every other byte outside printable ASCII as a
 * three-digit octal escape, as HTCondor's unparser writes it. */
static inline char *andes_string_literal(const char *value, size_t len) {
    char *out = (char *)malloc(len * 4 + 3), *o = out;
    if (!out) return NULL;
    *o++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)value[i];
        switch (b) {
        case '"': *o++ = '\\', *o++ = '"'; break;
        case '\\': *o++ = '\\', *o++ = '\\'; break;
        case '\n': *o++ = '\\', *o++ = 'n'; break;
        case '\t': *o++ = '\\', *o++ = 't'; break;
        case '\r': *o++ = '\\', *o++ = 'r'; break;
        case 0x08: *o++ = '\\', *o++ = 'b'; break;
        case 0x0c: *o++ = '\\', *o++ = 'f'; break;
        default:
            if (b >= 0x20 && b <= 0x7e) {
                *o++ = (char)b;
            } else {
                *o++ = '\\';
                *o++ = (char)('0' + (b >> 6));
                *o++ = (char)('0' + ((b >> 3) & 7));
                *o++ = (char)('0' + (b & 7));
            }
        }
    }
    *o++ = '"';
    *o = '\0';
    return out;
}

/* Whether `value`'s exact decimal expansion (a double's has at most 767
 * significant digits) is its first `nd` digits, `digits`, then a 5 and
 * zeros: halfway, and rounded down. */
static inline bool andes_halfway_rounded_down_(double value, const char *digits, size_t nd) {
    char all[800];
    snprintf(all, sizeof all, "%.*e", 780, value);
    const char *q = all + (all[0] == '-');
    size_t seen = 0;
    for (; *q != 'e'; q++) {
        if (*q == '.') continue;
        if (seen < nd ? *q != digits[seen] : seen == nd ? *q != '5' : *q != '0') return false;
        seen++;
    }
    return seen > nd;
}

/* The `nd` digits one unit in the last place up from `digits` (exponent
 * *exp): when they read back as `value`, they replace them; true then. */
static inline bool andes_digits_up_(double value, char *digits, size_t nd, int *exp) {
    char up[24], text[48];
    size_t i = nd;
    int up_exp = *exp;
    memcpy(up, digits, nd);
    while (i > 0 && up[i - 1] == '9') up[--i] = '0';
    if (i > 0) {
        up[i - 1]++;
    } else {
        up[0] = '1'; /* 9.99 -> 10.0: one more power of ten */
        up_exp++;
    }
    /* "D.DDDe±X", or "D.e±X" for one digit: strtod reads both. */
    snprintf(text, sizeof text, "%s%c.%.*se%d", value < 0 ? "-" : "", up[0], (int)(nd - 1),
             up + 1, up_exp);
    if (strtod(text, NULL) != value) return false;
    memcpy(digits, up, nd);
    *exp = up_exp;
    return true;
}

/* `value` as ClassAd expression text that evaluates to the same real, into
 * `out` (ANDES_REAL_LITERAL_MAX bytes), as the Rust SDK writes it: the
 * shortest decimal that reads back exactly, always with a `.` (`1.0`,
 * `0.42`, `1.0e-7`, exponents below 1e-4 and from 1e16), and `real("NaN")`,
 * `real("INF")` or `real("-INF")` for values that have no literal. Returns
 * `out`. */
static inline char *andes_real_literal(double value, char *out) {
    if (isnan(value)) return strcpy(out, "real(\"NaN\")");
    if (isinf(value)) return strcpy(out, value > 0 ? "real(\"INF\")" : "real(\"-INF\")");
    if (value == 0.0) return strcpy(out, signbit(value) ? "-0.0" : "0.0");
    /* The shortest digits that read back exactly, as Rust's formatting picks
     * them: at each length, the correctly rounded ones, but the next ones up
     * when those fall outside the values that read back as `value` (below a
     * power of two, where that range is narrower), or when `value` lies
     * exactly halfway between the two and printf rounded down to even (Rust
     * takes the larger). */
    char buf[40], digits[24];
    size_t nd = 0;
    int exp = 0;
    for (int precision = 0; precision < 17; precision++) {
        snprintf(buf, sizeof buf, "%.*e", precision, value);
        /* buf is [-]D[.DDD]e(+|-)XX: its digits and its exponent. */
        const char *p = buf + (buf[0] == '-');
        nd = 0;
        for (; *p != 'e'; p++)
            if (*p != '.') digits[nd++] = *p;
        exp = atoi(p + 1);
        double back = strtod(buf, NULL);
        if (back == value) {
            if (!andes_halfway_rounded_down_(value, digits, nd)) break;
            andes_digits_up_(value, digits, nd, &exp);
            break;
        }
        if (fabs(back) < fabs(value) && andes_digits_up_(value, digits, nd, &exp)) break;
    }
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = out;
    if (value < 0) *o++ = '-';
    double mag = fabs(value);
    if (mag < 1e-4 || mag >= 1e16) {
        *o++ = digits[0];
        *o++ = '.';
        if (nd > 1) {
            memcpy(o, digits + 1, nd - 1);
            o += nd - 1;
        } else {
            *o++ = '0';
        }
        snprintf(o, 8, "e%d", exp);
        return out;
    }
    if (exp < 0) {
        *o++ = '0';
        *o++ = '.';
        for (int z = -1; z > exp; z--) *o++ = '0';
        memcpy(o, digits, nd);
        o += nd;
    } else {
        for (int i = 0; i <= exp; i++) *o++ = (size_t)i < nd ? digits[i] : '0';
        *o++ = '.';
        if ((size_t)exp + 1 < nd) {
            memcpy(o, digits + exp + 1, nd - (size_t)exp - 1);
            o += nd - (size_t)exp - 1;
        } else {
            *o++ = '0';
        }
    }
    *o = '\0';
    return out;
}

/* Reads a ClassAd string literal, such as andes_attr_get returns for a
 * string attribute: the text between the quotes with its escapes resolved,
 * malloc'd with a NUL after it (free it), its length in *len (len may be
 * NULL; the text may hold NULs). NULL if `text`, less surrounding white
 * space, is not one string literal (or memory runs out). Unlike the Rust
 * SDK, bytes that are not UTF-8 are returned as they are. */
static inline char *andes_parse_string_literal(const char *text, size_t *len) {
    if (len) *len = 0;
    if (!text) return NULL;
    size_t n;
    const char *t = andes_trim_(text, &n);
    if (n < 2 || t[0] != '"' || t[n - 1] != '"') return NULL;
    const unsigned char *in = (const unsigned char *)t + 1;
    n -= 2;
    char *out = (char *)malloc(n + 1);
    if (!out) return NULL;
    size_t o = 0, i = 0;
    while (i < n) {
        unsigned char b = in[i++];
        if (b == '"') goto not_one; /* an unescaped quote: more than one literal */
        if (b != '\\') {
            out[o++] = (char)b;
            continue;
        }
        if (i >= n) goto not_one; /* a trailing `\` escaped the closing quote */
        unsigned char e = in[i++];
        switch (e) {
        case 'n': out[o++] = '\n'; break;
        case 't': out[o++] = '\t'; break;
        case 'r': out[o++] = '\r'; break;
        case 'b': out[o++] = 0x08; break;
        case 'f': out[o++] = 0x0c; break;
        case 'a': out[o++] = 0x07; break;
        case 'v': out[o++] = 0x0b; break;
        default:
            if (e >= '0' && e <= '7') {
                /* Up to three octal digits; a leading 4-7 allows two. */
                int max = e <= '3' ? 3 : 2, k = 1;
                unsigned v = (unsigned)(e - '0');
                while (k < max && i < n && in[i] >= '0' && in[i] <= '7') {
                    v = v * 8 + (unsigned)(in[i++] - '0');
                    k++;
                }
                out[o++] = (char)(unsigned char)v;
            } else {
                out[o++] = (char)e; /* `\\`, `\"`, `\'` and any other: itself */
            }
        }
    }
    out[o] = '\0';
    if (len) *len = o;
    return out;
not_one:
    free(out);
    return NULL;
}

/* Reads an integer literal, possibly with a leading `-` (`42`, `-7`), into
 * *out; false if `text` (less white space) is anything else or overflows. */
static inline bool andes_parse_int_literal(const char *text, int64_t *out) {
    if (!text) return false;
    size_t n;
    const char *t = andes_trim_(text, &n);
    bool neg = n > 0 && t[0] == '-';
    size_t i = neg ? 1 : 0;
    if (i == n) return false;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < n; i++) {
        if (!andes_is_digit_((unsigned char)t[i])) return false;
        unsigned d = (unsigned)(t[i] - '0');
        if (v > (limit - d) / 10) return false;
        v = v * 10 + d;
    }
    if (out) *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* Reads a real or integer literal, possibly with a leading `-`, into *out;
 * false for anything else (`inf` and `NaN` are attribute references in a
 * ClassAd, not numbers). */
static inline bool andes_parse_real_literal(const char *text, double *out) {
    if (!text) return false;
    size_t n;
    const char *t = andes_trim_(text, &n);
    size_t body = n > 0 && t[0] == '-' ? 1 : 0;
    if (body == n || !andes_is_digit_((unsigned char)t[body])) return false;
    char buf[64];
    if (n >= sizeof buf) return false;
    for (size_t i = body; i < n; i++) {
        char c = t[i];
        if (!(andes_is_digit_((unsigned char)c) || c == '.' || c == 'e' || c == 'E' || c == '+' ||
              c == '-'))
            return false;
    }
    memcpy(buf, t, n);
    buf[n] = '\0';
    char *end;
    int saved = errno;
    double v = strtod(buf, &end);
    errno = saved;
    if (end != buf + n) return false;
    if (out) *out = v;
    return true;
}

/* ------------------------------------------------------------------------ */
/* The job's own ClassAd: reading.                                           */

/* One attribute of the job's ad as ClassAd expression text (`"alice"` with
 * its quotes, `42`, `TARGET.Memory > 10`), malloc'd (free it). NULL when the
 * ad has no such attribute, outside andes, and when memory runs out. */
static inline char *andes_attr_get(const char *name) {
#if ANDES_HOST
    if (!name) return NULL;
    size_t n = strlen(name);
    /* The host would trap on these; no attribute has such a name. */
    if (n > ANDES_MAX_ATTR_TEXT || !andes_is_utf8_(name, n)) return NULL;
    uint32_t area[3] = {0, 0, 0};
    andes_sys_get_(name, n, area);
    if (*(const uint8_t *)area == 0) return NULL;
    size_t len = area[2];
    if (len == 0) return andes_dup_n_("", 0);
    char *text = (char *)(uintptr_t)area[1];
    char *out = (char *)realloc(text, len + 1);
    if (!out) {
        free(text);
        return NULL;
    }
    out[len] = '\0';
    return out;
#else
    (void)name;
    return NULL;
#endif
}

/* An attribute whose value is a string literal, unquoted and unescaped,
 * malloc'd (free it), its length in *len (len may be NULL). NULL if it is
 * missing or not a single string literal. */
static inline char *andes_attr_get_string(const char *name, size_t *len) {
    if (len) *len = 0;
    char *text = andes_attr_get(name);
    if (!text) return NULL;
    char *out = andes_parse_string_literal(text, len);
    free(text);
    return out;
}

/* An attribute whose value is an integer literal, into *out; false if it is
 * missing or anything else. */
static inline bool andes_attr_get_int(const char *name, int64_t *out) {
    char *text = andes_attr_get(name);
    bool ok = text && andes_parse_int_literal(text, out);
    free(text);
    return ok;
}

/* An attribute whose value is a real or integer literal, into *out; false if
 * it is missing or anything else. */
static inline bool andes_attr_get_real(const char *name, double *out) {
    char *text = andes_attr_get(name);
    bool ok = text && andes_parse_real_literal(text, out);
    free(text);
    return ok;
}

/* An attribute whose value is `true` or `false` (in any case), into *out;
 * false if it is missing or anything else. */
static inline bool andes_attr_get_bool(const char *name, bool *out) {
    char *text = andes_attr_get(name);
    if (!text) return false;
    size_t n;
    const char *t = andes_trim_(text, &n);
    bool ok = true, value = false;
    if (andes_eq_ignore_case_(t, n, "true"))
        value = true;
    else if (!andes_eq_ignore_case_(t, n, "false"))
        ok = false;
    free(text);
    if (ok && out) *out = value;
    return ok;
}

/* ------------------------------------------------------------------------ */
/* The job's own ClassAd: setting.                                           */

/* A short description of an error kind. */
static inline const char *andes_attr_strerror(andes_attr_error e) {
    switch (e) {
    case ANDES_ATTR_OK: return "ok";
    case ANDES_ATTR_NOT_SETTABLE: return "a job may not set this attribute";
    case ANDES_ATTR_INVALID_NAME: return "not a ClassAd attribute name";
    case ANDES_ATTR_INVALID_VALUE: return "invalid value";
    case ANDES_ATTR_REFUSED: return "the host refused the update";
    case ANDES_ATTR_NOT_UNDER_ANDES: return "not running under andes";
    }
    return "unknown error";
}

/* Fails with `e`, its message (as the Rust SDK's AttrError displays it) in
 * *message when message is not NULL. */
static inline andes_attr_error andes_attr_fail_(andes_attr_error e, const char *name,
                                                const char *reason, size_t reason_len,
                                                char **message) {
    if (!message) return e;
    int rl = (int)reason_len;
    switch (e) {
    case ANDES_ATTR_NOT_SETTABLE:
        *message = andes_format_("a job may not set attribute `%s`: only `" ANDES_PROGRESS
                                 "` and attributes whose names begin with `" ANDES_CHIRP_PREFIX
                                 "` (for example `ChirpResult`) can be set",
                                 name);
        break;
    case ANDES_ATTR_INVALID_NAME:
        *message = andes_format_("`%s` is not a ClassAd attribute name: use a letter or `_` "
                                 "followed by letters, digits and `_`",
                                 name);
        break;
    case ANDES_ATTR_INVALID_VALUE:
        *message = andes_format_("invalid value for attribute `%s`: %.*s", name, rl, reason);
        break;
    case ANDES_ATTR_REFUSED:
        *message = andes_format_("the host refused to set attribute `%s`: %.*s", name, rl, reason);
        break;
    case ANDES_ATTR_NOT_UNDER_ANDES:
        *message = andes_format_("not running under andes: there is no job ad to update");
        break;
    case ANDES_ATTR_OK: break;
    }
    return e;
}

/* Sets attribute `name` of the job's ad to the ClassAd expression
 * `value_expr`, taken as it is: ("ChirpCount", "42"), ("ChirpName",
 * "\"alice\""). Prefer the typed setters to set a plain value. Only
 * `Progress` and names beginning with `Chirp` may be set; anything else
 * (`ClusterId`, `Owner`, `JobStatus`, ...) fails with
 * ANDES_ATTR_NOT_SETTABLE without asking the host. On failure, when
 * `message` is not NULL, *message is a malloc'd explanation (free it); NULL
 * on success. */
static inline andes_attr_error andes_attr_set(const char *name, const char *value_expr,
                                              char **message) {
    if (message) *message = NULL;
    if (!name) name = "";
    if (!andes_attr_is_valid_name(name))
        return andes_attr_fail_(ANDES_ATTR_INVALID_NAME, name, "", 0, message);
    if (!andes_attr_is_settable(name))
        return andes_attr_fail_(ANDES_ATTR_NOT_SETTABLE, name, "", 0, message);
    size_t n;
    if (!value_expr) value_expr = "";
    andes_trim_(value_expr, &n);
    if (n == 0) {
        const char *r = "the expression is empty";
        return andes_attr_fail_(ANDES_ATTR_INVALID_VALUE, name, r, strlen(r), message);
    }
    size_t len = strlen(value_expr);
    if (!andes_is_utf8_(value_expr, len)) {
        const char *r = "the expression is not UTF-8";
        return andes_attr_fail_(ANDES_ATTR_INVALID_VALUE, name, r, strlen(r), message);
    }
    if (len > ANDES_MAX_ATTR_TEXT || strlen(name) > ANDES_MAX_ATTR_TEXT) {
        const char *r = "the expression is longer than the 65536 bytes the host reads";
        return andes_attr_fail_(ANDES_ATTR_INVALID_VALUE, name, r, strlen(r), message);
    }
#if ANDES_HOST
    uint32_t area[3] = {0, 0, 0};
    andes_sys_set_(name, strlen(name), value_expr, len, area);
    if (*(const uint8_t *)area == 0) return ANDES_ATTR_OK;
    char *reason = (char *)(uintptr_t)area[1];
    size_t rn = area[2];
    andes_attr_fail_(ANDES_ATTR_REFUSED, name, rn ? reason : "", rn, message);
    if (rn) free(reason);
    return ANDES_ATTR_REFUSED;
#else
    return andes_attr_fail_(ANDES_ATTR_NOT_UNDER_ANDES, name, "", 0, message);
#endif
}

/* Sets attribute `name` to an integer literal. */
static inline andes_attr_error andes_attr_set_int(const char *name, int64_t value,
                                                  char **message) {
    char text[24];
    snprintf(text, sizeof text, "%lld", (long long)value);
    return andes_attr_set(name, text, message);
}

/* Sets attribute `name` to a real literal (see andes_real_literal). */
static inline andes_attr_error andes_attr_set_real(const char *name, double value,
                                                   char **message) {
    char text[ANDES_REAL_LITERAL_MAX];
    return andes_attr_set(name, andes_real_literal(value, text), message);
}

/* Sets `Progress` to `fraction`, a real from 0 (just started) to 1 (done).
 * A finite value outside that range is clamped into it; NaN and infinities
 * fail with ANDES_ATTR_INVALID_VALUE. */
static inline andes_attr_error andes_attr_set_progress(double fraction, char **message) {
    if (message) *message = NULL;
    if (!isfinite(fraction)) {
        const char *shown = isnan(fraction) ? "NaN" : fraction > 0 ? "inf" : "-inf";
        char *r = andes_format_("progress must be a number from 0 to 1, not %s", shown);
        andes_attr_error e = andes_attr_fail_(ANDES_ATTR_INVALID_VALUE, ANDES_PROGRESS,
                                              r ? r : "", r ? strlen(r) : 0, message);
        free(r);
        return e;
    }
    if (fraction < 0.0) fraction = 0.0;
    if (fraction > 1.0) fraction = 1.0;
    return andes_attr_set_real(ANDES_PROGRESS, fraction, message);
}

/* Sets attribute `name` to a string literal holding `len` bytes at `value`
 * (see andes_string_literal): any bytes are allowed. */
static inline andes_attr_error andes_attr_set_string_n(const char *name, const char *value,
                                                       size_t len, char **message) {
    if (message) *message = NULL;
    if (!name) name = "";
    /* The name's checks come first, as in the Rust SDK. */
    if (!andes_attr_is_valid_name(name))
        return andes_attr_fail_(ANDES_ATTR_INVALID_NAME, name, "", 0, message);
    if (!andes_attr_is_settable(name))
        return andes_attr_fail_(ANDES_ATTR_NOT_SETTABLE, name, "", 0, message);
    char *text = andes_string_literal(value ? value : "", value ? len : 0);
    if (!text) {
        const char *r = "out of memory writing the string literal";
        return andes_attr_fail_(ANDES_ATTR_INVALID_VALUE, name, r, strlen(r), message);
    }
    andes_attr_error e = andes_attr_set(name, text, message);
    free(text);
    return e;
}

/* Sets attribute `name` to a string literal holding the C string `value`. */
static inline andes_attr_error andes_attr_set_string(const char *name, const char *value,
                                                     char **message) {
    return andes_attr_set_string_n(name, value, value ? strlen(value) : 0, message);
}

/* Sets attribute `name` to `true` or `false`. */
static inline andes_attr_error andes_attr_set_bool(const char *name, bool value,
                                                   char **message) {
    return andes_attr_set(name, value ? "true" : "false", message);
}

#ifdef __cplusplus
}
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

#endif /* ANDES_H */
