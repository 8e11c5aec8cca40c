/*
 * The compiled reference of bench/vs_openclaw.py: the least work any engine giving OpenClaw's verdicts must do
 * per tool call, in C: the canonical form of the call's args and of its result, a SHA-256 of each, and a scan of
 * the session's history (the last 30 records: same-call count, no-progress streak, ping-pong tail), then the new
 * record appended. No event decoding (the events arrive pre-parsed in a binary tree form written by
 * bench/vs_openclaw.py), no tool-specific outcome fingerprints, no verdict records: a floor, not an engine.
 *
 *   cc -O2 -o reference bench/reference.c -lcrypto
 *   reference <events.bin>
 *
 * events.bin: u32 event count, u32 session count, then per event: u32 session index, string tool, string run,
 * value args, value result (absent args/result: 'U'). A string is u32 length + UTF-8 bytes; a value is a tag
 * byte: N null, T true, F false, U undefined, I int64, D double, S string, A u32 count + values,
 * O u32 count + (string key, value) pairs. Little-endian.
 *
 * stdin/stdout as bench/openclaw_engine.mjs: {"ready": n} once loaded; "reset" empties the histories;
 * "run A B" applies events A..B-1 and answers {"cpu_us": process CPU time of that, "wall_us": ...,
 * "flagged": calls since the reset with a repeat count of 10 or more}.
 */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HISTORY 30

typedef struct Node Node;
struct Node {
    char tag;
    uint32_t n;
    int64_t i;
    double d;
    const char *s;  /* S: bytes; O: unused */
    Node **kids;    /* A, O values */
    const char **keys;
    uint32_t *key_lens;
};

typedef struct {
    uint32_t session;
    const char *tool, *run;
    uint32_t tool_len, run_len;
    Node *args, *result;
} Event;

static const unsigned char *cur;

static uint32_t u32(void) { uint32_t v; memcpy(&v, cur, 4); cur += 4; return v; }

static const char *str(uint32_t *len) { *len = u32(); const char *s = (const char *)cur; cur += *len; return s; }

static Node *value(void) {
    Node *node = calloc(1, sizeof *node);
    node->tag = (char)*cur++;
    switch (node->tag) {
    case 'I': memcpy(&node->i, cur, 8); cur += 8; break;
    case 'D': memcpy(&node->d, cur, 8); cur += 8; break;
    case 'S': node->s = str(&node->n); break;
    case 'A':
        node->n = u32();
        node->kids = malloc(sizeof(Node *) * (node->n + 1));
        for (uint32_t k = 0; k < node->n; k++) node->kids[k] = value();
        break;
    case 'O':
        node->n = u32();
        node->kids = malloc(sizeof(Node *) * (node->n + 1));
        node->keys = malloc(sizeof(char *) * (node->n + 1));
        node->key_lens = malloc(sizeof(uint32_t) * (node->n + 1));
        for (uint32_t k = 0; k < node->n; k++) { node->keys[k] = str(&node->key_lens[k]); node->kids[k] = value(); }
        break;
    }
    return node;
}

typedef struct { char *data; size_t len, cap; } Buf;

static void put(Buf *b, const char *s, size_t n) {
    if (b->len + n > b->cap) { while (b->len + n > b->cap) b->cap = b->cap ? b->cap * 2 : 4096; b->data = realloc(b->data, b->cap); }
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

static void put_string(Buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    put(b, "\"", 1);
    size_t start = 0;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        put(b, s + start, k - start);
        char esc[6] = {'\\', (char)c, 0, 0, 0, 0};
        switch (c) {
        case '"': case '\\': put(b, esc, 2); break;
        case '\n': put(b, "\\n", 2); break;
        case '\t': put(b, "\\t", 2); break;
        case '\r': put(b, "\\r", 2); break;
        case '\b': put(b, "\\b", 2); break;
        case '\f': put(b, "\\f", 2); break;
        default: esc[1] = 'u'; esc[2] = '0'; esc[3] = '0'; esc[4] = hex[c >> 4]; esc[5] = hex[c & 15]; put(b, esc, 6);
        }
        start = k + 1;
    }
    put(b, s + start, n - start);
    put(b, "\"", 1);
}

static const Node *sort_node;
static int key_order(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, c = *(const uint32_t *)y;
    uint32_t la = sort_node->key_lens[a], lc = sort_node->key_lens[c];
    int r = memcmp(sort_node->keys[a], sort_node->keys[c], la < lc ? la : lc);
    return r ? r : (la > lc) - (la < lc);
}

static void canonical(Buf *b, const Node *node) {
    char digits[32];
    switch (node->tag) {
    case 'N': put(b, "null", 4); break;
    case 'T': put(b, "true", 4); break;
    case 'F': put(b, "false", 5); break;
    case 'U': put(b, "undefined", 9); break;
    case 'I': put(b, digits, (size_t)snprintf(digits, sizeof digits, "%lld", (long long)node->i)); break;
    case 'D': put(b, digits, (size_t)snprintf(digits, sizeof digits, "%.17g", node->d)); break;
    case 'S': put_string(b, node->s, node->n); break;
    case 'A':
        put(b, "[", 1);
        for (uint32_t k = 0; k < node->n; k++) { if (k) put(b, ",", 1); canonical(b, node->kids[k]); }
        put(b, "]", 1);
        break;
    case 'O': {
        uint32_t order[node->n + 1];
        for (uint32_t k = 0; k < node->n; k++) order[k] = k;
        sort_node = node;  /* keys are sorted here, on every serialisation, as an engine must */
        qsort(order, node->n, sizeof order[0], key_order);
        put(b, "{", 1);
        for (uint32_t k = 0; k < node->n; k++) {
            if (k) put(b, ",", 1);
            put_string(b, node->keys[order[k]], node->key_lens[order[k]]);
            put(b, ":", 1);
            canonical(b, node->kids[order[k]]);
        }
        put(b, "}", 1);
    }
    }
}

typedef struct { unsigned char args[32], result[32]; const char *tool, *run; uint32_t tool_len, run_len; int has_result; } Record;
typedef struct { Record ring[HISTORY]; int count, head; } History;

static EVP_MD *sha256;

static void digest(Buf *b, const Node *node, unsigned char out[32]) {
    unsigned int md_len;
    b->len = 0;
    canonical(b, node);
    EVP_Digest(b->data, b->len, out, &md_len, sha256, NULL);
}

static int same_run(const Record *r, const Event *e) { return r->run_len == e->run_len && memcmp(r->run, e->run, e->run_len) == 0; }
static int same_call(const Record *r, const Event *e, const unsigned char *args) {
    return r->tool_len == e->tool_len && memcmp(r->tool, e->tool, e->tool_len) == 0 && memcmp(r->args, args, 32) == 0;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: reference events.bin\n"); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc((size_t)size);
    if (fread(data, 1, (size_t)size, f) != (size_t)size) { perror("read"); return 1; }
    fclose(f);
    cur = data;
    uint32_t n = u32(), sessions = u32();
    Event *events = malloc(sizeof(Event) * n);
    for (uint32_t k = 0; k < n; k++) {
        events[k].session = u32();
        events[k].tool = str(&events[k].tool_len);
        events[k].run = str(&events[k].run_len);
        events[k].args = value();
        events[k].result = value();
    }
    sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    History *histories = malloc(sizeof(History) * sessions);
    Buf buf = {0};
    printf("{\"ready\": %u}\n", n);
    fflush(stdout);
    char line[64];
    long flagged = 0;
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "reset", 5) == 0) {
            memset(histories, 0, sizeof(History) * sessions);
            flagged = 0;
            continue;
        }
        unsigned first = 0, end = 0;
        if (sscanf(line, "run %u %u", &first, &end) != 2) continue;
        if (end > n) end = n;
        struct timespec c0, c1, w0, w1;
        clock_gettime(CLOCK_MONOTONIC, &w0);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        for (uint32_t k = first; k < end; k++) {
            const Event *e = &events[k];
            unsigned char args[32], result[32];
            digest(&buf, e->args, args);  /* tool names are compared beside it: no prefix to hash */
            digest(&buf, e->result, result);
            History *h = &histories[e->session];
            /* newest first: same-call count, no-progress streak, ping-pong tail */
            int recent = 0, streak = 0, streak_open = 1, alternating = 0;
            const unsigned char *other = NULL;
            const unsigned char *first_result = NULL;
            for (int back = 0; back < h->count; back++) {
                const Record *r = &h->ring[(h->head - 1 - back + HISTORY) % HISTORY];
                if (!same_run(r, e)) continue;
                if (same_call(r, e, args)) {
                    recent++;
                    if (streak_open && r->has_result) {
                        if (!first_result) { first_result = r->result; streak = 1; }
                        else if (memcmp(first_result, r->result, 32) == 0) streak++;
                        else streak_open = 0;
                    }
                }
                if (back == 0) { alternating = 1; continue; }
                const Record *last = &h->ring[(h->head - 1 + HISTORY) % HISTORY];
                if (!other && memcmp(r->args, last->args, 32) != 0) other = r->args;
                if (alternating == back) {
                    const unsigned char *expected = back % 2 ? (other ? other : r->args) : last->args;
                    if (memcmp(r->args, expected, 32) == 0) alternating++;
                }
            }
            if (recent >= 10 || streak >= 10 || alternating >= 10) flagged++;
            Record *slot = &h->ring[h->head];
            memcpy(slot->args, args, 32);
            memcpy(slot->result, result, 32);
            slot->has_result = e->result->tag != 'U' && e->result->tag != 'N';
            slot->tool = e->tool; slot->tool_len = e->tool_len;
            slot->run = e->run; slot->run_len = e->run_len;
            h->head = (h->head + 1) % HISTORY;
            if (h->count < HISTORY) h->count++;
        }
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        clock_gettime(CLOCK_MONOTONIC, &w1);
        printf("{\"cpu_us\": %.1f, \"wall_us\": %.1f, \"flagged\": %ld}\n",
               (c1.tv_sec - c0.tv_sec) * 1e6 + (c1.tv_nsec - c0.tv_nsec) / 1e3,
               (w1.tv_sec - w0.tv_sec) * 1e6 + (w1.tv_nsec - w0.tv_nsec) / 1e3, flagged);
        fflush(stdout);
    }
    return 0;
}
