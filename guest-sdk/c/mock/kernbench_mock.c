/* The KernBench C SDK's native mock (see kernbench_mock.h): the kernel
 * language of kernbench.h over in-memory queues, every rank a POSIX
 * thread, after the Python SDK's kernbench/mock.py (same tables, slot
 * rules, error messages) and the Rust SDK's mock runner.
 *
 * Compiled instead of kernbench.c (which calls the wasm bindings): it also
 * gives the weak defaults of kernbench.h's optional hooks. Plain C11 and
 * POSIX threads; no libm (exp, log and sqrt are computed here, to well
 * within a double's last bits: every result is rounded to f32 or
 * narrower). Assumes a little-endian host, as wasm is.
 *
 * Concurrency: one mutex and one condition variable per run guard the
 * message queues, the slot counts and the ranks' finished / failed
 * states; everything else of a rank (its memory, tensors, futures) is its
 * own thread's. A failing call records its message, wakes every waiter
 * and longjmps back to the rank's thread entry. */
#define _POSIX_C_SOURCE 200809L

#include "kernbench_mock.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h> /* INFINITY and NAN only: nothing of libm is called */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The most dimensions of a mock tensor. */
#define MAX_DIMS 8
/* How long a blocked send or recv waits before it is a deadlock, unless
 * $KB_MOCK_DEADLOCK_S says otherwise. */
#define DEADLOCK_TIMEOUT_S 10.0

/* ---- the run's state ------------------------------------------------------ */

struct chan;

/* A message in flight: its bytes and the direction (slots) it holds. */
struct msg {
    struct msg *next;
    struct chan *ch;
    size_t len;
    uint8_t data[];
};

/* One direction of one rank: `from` sends on `dir`, `to` receives on
 * `peer_dir`. A message holds one of `slots_free` from its send until the
 * tensor it is received as is dropped. */
struct chan {
    const char *dir, *peer_dir;
    uint32_t from, to;
    uint32_t slots_free;
    struct msg *head, *tail;
};

typedef struct {
    int live;
    uint64_t addr;
    uint32_t shape[MAX_DIMS];
    uint32_t ndim;
    kb_dtype dtype;
    uint8_t *data;
    size_t len;
    struct chan *slot; /* a received tensor's slot, given back on kb_drop */
} tensor;

typedef struct {
    int live;
    uint64_t id; /* issue order */
    char *dir;   /* NULL: any direction */
    uint32_t n;
    kb_dtype dtype;
    struct msg *msg; /* NULL until a message is given to it */
} future;

struct run;

struct rank {
    struct run *run;
    uint32_t id;
    uint8_t *mem;
    size_t mem_len;
    int64_t *args;
    size_t nargs;
    struct chan **tx, **rx;
    size_t ntx, nrx, rr;
    tensor *t;
    size_t nt, capt, t_hint;
    future *f;
    size_t nf, capf, f_hint;
    uint64_t next_future, next_scratch;
    int finished; /* under run->mu */
    char err[1024];
    jmp_buf jb;
    pthread_t thread;
};

struct run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double timeout_s;
    int failed; /* ranks that failed, giving up included (under mu) */
    struct rank *ranks;
    uint32_t n;
    struct chan *chans;
    size_t nchans;
    uint32_t *fail_order; /* the ranks that failed on their own, in order */
    size_t nfail;
};

/* The rank this thread runs. */
static _Thread_local struct rank *cur;

static struct rank *me(const char *call) {
    if (!cur) {
        fprintf(stderr, "kernbench mock: %s called outside kb_mock_run's kernel\n", call);
        abort();
    }
    return cur;
}

/* Stop this rank, whose message is in rk->err: record the failure, wake
 * every waiter, back to the rank's thread entry. `locked`: the caller
 * holds run->mu (so that no other rank fails on its own meanwhile). */
static _Noreturn void stop(struct rank *rk, int locked) {
    struct run *run = rk->run;
    if (!locked) pthread_mutex_lock(&run->mu);
    run->failed++;
    run->fail_order[run->nfail++] = rk->id;
    pthread_cond_broadcast(&run->cv);
    pthread_mutex_unlock(&run->mu);
    longjmp(rk->jb, 1);
}

/* Stop this rank with the message `fmt` (not holding run->mu). */
static _Noreturn void fail(const char *fmt, ...) {
    struct rank *rk = me("a kb_* call");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rk->err, sizeof rk->err, fmt, ap);
    va_end(ap);
    stop(rk, 0);
}

/* fail() holding run->mu. */
static _Noreturn void fail_locked(const char *fmt, ...) {
    struct rank *rk = me("a kb_* call");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rk->err, sizeof rk->err, fmt, ap);
    va_end(ap);
    stop(rk, 1);
}

/* Stop this rank because another one failed (holding run->mu); this is
 * not reported. */
static _Noreturn void give_up_locked(struct rank *rk) {
    snprintf(rk->err, sizeof rk->err, "gave up: another rank failed");
    rk->run->failed++;
    pthread_cond_broadcast(&rk->run->cv);
    pthread_mutex_unlock(&rk->run->mu);
    longjmp(rk->jb, 1);
}

static void *xalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "kernbench mock: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "kernbench mock: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

/* A direction as Python's repr: 'E', or None. */
static const char *repr(const char *dir, char *buf, size_t len) {
    if (!dir) return "None";
    snprintf(buf, len, "'%s'", dir);
    return buf;
}

static const char *dtype_name(kb_dtype d) {
    static const char *const names[] = {"f16", "bf16", "f32", "i32", "i8",
                                        "u8",  "u32",  "i64", "u64", "f64"};
    return (unsigned)d <= KB_F64 ? names[d] : "?";
}

static kb_dtype checked_dtype(kb_dtype d, const char *call) {
    if ((unsigned)d > KB_F64) fail("%s: unknown dtype %d", call, (int)d);
    return d;
}

/* ---- numbers: encodings and the math libm would give ------------------------ */

static uint64_t dbits(double v) {
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

static double bitsd(uint64_t b) {
    double v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* The bits of `v` rounded to nearest even in a binary float of `eb`
 * exponent and `mb` mantissa bits (f16: 5, 10; bf16: 8, 7), once. */
static uint32_t narrow_float(double v, int eb, int mb) {
    uint64_t b = dbits(v);
    uint32_t sign = (uint32_t)(b >> 63) << (eb + mb);
    uint32_t exp_all = (1u << eb) - 1;
    int de = (int)((b >> 52) & 0x7ff);
    uint64_t frac = b & ((1ULL << 52) - 1);
    if (de == 0x7ff) return sign | exp_all << mb | (frac ? 1u << (mb - 1) : 0);
    if (de == 0) return sign; /* zero, or a double subnormal: far below the least value */
    int bias = (1 << (eb - 1)) - 1, emin = 1 - bias;
    int e = de - 1023;
    uint64_t m = frac | 1ULL << 52;      /* v = m * 2^(e - 52) */
    int ulp = (e < emin ? emin : e) - mb; /* the exponent of the format's ulp at v */
    int shift = ulp - (e - 52);          /* >= 52 - mb */
    uint64_t r = 0;
    if (shift < 64) {
        uint64_t rem = m & ((1ULL << shift) - 1), half = 1ULL << (shift - 1);
        r = m >> shift;
        if (rem > half || (rem == half && (r & 1))) r++;
    }
    if (e < emin) return sign | (uint32_t)r; /* subnormal; r = 2^mb is the least normal */
    if (r == 1ULL << (mb + 1)) {
        r >>= 1;
        e++;
    }
    if (e + bias >= (int)exp_all) return sign | exp_all << mb; /* overflow: infinity */
    return sign | (uint32_t)(e + bias) << mb | (uint32_t)(r & ((1ULL << mb) - 1));
}

static double from_f16(uint32_t h) {
    uint64_t sign = (uint64_t)(h >> 15 & 1) << 63;
    uint32_t e = h >> 10 & 0x1f;
    uint64_t f = h & 0x3ff;
    if (e == 0) {
        double v = (double)f / 16777216.0; /* f * 2^-24 */
        return sign ? -v : v;
    }
    if (e == 31) return bitsd(sign | 0x7ffULL << 52 | f << 42);
    return bitsd(sign | (uint64_t)(e - 15 + 1023) << 52 | f << 42);
}

static double from_bf16(uint32_t h) {
    uint32_t b = h << 16;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* Rounded half away from zero, saturating; NaN is 0 (as the Rust SDK). */
/* `v` rounded half away from zero and saturated to [lo, hi] (NaN: 0),
 * as the host's `as` casts do. */
static double to_int(double v, double lo, double hi) {
    if (v != v) return 0;
    if (v <= lo) return lo;
    if (v >= hi) return hi;
    if (v >= 4503599627370496.0 || v <= -4503599627370496.0) return v; /* 2^52: whole */
    double t = (double)(int64_t)v; /* toward zero */
    double fr = v - t;
    if (fr >= 0.5) t += 1;
    else if (fr <= -0.5) t -= 1;
    return t;
}
static int32_t to_i32(double v) { return (int32_t)to_int(v, -2147483648.0, 2147483647.0); }
static uint64_t rd64(const uint8_t *p);
static void wr64(uint8_t *p, uint64_t v);

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | rd16(p + 2) << 16; }
static void wr16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void wr32(uint8_t *p, uint32_t v) {
    wr16(p, v & 0xffff);
    wr16(p + 2, v >> 16);
}

static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr64(uint8_t *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

/* The MATH unit's binary ops, in the WIT's order. */
enum { OP_ADD, OP_SUB, OP_MUL, OP_MAX, OP_MIN, OP_DIV };

/* `n` elements of `out = x op y` in integer dtype `dt`, as the host's MATH
 * unit: exact, add / sub / mul wrapping at the dtype's width (done in
 * uint64_t, whose low bytes are the two's-complement result), div
 * truncating toward zero and 0 for a zero divisor. */
static void int_binary(int op, kb_dtype dt, const uint8_t *x, const uint8_t *y, uint8_t *out,
                       size_t n) {
    size_t w = kb_itemsize(dt);
    int is_signed = dt == KB_I8 || dt == KB_I32 || dt == KB_I64;
    for (size_t i = 0; i < n; i++) {
        uint64_t p = 0, q = 0, r;
        memcpy(&p, x + w * i, w); /* little-endian host, as the store */
        memcpy(&q, y + w * i, w);
        if (is_signed && w < 8) { /* sign-extend */
            uint64_t sign = (uint64_t)1 << (8 * w - 1);
            p = (p ^ sign) - sign;
            q = (q ^ sign) - sign;
        }
        int64_t sp = (int64_t)p, sq = (int64_t)q;
        switch (op) {
        case OP_ADD: r = p + q; break;
        case OP_SUB: r = p - q; break;
        case OP_MUL: r = p * q; break;
        case OP_MAX: r = is_signed ? (sp > sq ? p : q) : (p > q ? p : q); break;
        case OP_MIN: r = is_signed ? (sp < sq ? p : q) : (p < q ? p : q); break;
        default:
            if (q == 0) r = 0;
            else if (is_signed && sq == -1) r = (uint64_t)0 - p; /* MIN / -1 wraps */
            else r = is_signed ? (uint64_t)(sp / sq) : p / q;
            break;
        }
        memcpy(out + w * i, &r, w);
    }
}

/* Element `i` of `data` in `dt`. */
static double get_elem(const uint8_t *data, size_t i, kb_dtype dt) {
    switch (dt) {
    case KB_I8: return (double)(int8_t)data[i];
    case KB_U8: return (double)data[i];
    case KB_U32: return (double)rd32(data + 4 * i);
    case KB_I64: return (double)(int64_t)rd64(data + 8 * i);
    case KB_U64: return (double)rd64(data + 8 * i);
    case KB_F64: {
        uint64_t b = rd64(data + 8 * i);
        double f;
        memcpy(&f, &b, sizeof f);
        return f;
    }
    case KB_F16: return from_f16(rd16(data + 2 * i));
    case KB_BF16: return from_bf16(rd16(data + 2 * i));
    case KB_F32: {
        uint32_t b = rd32(data + 4 * i);
        float f;
        memcpy(&f, &b, sizeof f);
        return f;
    }
    default: return (double)(int32_t)rd32(data + 4 * i);
    }
}

/* Element `i` of `data` in `dt` := `v`, rounded once. */
static void put_elem(uint8_t *data, size_t i, kb_dtype dt, double v) {
    switch (dt) {
    case KB_I8: data[i] = (uint8_t)(int8_t)to_int(v, -128.0, 127.0); break;
    case KB_U8: data[i] = (uint8_t)to_int(v, 0.0, 255.0); break;
    case KB_U32: wr32(data + 4 * i, (uint32_t)to_int(v, 0.0, 4294967295.0)); break;
    case KB_I64: {
        /* 2^63 does not fit: it and past saturate at the maximum. */
        double r = to_int(v, -9223372036854775808.0, 9223372036854775808.0);
        wr64(data + 8 * i, r >= 9223372036854775808.0 ? (uint64_t)INT64_MAX : (uint64_t)(int64_t)r);
        break;
    }
    case KB_U64: {
        double r = to_int(v, 0.0, 18446744073709551616.0);
        wr64(data + 8 * i, r >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)r);
        break;
    }
    case KB_F64: {
        uint64_t b;
        memcpy(&b, &v, sizeof b);
        wr64(data + 8 * i, b);
        break;
    }
    case KB_F16: wr16(data + 2 * i, narrow_float(v, 5, 10)); break;
    case KB_BF16: wr16(data + 2 * i, narrow_float(v, 8, 7)); break;
    case KB_F32: {
        float f = (float)v; /* round to nearest even */
        uint32_t b;
        memcpy(&b, &f, sizeof b);
        wr32(data + 4 * i, b);
        break;
    }
    default: wr32(data + 4 * i, (uint32_t)to_i32(v)); break;
    }
}

double kb_mock_round(double v, kb_dtype dtype) {
    uint8_t b[8];
    put_elem(b, 0, dtype, v);
    return get_elem(b, 0, dtype);
}

static const double LN2_HI = 6.93147180369123816490e-01; /* fdlibm's split of ln 2 */
static const double LN2_LO = 1.90821492927058770002e-10;

/* 2^k * x. */
static double scale2(double x, int k) {
    while (k > 1023) {
        x *= bitsd(2046ULL << 52);
        k -= 1023;
    }
    while (k < -1022) {
        x *= bitsd(1ULL << 52);
        k += 1022;
    }
    return x * bitsd((uint64_t)(k + 1023) << 52);
}

static double m_exp(double x) {
    if (x != x) return x;
    if (x > 709.8) return INFINITY;
    if (x < -745.2) return 0.0;
    double kf = x * 1.4426950408889634;
    int k = (int)(kf < 0 ? kf - 0.5 : kf + 0.5);
    double r = (x - k * LN2_HI) - k * LN2_LO; /* |r| <= ln2 / 2 */
    double s = 1.0;
    for (int i = 18; i >= 1; i--) s = 1.0 + s * r / i;
    return scale2(s, k);
}

/* log of a positive finite x. */
static double m_log_pos(double x) {
    int e = 0;
    uint64_t b = dbits(x);
    if ((b >> 52 & 0x7ff) == 0) { /* subnormal */
        x *= 18014398509481984.0; /* 2^54 */
        e = -54;
        b = dbits(x);
    }
    e += (int)(b >> 52 & 0x7ff) - 1023;
    double m = bitsd((b & ((1ULL << 52) - 1)) | 1023ULL << 52); /* [1, 2) */
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    double s = (m - 1) / (m + 1), s2 = s * s, t = 0;
    for (int j = 16; j >= 0; j--) t = 1.0 / (2 * j + 1) + s2 * t;
    return e * LN2_HI + (2 * s * t + e * LN2_LO);
}

/* sqrt of a positive finite x. */
static double m_sqrt_pos(double x) {
    if ((dbits(x) >> 52 & 0x7ff) == 0) return m_sqrt_pos(x * 18014398509481984.0) / 134217728.0;
    double y = bitsd((dbits(x) >> 1) + (1023ULL << 51)); /* within 6% */
    for (int i = 0; i < 6; i++) y = 0.5 * (y + x / y);
    return y;
}

/* ---- tensors and futures --------------------------------------------------- */

static size_t elems_of(const uint32_t *shape, size_t ndim) {
    uint64_t n = 1;
    for (size_t i = 0; i < ndim; i++) {
        n *= shape[i];
        if (n > ((uint64_t)1 << 40)) return (size_t)1 << 40; /* more than any shard */
    }
    return (size_t)n;
}

static size_t t_elems(const tensor *t) { return elems_of(t->shape, t->ndim); }

static const char *shape_str(const uint32_t *shape, size_t ndim, char *buf, size_t len) {
    size_t at = (size_t)snprintf(buf, len, "[");
    for (size_t i = 0; i < ndim && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%" PRIu32, i ? ", " : "", shape[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
    return buf;
}

/* A new tensor owning `data` (at the next scratch address when addr is 0). */
static kb_tensor new_tensor(struct rank *rk, uint64_t addr, const uint32_t *shape, size_t ndim,
                            kb_dtype dtype, uint8_t *data, size_t len, struct chan *slot) {
    size_t i = rk->t_hint;
    while (i < rk->nt && rk->t[i].live) i++;
    if (i == rk->nt) {
        if (rk->nt == rk->capt) {
            rk->capt = rk->capt ? 2 * rk->capt : 64;
            rk->t = xrealloc(rk->t, rk->capt * sizeof *rk->t);
        }
        rk->nt++;
    }
    rk->t_hint = i + 1;
    if (!addr) {
        addr = rk->next_scratch;
        rk->next_scratch += len;
    }
    tensor *t = &rk->t[i];
    memset(t, 0, sizeof *t);
    t->live = 1;
    t->addr = addr;
    memcpy(t->shape, shape, ndim * sizeof *shape);
    t->ndim = (uint32_t)ndim;
    t->dtype = dtype;
    t->data = data;
    t->len = len;
    t->slot = slot;
    kb_tensor h = {{(int32_t)(i + 1)}};
    return h;
}

static tensor *get(struct rank *rk, kb_tensor h, const char *call) {
    int32_t id = h.handle.__handle;
    if (id < 1 || (size_t)id > rk->nt || !rk->t[id - 1].live)
        fail("%s: tensor handle %" PRId32 " is not live (dropped already, or not from a kb_* call)",
             call, id);
    return &rk->t[id - 1];
}

/* Give a slot back (the receiver dropped what held it). */
static void give_slot(struct rank *rk, struct chan *ch) {
    pthread_mutex_lock(&rk->run->mu);
    ch->slots_free++;
    pthread_cond_broadcast(&rk->run->cv);
    pthread_mutex_unlock(&rk->run->mu);
}

/* [addr, +n) in the shard: its offset; else the rank fails. */
static size_t shard_range(struct rank *rk, uint64_t addr, uint64_t n) {
    if (addr < KB_MOCK_T_PTR || addr - KB_MOCK_T_PTR > rk->mem_len ||
        n > rk->mem_len - (addr - KB_MOCK_T_PTR))
        fail("access [0x%" PRIx64 ", +%" PRIu64 ") is outside the shard [0x%llx, +%zu)", addr, n,
             (unsigned long long)KB_MOCK_T_PTR, rk->mem_len);
    return (size_t)(addr - KB_MOCK_T_PTR);
}

/* ---- the IPCQ ---------------------------------------------------------------- */

static struct timespec deadline_after(double s) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)(s * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec += (long)(ns % 1000000000);
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

static struct chan *find(struct chan **list, size_t n, const char *dir, int outgoing) {
    for (size_t i = n; i-- > 0;) /* the last wins, as a Python dict */
        if (strcmp(outgoing ? list[i]->dir : list[i]->peer_dir, dir) == 0) return list[i];
    return NULL;
}

static void send_bytes(struct rank *rk, const char *dir, const uint8_t *data, size_t len) {
    char rb[80];
    struct run *run = rk->run;
    if (!dir) fail("send to direction None: a send needs a direction");
    struct chan *ch = find(rk->tx, rk->ntx, dir, 1);
    if (!ch) fail("send to direction %s, which is not installed", repr(dir, rb, sizeof rb));
    struct msg *m = xalloc(sizeof *m + len);
    m->next = NULL;
    m->ch = ch;
    m->len = len;
    if (len) memcpy(m->data, data, len);
    struct timespec dl = deadline_after(run->timeout_s);
    int timed_out = 0;
    pthread_mutex_lock(&run->mu);
    while (ch->slots_free == 0) {
        if (run->failed) {
            free(m);
            give_up_locked(rk);
        }
        if (run->ranks[ch->to].finished || timed_out) {
            free(m);
            if (run->ranks[ch->to].finished)
                fail_locked("deadlock: send(dir=%s) found no free slot and the peer, rank %" PRIu32
                            ", has finished (the slots hold messages it never received)",
                            repr(dir, rb, sizeof rb), ch->to);
            fail_locked("deadlock: send(dir=%s) waited %g s for a free slot (a slot is free "
                        "again when the peer drops the tensor it received there: does it keep "
                        "received tensors alive?)",
                        repr(dir, rb, sizeof rb), run->timeout_s);
        }
        timed_out = pthread_cond_timedwait(&run->cv, &run->mu, &dl) == ETIMEDOUT;
    }
    ch->slots_free--;
    if (ch->tail) ch->tail->next = m;
    else ch->head = m;
    ch->tail = m;
    pthread_cond_broadcast(&run->cv);
    pthread_mutex_unlock(&run->mu);
}

static struct msg *pop(struct chan *ch) {
    struct msg *m = ch->head;
    ch->head = m->next;
    if (!ch->head) ch->tail = NULL;
    return m;
}

/* The next message from `dir` (NULL: round-robin over every incoming
 * direction), waiting for it. */
static struct msg *take(struct rank *rk, const char *dir) {
    char rb[80];
    struct run *run = rk->run;
    struct chan *ch = NULL;
    if (dir) {
        ch = find(rk->rx, rk->nrx, dir, 0);
        if (!ch) fail("recv from direction %s, which is not installed", repr(dir, rb, sizeof rb));
    } else if (rk->nrx == 0) {
        fail("recv() from any direction, but none comes in here");
    }
    struct timespec dl = deadline_after(run->timeout_s);
    int timed_out = 0;
    pthread_mutex_lock(&run->mu);
    for (;;) {
        if (ch && ch->head) break;
        if (!ch) {
            for (size_t i = 0; i < rk->nrx; i++) {
                size_t idx = (rk->rr + i) % rk->nrx;
                if (rk->rx[idx]->head) {
                    rk->rr = (idx + 1) % rk->nrx;
                    struct msg *m = pop(rk->rx[idx]);
                    pthread_mutex_unlock(&run->mu);
                    return m;
                }
            }
        }
        if (run->failed) give_up_locked(rk);
        int all_done = 1; /* every peer that could send has finished */
        for (size_t i = 0; i < rk->nrx; i++)
            if ((!ch || rk->rx[i] == ch) && !run->ranks[rk->rx[i]->from].finished) all_done = 0;
        if (all_done && ch)
            fail_locked("deadlock: recv(dir=%s): the peer, rank %" PRIu32
                        ", finished without sending",
                        repr(dir, rb, sizeof rb), ch->from);
        if (all_done) fail_locked("deadlock: recv(): every peer has finished without sending");
        if (timed_out && ch)
            fail_locked("deadlock: recv(dir=%s) waited %g s", repr(dir, rb, sizeof rb),
                        run->timeout_s);
        if (timed_out)
            fail_locked("deadlock: recv() waited %g s on every direction", run->timeout_s);
        timed_out = pthread_cond_timedwait(&run->cv, &run->mu, &dl) == ETIMEDOUT;
    }
    struct msg *m = pop(ch);
    pthread_mutex_unlock(&run->mu);
    return m;
}

static int same_dir(const char *a, const char *b) {
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The oldest future waiting (no message yet) on `dir`, or -1. */
static long oldest_pending(struct rank *rk, const char *dir) {
    long best = -1;
    for (size_t i = 0; i < rk->nf; i++) {
        future *f = &rk->f[i];
        if (f->live && !f->msg && same_dir(f->dir, dir) && (best < 0 || f->id < rk->f[best].id))
            best = (long)i;
    }
    return best;
}

/* Give the next message from `dir` to the oldest future waiting on it. */
static void serve_one(struct rank *rk, const char *dir) {
    long i = oldest_pending(rk, dir);
    struct msg *m = take(rk, dir);
    rk->f[i].msg = m;
}

/* A received message as a tensor holding its slot (checked against the
 * `n` elements of `dtype` the kernel asked for). */
static kb_tensor received(struct rank *rk, const char *dir_repr, uint32_t n, kb_dtype dtype,
                          struct msg *m) {
    size_t want = (size_t)n * kb_itemsize(dtype);
    if (m->len != want) {
        size_t got = m->len;
        give_slot(rk, m->ch);
        free(m);
        fail("recv(dir=%s) of %zu bytes got a message of %zu", dir_repr, want, got);
    }
    uint8_t *data = xalloc(m->len);
    memcpy(data, m->data, m->len);
    struct chan *ch = m->ch;
    size_t len = m->len;
    free(m);
    return new_tensor(rk, 0, &n, 1, dtype, data, len, ch);
}

/* ---- the kernel language ----------------------------------------------------- */

int64_t kb_program_id(uint32_t axis) {
    (void)axis;
    return 0;
}

int64_t kb_num_programs(uint32_t axis) {
    (void)axis;
    return 1;
}

kb_tensor kb_load_shape(uint64_t addr, const uint32_t *shape, size_t rank, kb_dtype dtype) {
    struct rank *rk = me("kb_load");
    checked_dtype(dtype, "kb_load");
    if (rank > MAX_DIMS)
        fail("kb_load: %zu dimensions (the C mock takes up to %d)", rank, MAX_DIMS);
    size_t len = elems_of(shape, rank) * kb_itemsize(dtype);
    size_t off = shard_range(rk, addr, len);
    uint8_t *data = xalloc(len);
    if (len) memcpy(data, rk->mem + off, len);
    return new_tensor(rk, addr, shape, rank, dtype, data, len, NULL);
}

kb_tensor kb_load(uint64_t addr, uint32_t n, kb_dtype dtype) {
    return kb_load_shape(addr, &n, 1, dtype);
}

void kb_store(uint64_t addr, kb_tensor value) {
    struct rank *rk = me("kb_store");
    tensor *t = get(rk, value, "kb_store");
    size_t off = shard_range(rk, addr, t->len);
    if (t->len) memcpy(rk->mem + off, t->data, t->len);
}

void kb_send(const char *dir, kb_tensor value) {
    struct rank *rk = me("kb_send");
    tensor *t = get(rk, value, "kb_send");
    send_bytes(rk, dir, t->data, t->len);
}

void kb_send_addr(const char *dir, uint64_t src_addr, uint32_t n, kb_dtype dtype) {
    struct rank *rk = me("kb_send_addr");
    checked_dtype(dtype, "kb_send_addr");
    size_t len = (size_t)n * kb_itemsize(dtype);
    size_t off = shard_range(rk, src_addr, len);
    send_bytes(rk, dir, rk->mem + off, len);
}

kb_tensor kb_recv(const char *dir, uint32_t n, kb_dtype dtype) {
    struct rank *rk = me("kb_recv");
    char rb[80];
    checked_dtype(dtype, "kb_recv");
    /* Futures issued earlier on this direction take their messages first. */
    while (oldest_pending(rk, dir) >= 0) serve_one(rk, dir);
    struct msg *m = take(rk, dir);
    return received(rk, repr(dir, rb, sizeof rb), n, dtype, m);
}

kb_tensor kb_recv_into(const char *dir, uint32_t n, kb_dtype dtype, uint64_t dst_addr) {
    struct rank *rk = me("kb_recv_into");
    kb_tensor h = kb_recv(dir, n, dtype);
    tensor *t = get(rk, h, "kb_recv_into");
    size_t off = shard_range(rk, dst_addr, t->len);
    if (t->len) memcpy(rk->mem + off, t->data, t->len);
    /* The copy is done: the slot is free again. */
    give_slot(rk, t->slot);
    t->slot = NULL;
    t->addr = dst_addr;
    return h;
}

kb_future kb_recv_async(const char *dir, uint32_t n, kb_dtype dtype) {
    struct rank *rk = me("kb_recv_async");
    char rb[80];
    checked_dtype(dtype, "kb_recv_async");
    if (dir && !find(rk->rx, rk->nrx, dir, 0))
        fail("recv from direction %s, which is not installed", repr(dir, rb, sizeof rb));
    size_t i = rk->f_hint;
    while (i < rk->nf && rk->f[i].live) i++;
    if (i == rk->nf) {
        if (rk->nf == rk->capf) {
            rk->capf = rk->capf ? 2 * rk->capf : 16;
            rk->f = xrealloc(rk->f, rk->capf * sizeof *rk->f);
        }
        rk->nf++;
    }
    rk->f_hint = i + 1;
    future *f = &rk->f[i];
    f->live = 1;
    f->id = ++rk->next_future;
    f->dir = NULL;
    if (dir) {
        f->dir = xalloc(strlen(dir) + 1);
        strcpy(f->dir, dir);
    }
    f->n = n;
    f->dtype = dtype;
    f->msg = NULL;
    kb_future h = {{(int32_t)(i + 1)}};
    return h;
}

kb_tensor kb_wait(kb_future fh) {
    struct rank *rk = me("kb_wait");
    int32_t id = fh.handle.__handle;
    if (id < 1 || (size_t)id > rk->nf || !rk->f[id - 1].live)
        fail("kb_wait: future handle %" PRId32 " is not live (waited for already?)", id);
    size_t i = (size_t)id - 1;
    /* Earlier futures on the direction take their messages first. */
    while (!rk->f[i].msg) serve_one(rk, rk->f[i].dir);
    future f = rk->f[i];
    rk->f[i].live = 0;
    if (i < rk->f_hint) rk->f_hint = i;
    char rb[80], dr[80];
    snprintf(dr, sizeof dr, "%s", repr(f.dir, rb, sizeof rb));
    free(f.dir);
    return received(rk, dr, f.n, f.dtype, f.msg);
}

static kb_tensor binary(int op, kb_tensor ha, kb_tensor hb) {
    static const char *const names[] = {"add", "sub", "mul", "max", "min", "div"};
    static const char *const calls[] = {"kb_add", "kb_sub", "kb_mul", "kb_max", "kb_min", "kb_div"};
    struct rank *rk = me(calls[op]);
    tensor a = *get(rk, ha, calls[op]), b = *get(rk, hb, calls[op]);
    if (a.ndim != b.ndim || memcmp(a.shape, b.shape, a.ndim * sizeof *a.shape) != 0 ||
        a.dtype != b.dtype) {
        char sa[128], sb[128];
        fail("%s: shapes/dtypes differ: %s %s vs %s %s", names[op],
             shape_str(a.shape, a.ndim, sa, sizeof sa), dtype_name(a.dtype),
             shape_str(b.shape, b.ndim, sb, sizeof sb), dtype_name(b.dtype));
    }
    size_t n = t_elems(&a);
    uint8_t *out = xalloc(a.len);
    if (kb_is_integer(a.dtype)) {
        int_binary(op, a.dtype, a.data, b.data, out, n);
        return new_tensor(rk, 0, a.shape, a.ndim, a.dtype, out, a.len, NULL);
    }
    for (size_t i = 0; i < n; i++) {
        double x = get_elem(a.data, i, a.dtype), y = get_elem(b.data, i, b.dtype), r;
        switch (op) {
        case OP_ADD: r = x + y; break;
        case OP_SUB: r = x - y; break;
        case OP_MUL: r = x * y; break;
        case OP_MAX: r = y > x ? y : x; break;
        case OP_MIN: r = y < x ? y : x; break;
        default:
            if (y != 0) r = x / y;
            else r = x != 0 ? (x < 0 ? -INFINITY : INFINITY) : NAN;
            break;
        }
        put_elem(out, i, a.dtype, r);
    }
    return new_tensor(rk, 0, a.shape, a.ndim, a.dtype, out, a.len, NULL);
}

kb_tensor kb_add(kb_tensor a, kb_tensor b) { return binary(OP_ADD, a, b); }
kb_tensor kb_sub(kb_tensor a, kb_tensor b) { return binary(OP_SUB, a, b); }
kb_tensor kb_mul(kb_tensor a, kb_tensor b) { return binary(OP_MUL, a, b); }
kb_tensor kb_max(kb_tensor a, kb_tensor b) { return binary(OP_MAX, a, b); }
kb_tensor kb_min(kb_tensor a, kb_tensor b) { return binary(OP_MIN, a, b); }
kb_tensor kb_div(kb_tensor a, kb_tensor b) { return binary(OP_DIV, a, b); }

/* `a`'s values through `f` (with `arg`) into a new tensor of `dtype`. */
static kb_tensor map(struct rank *rk, const tensor *a, kb_dtype dtype,
                     double (*f)(double, double), double arg) {
    size_t n = t_elems(a), len = n * kb_itemsize(dtype);
    uint8_t *out = xalloc(len);
    for (size_t i = 0; i < n; i++) {
        double x = get_elem(a->data, i, a->dtype);
        put_elem(out, i, dtype, f ? f(x, arg) : x);
    }
    return new_tensor(rk, 0, a->shape, a->ndim, dtype, out, len, NULL);
}

static double times(double x, double factor) { return x * factor; }

static double unary_op(double x, double op) {
    switch ((int)op) {
    case KB_NEG: return -x;
    case KB_ABS: return bitsd(dbits(x) & ~(1ULL << 63));
    case KB_EXP: return m_exp(x);
    case KB_LOG:
        if (x != x || x == INFINITY) return x;
        return x > 0 ? m_log_pos(x) : (x == 0 ? -INFINITY : NAN);
    case KB_SQRT:
        if (x != x || x == INFINITY || x == 0) return x;
        return x > 0 ? m_sqrt_pos(x) : NAN;
    case KB_RELU: return 0.0 > x ? 0.0 : x;
    default: return 1.0 / x; /* KB_RECIP: 1 / ±0 is ±inf */
    }
}

kb_tensor kb_scale(kb_tensor a, double factor) {
    struct rank *rk = me("kb_scale");
    tensor t = *get(rk, a, "kb_scale");
    return map(rk, &t, t.dtype, times, factor);
}

kb_tensor kb_unary(kb_unary_op op, kb_tensor a) {
    struct rank *rk = me("kb_unary");
    tensor t = *get(rk, a, "kb_unary");
    if ((unsigned)op > KB_RECIP) fail("kb_unary: unknown op %d", (int)op);
    return map(rk, &t, t.dtype, unary_op, (double)op);
}

kb_tensor kb_cast(kb_tensor a, kb_dtype dtype) {
    struct rank *rk = me("kb_cast");
    tensor t = *get(rk, a, "kb_cast");
    return map(rk, &t, checked_dtype(dtype, "kb_cast"), NULL, 0);
}

kb_tensor kb_fill_shape(const uint32_t *shape, size_t rank, kb_dtype dtype, double value) {
    struct rank *rk = me("kb_fill");
    checked_dtype(dtype, "kb_fill");
    if (rank > MAX_DIMS)
        fail("kb_fill: %zu dimensions (the C mock takes up to %d)", rank, MAX_DIMS);
    size_t n = elems_of(shape, rank), len = n * kb_itemsize(dtype);
    uint8_t *data = xalloc(len);
    for (size_t i = 0; i < n; i++) put_elem(data, i, dtype, value);
    return new_tensor(rk, 0, shape, rank, dtype, data, len, NULL);
}

kb_tensor kb_fill(uint32_t n, kb_dtype dtype, double value) {
    return kb_fill_shape(&n, 1, dtype, value);
}

kb_tensor kb_reduce(kb_reduce_op op, kb_tensor a, uint32_t axis) {
    struct rank *rk = me("kb_reduce");
    tensor t = *get(rk, a, "kb_reduce");
    if ((unsigned)op > KB_RMIN) fail("kb_reduce: unknown op %d", (int)op);
    if (axis >= t.ndim || t.shape[axis] == 0) {
        char s[128];
        fail("reduce over axis %" PRIu32 " of %s", axis, shape_str(t.shape, t.ndim, s, sizeof s));
    }
    size_t len = t.shape[axis];
    size_t inner = elems_of(t.shape + axis + 1, t.ndim - axis - 1);
    size_t outer = elems_of(t.shape, axis);
    uint32_t shape[MAX_DIMS];
    size_t ndim = 0;
    for (uint32_t d = 0; d < t.ndim; d++)
        if (d != axis) shape[ndim++] = t.shape[d];
    if (ndim == 0) shape[ndim++] = 1;
    size_t bytes = outer * inner * kb_itemsize(t.dtype);
    uint8_t *out = xalloc(bytes);
    for (size_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < inner; i++) {
            double acc = get_elem(t.data, o * len * inner + i, t.dtype);
            for (size_t k = 1; k < len; k++) {
                double v = get_elem(t.data, (o * len + k) * inner + i, t.dtype);
                if (op == KB_SUM) acc += v;
                else if (op == KB_RMAX) acc = v > acc ? v : acc;
                else acc = v < acc ? v : acc;
            }
            put_elem(out, o * inner + i, t.dtype, acc);
        }
    }
    return new_tensor(rk, 0, shape, ndim, t.dtype, out, bytes, NULL);
}

kb_tensor kb_composite(kb_composite_op op, kb_tensor ha, kb_tensor hb, const kb_tensor *hc,
                       kb_dtype out_dtype) {
    static const char *const names[] = {"gemm", "gemm-acc", "gemm-bias", "gemm-relu",
                                        "gemm-bias-relu"};
    struct rank *rk = me("kb_composite");
    if ((unsigned)op > KB_GEMM_BIAS_RELU) fail("kb_composite: unknown op %d", (int)op);
    checked_dtype(out_dtype, "kb_composite");
    tensor a = *get(rk, ha, names[op]), b = *get(rk, hb, names[op]), c = {0};
    if (hc) c = *get(rk, *hc, names[op]);
    if (a.ndim != 2 || b.ndim != 2 || a.shape[1] != b.shape[0] || a.dtype != b.dtype) {
        char sa[128], sb[128];
        fail("%s of %s %s and %s %s", names[op], shape_str(a.shape, a.ndim, sa, sizeof sa),
             dtype_name(a.dtype), shape_str(b.shape, b.ndim, sb, sizeof sb), dtype_name(b.dtype));
    }
    size_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
    /* The epilogue's operand: gemm-acc [m, n], a bias [n]; [1, n] for either. */
    int wants_c = op == KB_GEMM_ACC || op == KB_GEMM_BIAS || op == KB_GEMM_BIAS_RELU;
    int c_ok = hc && ((c.ndim == 2 && c.shape[0] == 1 && c.shape[1] == n) ||
                      (op == KB_GEMM_ACC ? c.ndim == 2 && c.shape[0] == m && c.shape[1] == n
                                         : c.ndim == 1 && c.shape[0] == n));
    if (wants_c != (hc != NULL) || (hc && !c_ok)) {
        char sc[128];
        fail("composite %s of an [%zu, %zu] result: c of shape %s", names[op], m, n,
             hc ? shape_str(c.shape, c.ndim, sc, sizeof sc) : "None");
    }
    size_t c_elems = hc ? t_elems(&c) : 1;
    size_t bytes = m * n * kb_itemsize(out_dtype);
    uint8_t *out = xalloc(bytes);
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++) {
            double r = 0;
            for (size_t p = 0; p < k; p++)
                r += get_elem(a.data, i * k + p, a.dtype) * get_elem(b.data, p * n + j, b.dtype);
            if (hc) r += get_elem(c.data, (i * n + j) % c_elems, c.dtype);
            if ((op == KB_GEMM_RELU || op == KB_GEMM_BIAS_RELU) && 0.0 > r) r = 0.0;
            put_elem(out, i * n + j, out_dtype, r);
        }
    }
    uint32_t shape[2] = {(uint32_t)m, (uint32_t)n};
    return new_tensor(rk, 0, shape, 2, out_dtype, out, bytes, NULL);
}

kb_tensor kb_gemm(kb_tensor a, kb_tensor b, kb_dtype out) {
    return kb_composite(KB_GEMM, a, b, NULL, out);
}

void kb_drop(kb_tensor h) {
    struct rank *rk = me("kb_drop");
    int32_t id = h.handle.__handle;
    if (id < 1 || (size_t)id > rk->nt || !rk->t[id - 1].live)
        fail("kb_drop: tensor handle %" PRId32 " is not live (dropped twice?)", id);
    tensor *t = &rk->t[id - 1];
    if (t->slot) give_slot(rk, t->slot);
    free(t->data);
    t->live = 0;
    if ((size_t)id - 1 < rk->t_hint) rk->t_hint = (size_t)id - 1;
}

uint64_t kb_tensor_addr(kb_tensor t) {
    struct rank *rk = me("kb_tensor_addr");
    return get(rk, t, "kb_tensor_addr")->addr;
}

uint64_t kb_tensor_nbytes(kb_tensor t) {
    struct rank *rk = me("kb_tensor_nbytes");
    return get(rk, t, "kb_tensor_nbytes")->len;
}

uint64_t kb_now_ps(void) { return 0; }

void kb_log(const char *msg) {
    struct rank *rk = me("kb_log");
    printf("[mock rank %" PRIu32 "] %s\n", rk->id, msg);
}

/* The helpers and the weak defaults of the optional hooks, as kernbench.c's. */
#include "kernbench_common.c"

/* ---- the runner ------------------------------------------------------------------ */

typedef struct {
    const char *dir;
    uint32_t peer;
    const char *peer_dir;
} link_t;

/* `rank`'s row of the builtin table `topo` (sim/src/ccl/tables.rs, as
 * mock.py's table()) into `out` (room for 4); its length, or -1 for an
 * unknown table. */
static int table(const char *topo, uint32_t n, uint32_t rank, uint32_t w, uint32_t h,
                 link_t *out) {
    int k = 0;
    if (strcmp(topo, "ring_1d") == 0) {
        out[k++] = (link_t){"E", (rank + 1) % n, "W"};
        out[k++] = (link_t){"W", (rank + n - 1) % n, "E"};
    } else if (strcmp(topo, "ring_1d_unidir") == 0) {
        out[k++] = (link_t){"E", (rank + 1) % n, "W"};
    } else if (strcmp(topo, "none") == 0) {
    } else if (strcmp(topo, "global_ring") == 0) {
        out[k++] = (link_t){"global_E", (rank + 1) % n, "global_W"};
        out[k++] = (link_t){"global_W", (rank + n - 1) % n, "global_E"};
    } else if (strcmp(topo, "tree_binary") == 0) {
        if (rank > 0) out[k++] = (link_t){"P", (rank - 1) / 2, rank % 2 == 1 ? "C0" : "C1"};
        if (2 * (uint64_t)rank + 1 < n) out[k++] = (link_t){"C0", 2 * rank + 1, "P"};
        if (2 * (uint64_t)rank + 2 < n) out[k++] = (link_t){"C1", 2 * rank + 2, "P"};
    } else if (strcmp(topo, "mesh_2d") == 0 || strcmp(topo, "torus_2d") == 0) {
        static const struct {
            const char *d, *back;
            int dx, dy;
        } compass[] = {{"E", "W", 1, 0}, {"W", "E", -1, 0}, {"S", "N", 0, 1}, {"N", "S", 0, -1}};
        int wrap = strcmp(topo, "torus_2d") == 0;
        long x = (long)(rank % w), y = (long)(rank / w);
        for (int i = 0; i < 4; i++) {
            long nx = x + compass[i].dx, ny = y + compass[i].dy;
            if (wrap) {
                nx = (nx % (long)w + (long)w) % (long)w;
                ny = (ny % (long)h + (long)h) % (long)h;
            }
            if (nx >= 0 && ny >= 0 && nx < (long)w && ny < (long)h && (nx != x || ny != y))
                out[k++] = (link_t){compass[i].d, (uint32_t)(ny * (long)w + nx), compass[i].back};
        }
    } else {
        return -1;
    }
    return k;
}

static void run_kernel(struct rank *rk) {
    kb_kernel(KB_MOCK_T_PTR, rk->args, rk->nargs);
    size_t unwaited = 0;
    for (size_t i = 0; i < rk->nf; i++) unwaited += rk->f[i].live != 0;
    if (unwaited)
        fail("the kernel ended without waiting for %zu recv_async future(s)", unwaited);
}

/* The rank is done (or failed): give back the slots its tensors and
 * futures still hold, tell the others, free what it has. */
static void finish(struct rank *rk) {
    struct run *run = rk->run;
    pthread_mutex_lock(&run->mu);
    for (size_t i = 0; i < rk->nt; i++)
        if (rk->t[i].live && rk->t[i].slot) rk->t[i].slot->slots_free++;
    for (size_t i = 0; i < rk->nf; i++)
        if (rk->f[i].live && rk->f[i].msg) rk->f[i].msg->ch->slots_free++;
    rk->finished = 1;
    pthread_cond_broadcast(&run->cv);
    pthread_mutex_unlock(&run->mu);
    for (size_t i = 0; i < rk->nt; i++)
        if (rk->t[i].live) free(rk->t[i].data);
    for (size_t i = 0; i < rk->nf; i++) {
        if (!rk->f[i].live) continue;
        free(rk->f[i].dir);
        free(rk->f[i].msg);
    }
    free(rk->t);
    free(rk->f);
    rk->t = NULL;
    rk->f = NULL;
    rk->nt = rk->nf = 0;
}

static void *rank_main(void *p) {
    cur = p;
    if (setjmp(cur->jb) == 0) run_kernel(cur);
    finish(cur);
    cur = NULL;
    return NULL;
}

static double deadlock_timeout(void) {
    const char *s = getenv("KB_MOCK_DEADLOCK_S");
    if (!s || !*s) return DEADLOCK_TIMEOUT_S;
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v > 0)) {
        fprintf(stderr, "kernbench mock: ignoring KB_MOCK_DEADLOCK_S=%s (not a positive number)\n",
                s);
        return DEADLOCK_TIMEOUT_S;
    }
    return v < 1e6 ? v : 1e6;
}

static int config_error(char *err, size_t errlen, const char *fmt, ...) {
    if (errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return 2;
}

int kb_mock_run(const kb_mock_config *cfg, double *const *inputs, double *const *outputs,
                char *err, size_t errlen) {
    if (errlen) err[0] = 0;
    if (!cfg || cfg->world_size == 0)
        return config_error(err, errlen, "mock: world_size must be >= 1");
    if ((unsigned)cfg->dtype > KB_F64)
        return config_error(err, errlen, "mock: unknown dtype %d", (int)cfg->dtype);
    uint32_t n = cfg->world_size;
    const char *topo = cfg->topology ? cfg->topology : "ring_1d";
    uint32_t n_slots = cfg->n_slots ? cfg->n_slots : 4;
    if (!inputs) return config_error(err, errlen, "mock: need one input per rank");
    for (uint32_t r = 0; r < n; r++)
        if (!inputs[r] && cfg->n_elem)
            return config_error(err, errlen, "mock: inputs[%" PRIu32 "] is NULL", r);
    uint32_t gw = 0, gh = 0;
    if (strcmp(topo, "mesh_2d") == 0 || strcmp(topo, "torus_2d") == 0) {
        uint32_t w = cfg->grid_w;
        if (!w)
            while ((uint64_t)(w + 1) * (w + 1) <= n) w++;
        if (w == 0 || n % w)
            return config_error(err, errlen,
                                "mock: world_size %" PRIu32 " is not a %" PRIu32 "-wide grid", n,
                                w);
        gw = w;
        gh = n / w;
    }
    link_t row[4];
    if (table(topo, n, 0, gw, gh, row) < 0)
        return config_error(err, errlen, "mock: unknown topology '%s'", topo);
    /* standard_kind(topology) or 0, as mock.py */
    int64_t kind = strcmp(topo, "torus_2d") == 0 ? 1 : 0;

    int64_t base[KB_MAX_ARGS];
    const int64_t *args = cfg->kernel_args;
    size_t nargs = cfg->nargs;
    if (!args) {
        nargs = kb_kernel_args(n, cfg->n_elem, 1, 1, base);
        if (nargs > KB_MAX_ARGS) nargs = KB_MAX_ARGS;
        args = base;
    }

    struct run run;
    memset(&run, 0, sizeof run);
    pthread_mutex_init(&run.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&run.cv, &ca);
    pthread_condattr_destroy(&ca);
    run.timeout_s = deadlock_timeout();
    run.n = n;
    run.ranks = calloc(n, sizeof *run.ranks);
    run.fail_order = calloc(n, sizeof *run.fail_order);
    size_t *nin = calloc(n, sizeof *nin);
    if (!run.ranks || !run.fail_order || !nin) {
        fprintf(stderr, "kernbench mock: out of memory\n");
        abort();
    }
    for (uint32_t r = 0; r < n; r++) {
        int k = table(topo, n, r, gw, gh, row);
        run.nchans += (size_t)k;
        run.ranks[r].ntx = (size_t)k;
        for (int i = 0; i < k; i++) nin[row[i].peer]++;
    }
    run.chans = xalloc(run.nchans * sizeof *run.chans);
    size_t itemsize = kb_itemsize(cfg->dtype);
    for (uint32_t r = 0; r < n; r++) {
        struct rank *rk = &run.ranks[r];
        rk->run = &run;
        rk->id = r;
        rk->tx = xalloc(rk->ntx * sizeof *rk->tx);
        rk->rx = xalloc(nin[r] * sizeof *rk->rx);
        rk->ntx = 0;
        rk->next_scratch = KB_MOCK_SCRATCH;
        rk->mem_len = (size_t)cfg->n_elem * itemsize;
        rk->mem = xalloc(rk->mem_len);
        for (size_t i = 0; i < cfg->n_elem; i++) put_elem(rk->mem, i, cfg->dtype, inputs[r][i]);
        rk->nargs = nargs + 4;
        rk->args = xalloc(rk->nargs * sizeof *rk->args);
        if (nargs) memcpy(rk->args, args, nargs * sizeof *args);
        rk->args[nargs] = r;
        rk->args[nargs + 1] = kind;
        rk->args[nargs + 2] = gw;
        rk->args[nargs + 3] = gh;
    }
    /* Channels in mock.py's order: rank by rank, its row in order; a
     * receiver's round-robin goes in the same order. */
    size_t c = 0;
    for (uint32_t r = 0; r < n; r++) {
        int k = table(topo, n, r, gw, gh, row);
        for (int i = 0; i < k; i++, c++) {
            struct chan *ch = &run.chans[c];
            memset(ch, 0, sizeof *ch);
            ch->dir = row[i].dir;
            ch->peer_dir = row[i].peer_dir;
            ch->from = r;
            ch->to = row[i].peer;
            ch->slots_free = n_slots;
            run.ranks[r].tx[run.ranks[r].ntx++] = ch;
            run.ranks[ch->to].rx[run.ranks[ch->to].nrx++] = ch;
        }
    }
    free(nin);

    uint32_t started = 0;
    int start_failed = 0;
    for (; started < n; started++) {
        if (pthread_create(&run.ranks[started].thread, NULL, rank_main, &run.ranks[started]) != 0) {
            start_failed = 1;
            pthread_mutex_lock(&run.mu);
            run.failed++; /* the started ranks give up */
            pthread_cond_broadcast(&run.cv);
            pthread_mutex_unlock(&run.mu);
            break;
        }
    }
    for (uint32_t r = 0; r < started; r++) pthread_join(run.ranks[r].thread, NULL);

    int rc = 0;
    if (start_failed) {
        rc = 1;
        if (errlen)
            snprintf(err, errlen, "mock: could not start the thread of rank %" PRIu32, started);
    } else if (run.nfail) {
        /* Each failure in order, the ranks failing the same way (a deadlock
         * seen by several ranks) with the first by their number only. */
        rc = 1;
        size_t at = 0;
        char *shown = calloc(run.nfail, 1);
        for (size_t i = 0; i < run.nfail && at < errlen; i++) {
            if (shown && shown[i]) continue;
            const struct rank *rk = &run.ranks[run.fail_order[i]];
            at += (size_t)snprintf(err + at, errlen - at, "%smock rank %" PRIu32 " failed: %s",
                                   i ? "; " : "", rk->id, rk->err);
            size_t same = 0;
            for (size_t j = i + 1; shown && j < run.nfail && at < errlen; j++) {
                const struct rank *other = &run.ranks[run.fail_order[j]];
                if (shown[j] || strcmp(other->err, rk->err) != 0) continue;
                shown[j] = 1;
                at += (size_t)snprintf(err + at, errlen - at, "%s%" PRIu32,
                                       same++ ? ", " : " (the same in rank(s) ", other->id);
            }
            if (same && at < errlen) at += (size_t)snprintf(err + at, errlen - at, ")");
        }
        free(shown);
    } else if (outputs) {
        for (uint32_t r = 0; r < n; r++)
            if (outputs[r])
                for (size_t i = 0; i < cfg->n_elem; i++)
                    outputs[r][i] = get_elem(run.ranks[r].mem, i, cfg->dtype);
    }

    for (size_t i = 0; i < run.nchans; i++) {
        while (run.chans[i].head) free(pop(&run.chans[i]));
    }
    for (uint32_t r = 0; r < n; r++) {
        struct rank *rk = &run.ranks[r];
        free(rk->mem);
        free(rk->args);
        free(rk->tx);
        free(rk->rx);
        free(rk->t);
        free(rk->f);
    }
    free(run.chans);
    free(run.ranks);
    free(run.fail_order);
    pthread_cond_destroy(&run.cv);
    pthread_mutex_destroy(&run.mu);
    return rc;
}
