/*
 * coopsum: the cooperative sample `coop` (samples/coop) in C, through the C
 * guest SDK (guest-sdk/c/andes.h).
 *
 *   coopsum [TERMS]
 *
 * Sums 1/k^2 for k = 1..=TERMS (default 2000000000) in chunks of one million
 * terms. Between chunks:
 *
 * - when the host asks for a checkpoint (a periodic one, or the first step of
 *   a vacate), it saves where it stands and goes on;
 * - when the host asks it to vacate, it saves and exits with code 85
 *   (HTCondor's checkpoint_exit_code convention), so that it is run again;
 * - every 16 chunks, and at the end, it sets its Progress attribute.
 *
 * At start it resumes from the saved state when there is one, says so on
 * standard error and in a log line. The state is coop's: TERMS, the terms
 * done and the sum's bits, 24 bytes little-endian. The sum is computed in a
 * fixed order and saved with every bit, so standard output is the same however
 * many times the job was interrupted, and the same as coop's. It also shows
 * that the SDK refuses to set JobStatus (on standard error). A bad argument
 * exits with code 2.
 *
 * It builds natively too (samples/target/native/coopsum), where it is never
 * vacated, and as C++.
 */
#include "andes.h"

#include <inttypes.h>

#define DEFAULT_TERMS 2000000000ULL
#define CHUNK 1000000ULL

static void put_u64(unsigned char *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

static void encode(unsigned char b[24], uint64_t terms, uint64_t done, double sum) {
    uint64_t bits;
    memcpy(&bits, &sum, sizeof bits);
    put_u64(b, terms);
    put_u64(b + 8, done);
    put_u64(b + 16, bits);
}

static void save(uint64_t terms, uint64_t done, double sum) {
    unsigned char state[24];
    char *why = NULL;
    encode(state, terms, done, sum);
    if (andes_checkpoint_save(state, sizeof state, &why) != ANDES_SAVE_OK)
        fprintf(stderr, "coopsum: checkpoint not saved: %s\n", why ? why : "out of memory");
    free(why);
}

static void progress(double fraction) {
    char *why = NULL;
    andes_attr_error e = andes_attr_set_progress(fraction, &why);
    if (e != ANDES_ATTR_OK && e != ANDES_ATTR_NOT_UNDER_ANDES)
        fprintf(stderr, "coopsum: Progress not set: %s\n", why ? why : "?");
    free(why);
}

int main(int argc, char **argv) {
    uint64_t terms = DEFAULT_TERMS;
    if (argc > 1) {
        char digits[32];
        size_t n = 0;
        for (const char *p = argv[1]; *p && n < sizeof digits - 1; p++)
            if (*p != '_') digits[n++] = *p;
        digits[n] = '\0';
        char *end;
        errno = 0;
        unsigned long long t = strtoull(digits, &end, 10);
        if (n == 0 || *end || errno || digits[0] == '-' || digits[0] == '+') {
            fprintf(stderr, "coopsum: TERMS must be a whole number, not `%s`\n", argv[1]);
            return 2;
        }
        terms = t;
    }

    /* Identity and state belong to andes: the SDK refuses before asking. */
    char *why = NULL;
    if (andes_attr_set("JobStatus", "4", &why) == ANDES_ATTR_NOT_SETTABLE)
        fprintf(stderr, "coopsum: JobStatus: %s\n", why);
    free(why);

    uint64_t done = 0;
    double sum = 0.0;
    size_t len = 0;
    unsigned char *state = (unsigned char *)andes_checkpoint_load(&len);
    if (state && len == 24 && get_u64(state) == terms && get_u64(state + 8) <= terms) {
        uint64_t bits = get_u64(state + 16);
        done = get_u64(state + 8);
        memcpy(&sum, &bits, sizeof sum);
        fprintf(stderr, "coopsum: resuming at term %" PRIu64 "\n", done + 1);
        andes_logf(ANDES_LOG_INFO, "resuming from a saved state at term %" PRIu64, done + 1);
    }
    free(state);

    uint64_t chunks = 0;
    while (done < terms) {
        uint64_t end = done + CHUNK < terms ? done + CHUNK : terms;
        for (uint64_t k = done + 1; k <= end; k++) {
            double kk = (double)k;
            sum += 1.0 / (kk * kk);
        }
        done = end;
        if (++chunks % 16 == 0) progress((double)done / (double)terms);
        bool vacate = andes_vacate_requested();
        if (andes_checkpoint_requested() || vacate) save(terms, done, sum);
        if (vacate) {
            fprintf(stderr, "coopsum: vacated after %" PRIu64 " of %" PRIu64 " terms\n", done,
                    terms);
            return ANDES_CHECKPOINT_EXIT_CODE;
        }
    }
    progress(1.0);
    char lit[ANDES_REAL_LITERAL_MAX];
    printf("sum of 1/k^2 for k = 1..=%" PRIu64 ": %s\n", terms, andes_real_literal(sum, lit));
    return 0;
}
