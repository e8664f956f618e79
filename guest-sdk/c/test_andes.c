/*
 * The tests of andes.h. Built natively, they are the Rust SDK's unit tests
 * (guest-sdk/src/attr.rs, lib.rs, log.rs, checkpoint.rs) in C: the pure
 * parts, and how the header behaves outside andes. Built for wasm32-wasi,
 * they call the host: run by `andes run --ad` with a job ad holding
 * Owner = "alice", RequestCpus = 3, WantX = true and Ratio = 0.5, they read
 * and set attributes, save and load states, and get the host's refusals
 * (strings the host allocates with the header's cabi_realloc).
 * samples/guests/build.sh builds both (samples/target/native/test_andes and
 * test_andes.wasm beside the samples); tests/system/guests.rs runs them.
 * Each prints `ok: N checks` and exits 0, or names each failed check and
 * exits 1.
 */
#include "andes.h"

#include <float.h>

static int checks, failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            failures++;                                                              \
            fprintf(stderr, "test_andes.c:%d: check failed: %s\n", __LINE__, #cond); \
        }                                                                            \
    } while (0)

/* The literal of `len` bytes at `value` is `want`. */
static void literal_is(const char *value, size_t len, const char *want) {
    char *got = andes_string_literal(value, len);
    checks++;
    if (!got || strcmp(got, want) != 0) {
        failures++;
        fprintf(stderr, "string literal: got %s, want %s\n", got ? got : "(null)", want);
    }
    free(got);
}

static double from_bits(uint64_t bits) {
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static void real_is(double v, const char *want) {
    char got[ANDES_REAL_LITERAL_MAX];
    andes_real_literal(v, got);
    checks++;
    if (strcmp(got, want) != 0) {
        failures++;
        fprintf(stderr, "real literal of %.17g: got %s, want %s\n", v, got, want);
    }
}

/* Parsing `text` gives the `len` bytes at `want`, or nothing when want is NULL. */
static void parses_to(const char *text, const char *want, size_t len) {
    size_t n;
    char *got = andes_parse_string_literal(text, &n);
    checks++;
    bool ok = want ? (got && n == len && memcmp(got, want, len) == 0 && got[n] == '\0') : !got;
    if (!ok) {
        failures++;
        fprintf(stderr, "parse_string_literal(%s): got %s\n", text, got ? got : "(null)");
    }
    free(got);
}

static void round_trips(const char *s, size_t len) {
    char *lit = andes_string_literal(s, len);
    parses_to(lit, s, len);
    free(lit);
}

static void whitelist(void) {
    const char *ok[] = {"Progress", "progress", "PROGRESS", "ChirpResult", "chirp_x", "CHIRPY",
                        "Chirp"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) CHECK(andes_attr_is_settable(ok[i]));
    const char *refused[] = {"ClusterId",    "ProcId",    "Owner",  "JobStatus", "HoldReason",
                             "Requirements", "ProgressX", "XChirp", "Chir"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        const char *name = refused[i];
        CHECK(!andes_attr_is_settable(name));
        char *msg = NULL;
        CHECK(andes_attr_set(name, "1", &msg) == ANDES_ATTR_NOT_SETTABLE);
        CHECK(msg && strstr(msg, name) && strstr(msg, "Chirp"));
        free(msg);
        /* Every setter checks the name first. */
        CHECK(andes_attr_set_int(name, 1, NULL) == ANDES_ATTR_NOT_SETTABLE);
        CHECK(andes_attr_set_string(name, "x", NULL) == ANDES_ATTR_NOT_SETTABLE);
        CHECK(andes_attr_set_real(name, 1.0, NULL) == ANDES_ATTR_NOT_SETTABLE);
        CHECK(andes_attr_set_bool(name, true, NULL) == ANDES_ATTR_NOT_SETTABLE);
    }
    char *msg = NULL;
    andes_attr_set("JobStatus", "4", &msg);
    CHECK(msg && strcmp(msg, "a job may not set attribute `JobStatus`: only `Progress` and "
                             "attributes whose names begin with `Chirp` (for example "
                             "`ChirpResult`) can be set") == 0);
    free(msg);
}

static void invalid_names(void) {
    const char *bad[] = {"", "1Chirp", "Chirp.X", "Chirp X", "Chirp-X", "Chirp\xc3\xa9",
                         "\"Progress\""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(!andes_attr_is_valid_name(bad[i]));
        CHECK(!andes_attr_is_settable(bad[i]));
        char *msg = NULL;
        CHECK(andes_attr_set(bad[i], "1", &msg) == ANDES_ATTR_INVALID_NAME);
        CHECK(msg && strstr(msg, "is not a ClassAd attribute name"));
        free(msg);
        CHECK(andes_attr_set_string(bad[i], "x", NULL) == ANDES_ATTR_INVALID_NAME);
    }
    CHECK(!andes_attr_is_valid_name(NULL));
    CHECK(andes_attr_set(NULL, "1", NULL) == ANDES_ATTR_INVALID_NAME);
    CHECK(andes_attr_is_valid_name("_x9"));
}

static void values_refused_locally(void) {
    char *msg = NULL;
    CHECK(andes_attr_set("ChirpX", "  ", &msg) == ANDES_ATTR_INVALID_VALUE);
    CHECK(msg && strcmp(msg, "invalid value for attribute `ChirpX`: the expression is empty") == 0);
    free(msg);
    CHECK(andes_attr_set("ChirpX", NULL, NULL) == ANDES_ATTR_INVALID_VALUE);
    CHECK(andes_attr_set("ChirpX", "\"\xff\"", NULL) == ANDES_ATTR_INVALID_VALUE);
    double bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < 3; i++) {
        msg = NULL;
        CHECK(andes_attr_set_progress(bad[i], &msg) == ANDES_ATTR_INVALID_VALUE);
        CHECK(msg && strstr(msg, "progress must be a number from 0 to 1"));
        free(msg);
    }
}

#if !ANDES_HOST
static void natively_there_is_no_host(void) {
    CHECK(!andes_vacate_requested());
    uint64_t deadline = 7;
    CHECK(!andes_vacate_deadline(&deadline) && deadline == 7);
    double left = 7;
    CHECK(!andes_vacate_time_left(&left) && left == 7);
    CHECK(!andes_checkpoint_requested());
    size_t len = 9;
    CHECK(andes_checkpoint_load(&len) == NULL && len == 0);
    char *msg = NULL;
    CHECK(andes_checkpoint_save("x", 1, &msg) == ANDES_SAVE_NOT_UNDER_ANDES);
    CHECK(msg && strcmp(msg, "not running under andes") == 0);
    free(msg);
    CHECK(andes_attr_get("Owner") == NULL);
    CHECK(andes_attr_get_string("Owner", &len) == NULL);
    int64_t i = 5;
    double r = 5;
    bool b = true;
    CHECK(!andes_attr_get_int("RequestCpus", &i) && i == 5);
    CHECK(!andes_attr_get_real("RequestCpus", &r) && r == 5);
    CHECK(!andes_attr_get_bool("WantX", &b) && b);
    msg = NULL;
    CHECK(andes_attr_set("ChirpX", "1", &msg) == ANDES_ATTR_NOT_UNDER_ANDES);
    CHECK(msg && strcmp(msg, "not running under andes: there is no job ad to update") == 0);
    free(msg);
    CHECK(andes_attr_set_progress(0.5, NULL) == ANDES_ATTR_NOT_UNDER_ANDES);
    CHECK(andes_attr_set_progress(7.0, NULL) == ANDES_ATTR_NOT_UNDER_ANDES);
    CHECK(andes_attr_set_int("ChirpX", 1, NULL) == ANDES_ATTR_NOT_UNDER_ANDES);
    CHECK(andes_attr_set_string("ChirpX", "x", NULL) == ANDES_ATTR_NOT_UNDER_ANDES);
    CHECK(andes_attr_set_bool("ChirpX", true, NULL) == ANDES_ATTR_NOT_UNDER_ANDES);
    CHECK(andes_attr_set_real("ChirpX", 1.5, NULL) == ANDES_ATTR_NOT_UNDER_ANDES);
    /* Successes leave no message; failures without a place for one are fine. */
    CHECK(andes_attr_set("ChirpX", "1", NULL) == ANDES_ATTR_NOT_UNDER_ANDES);
    /* Log lines go to standard error; none of this may crash. */
    andes_log_debug("d");
    andes_log_info("i");
    andes_log_warn("w");
    andes_log_error("e");
    andes_logf(ANDES_LOG_INFO, "formatted %d %s", 42, "line");
    andes_log((andes_log_level)9, "an unknown level is info");
    andes_log(ANDES_LOG_INFO, NULL);
    CHECK(strcmp(andes_log_level_str(ANDES_LOG_WARN), "warn") == 0);
    CHECK(ANDES_LOG_DEBUG == 0 && ANDES_LOG_INFO == 1 && ANDES_LOG_WARN == 2 &&
          ANDES_LOG_ERROR == 3);
}
#endif

static void string_literals(void) {
    literal_is("", 0, "\"\"");
    literal_is("alice", 5, "\"alice\"");
    literal_is("a\"b\\c", 5, "\"a\\\"b\\\\c\"");
    literal_is("1\n2\t3\r\b\f", 8, "\"1\\n2\\t3\\r\\b\\f\"");
    literal_is("\0\x01\x7f", 3, "\"\\000\\001\\177\"");
    literal_is("it's", 4, "\"it's\"");
    literal_is("\xc3\xbc", 2, "\"\\303\\274\"");
    literal_is("say \"hi\"\n", 9, "\"say \\\"hi\\\"\\n\"");
    const char *samples[] = {"", "plain", "q\"uote", "back\\slash\\", "\\101",
                             "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xe2\x9c\x93"};
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++)
        round_trips(samples[i], strlen(samples[i]));
    round_trips("\n\t\r\b\f\0", 6);
    unsigned char all[256];
    for (int i = 0; i < 256; i++) all[i] = (unsigned char)i;
    round_trips((const char *)all, sizeof all);
}

static void parsing_string_literals(void) {
    parses_to("  \"x\"  ", "x", 1);
    parses_to("\"a\\tb\"", "a\tb", 3);
    parses_to("\"\\a\\v\\q\\'\\?\"", "\a\vq'?", 5);
    parses_to("\"\\101\\60\\0\"", "A0\0", 3);
    parses_to("\"\\477\"", "'7", 2);
    parses_to("\"\"", "", 0);
    const char *not_one[] = {"x", "\"x", "x\"", "\"", "\"a\"+\"b\"", "\"a\" + \"b\"", "\"a\\\"",
                             "42"};
    for (size_t i = 0; i < sizeof not_one / sizeof *not_one; i++) parses_to(not_one[i], NULL, 0);
    CHECK(andes_parse_string_literal(NULL, NULL) == NULL);
}

static void real_literals(void) {
    real_is(0.0, "0.0");
    real_is(-0.0, "-0.0");
    real_is(0.42, "0.42");
    real_is(0.5, "0.5");
    real_is(1.0, "1.0");
    real_is(3.0, "3.0");
    real_is(-2.5, "-2.5");
    real_is(1e16, "1.0e16");
    real_is(1e20, "1.0e20");
    real_is(1.5e-7, "1.5e-7");
    real_is(0.0001, "0.0001");
    real_is(1e15, "1000000000000000.0");
    real_is(123456789.0, "123456789.0");
    real_is(1.0 / 3.0, "0.3333333333333333");
    real_is(1.6449340668482264, "1.6449340668482264");
    real_is(DBL_MAX, "1.7976931348623157e308");
    real_is(DBL_MIN, "2.2250738585072014e-308");
    real_is(5e-324, "5.0e-324");
    /* Powers of two, where the reals that read back as one are fewer below
     * it than above: the shortest digits are not always the nearest ones. */
    real_is(from_bits(0x0060000000000000), "7.120236347223045e-307");
    real_is(from_bits(0x0100000000000000), "7.291122019556398e-304");
    real_is(from_bits(0x13e0000000000000), "5.940911144672375e-213");
    real_is(-from_bits(0x0d70000000000000), "-5.858190679279809e-244");
    /* Halfway between two shortest candidates (...6.25): the larger, as in
     * Rust, where printf rounds to the even one. */
    real_is(from_bits(0x431a101651bf6e09), "1834009360325506.3");
    real_is(from_bits(0x42d80bd2a187d0e8), "105756230033219.63");
    real_is(from_bits(0xc308162bcaca77ba), "-847472097840887.3");
    real_is(NAN, "real(\"NaN\")");
    real_is(INFINITY, "real(\"INF\")");
    real_is(-INFINITY, "real(\"-INF\")");
    double vs[] = {0.1, 1.0 / 3.0, 6.02e23, -1e-300, 123456789.0, DBL_MIN, 2.5e-5, 9.999e15};
    for (size_t i = 0; i < sizeof vs / sizeof *vs; i++) {
        char lit[ANDES_REAL_LITERAL_MAX];
        double back = 0;
        andes_real_literal(vs[i], lit);
        CHECK(strchr(lit, '.') != NULL);
        CHECK(andes_parse_real_literal(lit, &back) && back == vs[i]);
    }
}

static void number_literals(void) {
    int64_t i = 0;
    CHECK(andes_parse_int_literal(" 42 ", &i) && i == 42);
    CHECK(andes_parse_int_literal("-7", &i) && i == -7);
    CHECK(andes_parse_int_literal("9223372036854775807", &i) && i == INT64_MAX);
    CHECK(andes_parse_int_literal("-9223372036854775808", &i) && i == INT64_MIN);
    const char *bad_int[] = {"",    "-",   "+1",    "1.0", "0x10", "\"1\"", "1 + 1",
                             "99999999999999999999", "9223372036854775808"};
    for (size_t k = 0; k < sizeof bad_int / sizeof *bad_int; k++)
        CHECK(!andes_parse_int_literal(bad_int[k], &i));
    double r = 0;
    CHECK(andes_parse_real_literal("2", &r) && r == 2.0);
    CHECK(andes_parse_real_literal("-2.5e3", &r) && r == -2500.0);
    CHECK(andes_parse_real_literal(" 0.25 ", &r) && r == 0.25);
    const char *bad_real[] = {"inf", "NaN", "-inf", "", ".5", "x", "real(\"INF\")", "1.0.0", "1e"};
    for (size_t k = 0; k < sizeof bad_real / sizeof *bad_real; k++)
        CHECK(!andes_parse_real_literal(bad_real[k], &r));
}

#if ANDES_HOST
/* The text of attribute `name` is `want` (NULL: no such attribute). */
static void get_is(const char *name, const char *want) {
    char *got = andes_attr_get(name);
    checks++;
    if (want ? !got || strcmp(got, want) != 0 : got != NULL) {
        failures++;
        fprintf(stderr, "get(%s): got %s, want %s\n", name, got ? got : "(none)",
                want ? want : "(none)");
    }
    free(got);
}

static void with_the_host(void) {
    CHECK(!andes_vacate_requested());
    CHECK(!andes_vacate_deadline(NULL));
    CHECK(!andes_vacate_time_left(NULL));
    CHECK(!andes_checkpoint_requested());
    size_t len = 9;
    CHECK(andes_checkpoint_load(&len) == NULL && len == 0);

    get_is("Owner", "\"alice\"");
    get_is("owner", "\"alice\"");
    get_is("NoSuchAttribute", NULL);
    get_is("Not a name", NULL);
    get_is("Bad\xff", NULL); /* not UTF-8: not asked, as the host would trap */
    char *owner = andes_attr_get_string("Owner", &len);
    CHECK(owner && strcmp(owner, "alice") == 0 && len == 5);
    free(owner);
    CHECK(andes_attr_get_string("RequestCpus", NULL) == NULL);
    int64_t cpus = 0;
    CHECK(andes_attr_get_int("RequestCpus", &cpus) && cpus == 3);
    CHECK(!andes_attr_get_int("Owner", &cpus));
    double ratio = 0;
    CHECK(andes_attr_get_real("Ratio", &ratio) && ratio == 0.5);
    CHECK(andes_attr_get_real("RequestCpus", &ratio) && ratio == 3.0);
    bool want = false;
    CHECK(andes_attr_get_bool("WantX", &want) && want);
    CHECK(!andes_attr_get_bool("Owner", &want));

    char *msg = NULL;
    CHECK(andes_attr_set_int("ChirpCount", 42, &msg) == ANDES_ATTR_OK && msg == NULL);
    get_is("ChirpCount", "42");
    CHECK(andes_attr_set_string("ChirpName", "say \"hi\"\n\xc3\xa9", NULL) == ANDES_ATTR_OK);
    char *name = andes_attr_get_string("ChirpName", &len);
    CHECK(name && strcmp(name, "say \"hi\"\n\xc3\xa9") == 0);
    free(name);
    CHECK(andes_attr_set_string_n("ChirpBytes", "a\0b", 3, NULL) == ANDES_ATTR_OK);
    name = andes_attr_get_string("ChirpBytes", &len);
    CHECK(name && len == 3 && memcmp(name, "a\0b", 3) == 0);
    free(name);
    CHECK(andes_attr_set_progress(0.25, NULL) == ANDES_ATTR_OK);
    CHECK(andes_attr_get_real("Progress", &ratio) && ratio == 0.25);
    CHECK(andes_attr_set_progress(2.0, NULL) == ANDES_ATTR_OK);
    CHECK(andes_attr_get_real("Progress", &ratio) && ratio == 1.0); /* clamped */
    CHECK(andes_attr_set_real("ChirpReal", 1e20, NULL) == ANDES_ATTR_OK);
    CHECK(andes_attr_get_real("ChirpReal", &ratio) && ratio == 1e20);
    CHECK(andes_attr_set_bool("ChirpDone", false, NULL) == ANDES_ATTR_OK);
    CHECK(andes_attr_get_bool("ChirpDone", &want) && !want);
    CHECK(andes_attr_set("ChirpExpr", "RequestCpus * 2", NULL) == ANDES_ATTR_OK);
    get_is("ChirpExpr", "RequestCpus * 2");

    /* Refused here, before the host is asked. */
    CHECK(andes_attr_set("JobStatus", "4", NULL) == ANDES_ATTR_NOT_SETTABLE);
    CHECK(andes_attr_set("Owner", "\"mallory\"", NULL) == ANDES_ATTR_NOT_SETTABLE);
    get_is("Owner", "\"alice\"");
    /* Refused by the host, which says why. */
    msg = NULL;
    CHECK(andes_attr_set("ChirpBad", "1 +", &msg) == ANDES_ATTR_REFUSED);
    CHECK(msg && strstr(msg, "the host refused to set attribute `ChirpBad`: ") == msg &&
          strstr(msg, "not a ClassAd expression"));
    free(msg);
    get_is("ChirpBad", NULL);

    CHECK(andes_checkpoint_save("state", 5, &msg) == ANDES_SAVE_OK && msg == NULL);
    char *state = (char *)andes_checkpoint_load(&len);
    CHECK(state && len == 5 && memcmp(state, "state", 5) == 0);
    free(state);
    CHECK(andes_checkpoint_save("", 0, NULL) == ANDES_SAVE_OK);
    state = (char *)andes_checkpoint_load(&len);
    CHECK(state != NULL && len == 0);
    free(state);

    andes_log_info("test_andes: a line at info");
    andes_logf(ANDES_LOG_WARN, "test_andes: %d at warn", 2);
}
#endif

int main(void) {
#if ANDES_HOST
    with_the_host();
#else
    natively_there_is_no_host();
#endif
    whitelist();
    invalid_names();
    values_refused_locally();
    string_literals();
    parsing_string_literals();
    real_literals();
    number_literals();
    if (failures) {
        fprintf(stderr, "%d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("ok: %d checks\n", checks);
    return 0;
}
