/*
 * textstat: word statistics of a text file, in portable C.
 *
 *   textstat INPUT OUTPUT [ROUNDS]
 *
 * Reads INPUT, counts its words ROUNDS times (default 1) into a hash table,
 * appending one line per round to the journal `textstat.journal`. At the end
 * it reads the journal back from its start, writes the twenty most frequent
 * words and the journal's checksum to OUTPUT, removes the journal and prints
 * a summary. Nothing here knows about andes: it is plain C and stdio, built
 * for wasm32-wasi and natively from the same source, and both builds must
 * write the same bytes.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOURNAL "textstat.journal"
#define TOP 20

struct entry {
    const char *word; /* points into the text; NULL when the slot is free */
    size_t len;
    uint64_t count;
};

static struct entry *table;
static size_t table_size;
static size_t distinct;

static uint64_t fnv1a(const char *s, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static void grow(void);

static void add(const char *w, size_t n) {
    if (2 * (distinct + 1) > table_size) grow();
    size_t i = fnv1a(w, n, 14695981039346656037ULL) & (table_size - 1);
    while (table[i].word) {
        if (table[i].len == n && memcmp(table[i].word, w, n) == 0) {
            table[i].count++;
            return;
        }
        i = (i + 1) & (table_size - 1);
    }
    table[i].word = w;
    table[i].len = n;
    table[i].count = 1;
    distinct++;
}

static void grow(void) {
    struct entry *old = table;
    size_t old_size = table_size;
    table_size = table_size ? table_size * 2 : 1024;
    table = calloc(table_size, sizeof *table);
    if (!table) {
        fprintf(stderr, "textstat: out of memory\n");
        exit(1);
    }
    distinct = 0;
    for (size_t i = 0; i < old_size; i++) {
        if (old[i].word) {
            size_t j = fnv1a(old[i].word, old[i].len, 14695981039346656037ULL) & (table_size - 1);
            while (table[j].word) j = (j + 1) & (table_size - 1);
            table[j] = old[i];
            distinct++;
        }
    }
    free(old);
}

static int by_count(const void *a, const void *b) {
    const struct entry *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->word, y->word, n);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: textstat INPUT OUTPUT [ROUNDS]\n");
        return 2;
    }
    long rounds = argc == 4 ? strtol(argv[3], NULL, 10) : 1;
    if (rounds < 1) {
        fprintf(stderr, "textstat: ROUNDS must be a positive number, not %s\n", argv[3]);
        return 2;
    }
    FILE *in = fopen(argv[1], "rb");
    if (!in) {
        perror(argv[1]);
        return 1;
    }
    if (fseek(in, 0, SEEK_END) != 0) {
        perror(argv[1]);
        return 1;
    }
    long size = ftell(in);
    rewind(in);
    char *text = malloc(size > 0 ? (size_t)size : 1);
    if (!text || fread(text, 1, (size_t)size, in) != (size_t)size) {
        fprintf(stderr, "textstat: cannot read %s\n", argv[1]);
        return 1;
    }
    fclose(in);
    /* Lower-case the text once so that words compare without case. */
    for (long i = 0; i < size; i++) text[i] = (char)tolower((unsigned char)text[i]);

    FILE *journal = fopen(JOURNAL, "w+");
    if (!journal) {
        perror(JOURNAL);
        return 1;
    }
    uint64_t words = 0;
    for (long r = 0; r < rounds; r++) {
        free(table);
        table = NULL;
        table_size = 0;
        distinct = 0;
        words = 0;
        long i = 0;
        while (i < size) {
            while (i < size && !isalnum((unsigned char)text[i])) i++;
            long start = i;
            while (i < size && isalnum((unsigned char)text[i])) i++;
            if (i > start) {
                add(text + start, (size_t)(i - start));
                words++;
            }
        }
        uint64_t h = 14695981039346656037ULL;
        for (size_t k = 0; k < table_size; k++)
            if (table[k].word) h = fnv1a((const char *)&table[k].count, sizeof table[k].count, h);
        fprintf(journal, "round %ld: %llu words, %zu distinct, table %016llx\n", r + 1,
                (unsigned long long)words, distinct, (unsigned long long)h);
        fflush(journal);
    }

    /* Read the journal back from its start. */
    if (fseek(journal, 0, SEEK_SET) != 0) {
        perror(JOURNAL);
        return 1;
    }
    uint64_t jh = 14695981039346656037ULL;
    long lines = 0;
    char line[256];
    while (fgets(line, sizeof line, journal)) {
        jh = fnv1a(line, strlen(line), jh);
        lines++;
    }
    fclose(journal);
    if (remove(JOURNAL) != 0) {
        perror(JOURNAL);
        return 1;
    }

    struct entry *sorted = malloc(distinct * sizeof *sorted + 1);
    size_t n = 0;
    for (size_t k = 0; k < table_size; k++)
        if (table[k].word) sorted[n++] = table[k];
    qsort(sorted, n, sizeof *sorted, by_count);
    FILE *out = fopen(argv[2], "w");
    if (!out) {
        perror(argv[2]);
        return 1;
    }
    fprintf(out, "%llu words, %zu distinct, %ld rounds, journal %016llx\n",
            (unsigned long long)words, distinct, lines, (unsigned long long)jh);
    for (size_t k = 0; k < n && k < TOP; k++)
        fprintf(out, "%8llu %.*s\n", (unsigned long long)sorted[k].count, (int)sorted[k].len,
                sorted[k].word);
    if (fclose(out) != 0) {
        perror(argv[2]);
        return 1;
    }
    printf("textstat: %s: %llu words, %zu distinct, %ld rounds\n", argv[1],
           (unsigned long long)words, distinct, lines);
    return 0;
}
