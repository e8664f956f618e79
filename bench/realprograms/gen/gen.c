/* Deterministic input generator for the andes real-program benchmarks.
 * Written for this suite; built natively by build.sh.
 *
 *   gen text BYTES SEED      English-like text (words drawn from a fixed
 *                            vocabulary with a skewed distribution, numbers,
 *                            punctuation, line breaks) for the compressor
 *   gen markdown BYTES SEED  a CommonMark document: headings, paragraphs
 *                            with emphasis, code spans and links, lists,
 *                            block quotes, fenced code, tables
 *
 * The output depends only on the arguments: a 64-bit xorshift* generator,
 * no floating point, no locale. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

static uint64_t state;

static uint64_t next(void) {
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 2685821657736338717ULL;
}

/* Uniform in [0, n). */
static unsigned below(unsigned n) { return (unsigned)((next() >> 33) % n); }

static const char *words[] = {
  "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was",
  "with", "be", "by", "on", "not", "he", "this", "are", "or", "his", "from",
  "at", "which", "but", "have", "an", "had", "they", "you", "were", "their",
  "one", "all", "we", "can", "her", "has", "there", "been", "if", "more",
  "when", "will", "would", "who", "so", "no", "job", "queue", "machine",
  "schedule", "checkpoint", "memory", "module", "sandbox", "file", "output",
  "input", "pool", "slot", "priority", "negotiator", "collector", "request",
  "startd", "schedd", "cluster", "process", "snapshot", "restore", "compile",
  "instrument", "runtime", "throughput", "condor", "resource", "owner",
  "policy", "transfer", "universe", "vacate", "preempt", "claim", "match",
  "classad", "expression", "attribute", "requirement", "rank", "evaluate",
  "wasm", "linear", "stack", "function", "table", "global", "import",
  "export", "instance", "engine", "store", "fuel", "epoch", "signal",
  "interrupt", "deterministic", "benchmark", "measurement", "median",
  "variance", "experiment", "hypothesis", "result", "observation",
  "processor", "cache", "branch", "predictor", "pipeline", "instruction",
  "compression", "entropy", "huffman", "burrows", "wheeler", "transform",
  "dictionary", "sequence", "symbol", "frequency", "distribution",
};
#define NWORDS (sizeof words / sizeof words[0])

/* Skewed choice: small indices are much more likely (rough Zipf). */
static const char *word(void) {
  unsigned r = below(NWORDS);
  return words[below(r + 1)];
}

static void text(long bytes) {
  long n = 0;
  int col = 0, sentence = 0;
  while (n < bytes) {
    char buf[64];
    int len;
    unsigned k = below(100);
    if (k < 3)
      len = snprintf(buf, sizeof buf, "%u", (unsigned)(next() >> 40) % 100000);
    else
      len = snprintf(buf, sizeof buf, "%s", word());
    if (sentence == 0 && buf[0] >= 'a' && buf[0] <= 'z') buf[0] -= 32;
    fputs(buf, stdout);
    n += len;
    col += len;
    sentence++;
    if (sentence > 6 && below(10) == 0) {
      fputc(below(4) ? '.' : (below(2) ? '?' : '!'), stdout);
      n++;
      sentence = 0;
    } else if (below(12) == 0) {
      fputc(',', stdout);
      n++;
    }
    if (col > 68) {
      fputc('\n', stdout);
      n++;
      col = 0;
      if (below(8) == 0) { fputc('\n', stdout); n++; }
    } else {
      fputc(' ', stdout);
      n++;
      col++;
    }
  }
}

static long out;
static void put(const char *s) { fputs(s, stdout); out += (long)strlen(s); }

static void inline_words(int count) {
  for (int i = 0; i < count; i++) {
    if (i) put(" ");
    unsigned k = below(40);
    char buf[160];
    const char *w = word();
    switch (k) {
    case 0: snprintf(buf, sizeof buf, "*%s*", w); break;
    case 1: snprintf(buf, sizeof buf, "**%s**", w); break;
    case 2: snprintf(buf, sizeof buf, "`%s_%u()`", w, below(100)); break;
    case 3: snprintf(buf, sizeof buf, "[%s](https://example.org/%s/%u \"%s\")",
                     w, word(), below(1000), word()); break;
    case 4: snprintf(buf, sizeof buf, "<https://example.com/%s>", w); break;
    case 5: snprintf(buf, sizeof buf, "%s&amp;%s", w, word()); break;
    case 6: snprintf(buf, sizeof buf, "_%s %s_", w, word()); break;
    case 7: snprintf(buf, sizeof buf, "[%s][ref%u]", w, below(50)); break;
    default: snprintf(buf, sizeof buf, "%s", w); break;
    }
    put(buf);
  }
}

static void markdown(long bytes) {
  out = 0;
  unsigned section = 0;
  while (out < bytes) {
    unsigned k = below(20);
    char buf[128];
    if (k == 0) {
      snprintf(buf, sizeof buf, "%.*s Section %u: ", 1 + (int)below(3), "###", ++section);
      put(buf);
      inline_words(3 + below(5));
      put("\n\n");
    } else if (k < 10) {
      int lines = 2 + below(6);
      for (int l = 0; l < lines; l++) { inline_words(6 + below(10)); put("\n"); }
      put("\n");
    } else if (k < 13) {
      int items = 2 + below(6);
      int ordered = below(2);
      for (int i = 0; i < items; i++) {
        if (ordered) { snprintf(buf, sizeof buf, "%d. ", i + 1); put(buf); }
        else put("- ");
        inline_words(4 + below(8));
        put("\n");
        if (below(4) == 0) { put("    - "); inline_words(3 + below(5)); put("\n"); }
      }
      put("\n");
    } else if (k < 15) {
      int lines = 1 + below(4);
      for (int l = 0; l < lines; l++) { put("> "); inline_words(5 + below(10)); put("\n"); }
      put("\n");
    } else if (k < 17) {
      put("```rust\n");
      int lines = 2 + below(8);
      for (int l = 0; l < lines; l++) {
        snprintf(buf, sizeof buf, "fn %s_%u(x: u64) -> u64 { x.wrapping_mul(%u) ^ (x >> %u) }\n",
                 word(), below(1000), below(100000), below(64));
        put(buf);
      }
      put("```\n\n");
    } else if (k < 18) {
      int cols = 2 + below(4), rows = 2 + below(6);
      for (int c = 0; c < cols; c++) { put("| "); put(word()); put(" "); }
      put("|\n");
      for (int c = 0; c < cols; c++) put("| --- ");
      put("|\n");
      for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) { put("| "); inline_words(1 + below(3)); put(" "); }
        put("|\n");
      }
      put("\n");
    } else {
      snprintf(buf, sizeof buf, "[ref%u]: https://example.net/%s/%u\n\n", below(50), word(), below(10000));
      put(buf);
    }
  }
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: gen text|markdown BYTES SEED\n");
    return 2;
  }
  long bytes = atol(argv[2]);
  state = strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ULL + 1;
  if (strcmp(argv[1], "text") == 0) text(bytes);
  else if (strcmp(argv[1], "markdown") == 0) markdown(bytes);
  else { fprintf(stderr, "gen: unknown kind %s\n", argv[1]); return 2; }
  return fflush(stdout) == 0 ? 0 : 1;
}
